/* The host: a function per recorded Presk function, each launch under the
 * site it computes; the arena is planned statically (the native offsets). */
#include <stdint.h>
#include <string.h>

#include "model.h"
#include "presk_rt.h"

/* kernels.c */
void presk_kernel_k0(const float *restrict in0, float *restrict out0);
void presk_kernel_k1(const float *restrict in0, float *restrict out0);
void presk_kernel_k2(const float *restrict in0, const float *restrict in1, float *restrict out0);
void presk_kernel_k3(const float *restrict in0, const float *restrict in1, const uint16_t *restrict in2, float *restrict out0);
void presk_kernel_k4(const float *restrict in0, float *restrict out0);
void presk_kernel_k5(const float *restrict in0, const float *restrict in1, const uint16_t *restrict in2, float *restrict out0);
void presk_kernel_k6(const float *restrict in0, const float *restrict in1, float *restrict out0);
void presk_kernel_k7(const float *restrict in0, const float *restrict in1, float *restrict out0);
void presk_kernel_k8(const float *restrict in0, double *restrict out0);

/* RMSNorm.apply (RMSNorm.apply_2), laid out for its call in Block.apply_2.at.Tower.apply.0: 1 call per run, its buffers placed among Block.apply_2.at.Tower.apply.0's. */
static void presk_host_RMSNorm_apply_2_at_Block_apply_2_at_Tower_apply_0_0(const uint16_t *theta_gamma, const double *x, float *out, unsigned char *arena)
{
    /* RMSNorm.apply/%3 */
    float *x_f32 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_convert_f64_to_f32(x_f32, x, 16);
    float *t3 = (float *)(arena + 64);  /* f32[batch: 4, model: 4] */
    presk_kernel_k0(x_f32, t3);
    /* RMSNorm.apply/%4 (ms) */
    float *ms = (float *)(arena + 0);  /* f32[batch: 4] */
    presk_kernel_k1(t3, ms);
    /* RMSNorm.apply/%5 */
    double *t5 = (double *)(arena + 16);  /* f64[] */
    presk_fill_f64(t5, 0x1.0c6f7a0b5ed8dp-20, 1);  /* 1e-06 */
    /* RMSNorm.apply/%6 */
    float *t5_f32 = (float *)(arena + 24);  /* f32[] */
    presk_convert_f64_to_f32(t5_f32, t5, 1);
    /* RMSNorm.apply/%7 (fused) */
    float *t7 = (float *)(arena + 128);  /* f32[batch: 4] */
    presk_kernel_k2(ms, t5_f32, t7);
    /* RMSNorm.apply/%8 */
    float *x_f32_2 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_convert_f64_to_f32(x_f32_2, x, 16);
    /* RMSNorm.apply/%10 (fused) */
    presk_kernel_k3(x_f32_2, t7, theta_gamma, out);
}

/* Linear.apply: 3 calls per run, 0 bytes of arena. */
static void presk_host_Linear_apply(const float *theta_w, const uint16_t *theta_b, const float *x, float *out, unsigned char *arena)
{
    (void)arena;
    /* Linear.apply/%3 + Linear.apply/%5 */
    presk_kernel_k5(x, theta_w, theta_b, out);
}

/* Block.apply (Block.apply_2), laid out for its call in Tower.apply: 1 call per run, its buffers placed among Tower.apply's. */
static void presk_host_Block_apply_2_at_Tower_apply_0(const uint16_t *theta_norm_gamma, const float *theta_proj_w, const uint16_t *theta_proj_b, const double *x, float *out, unsigned char *arena)
{
    /* Block.apply/%4 */
    float *t4 = (float *)(arena + 64);  /* f32[batch: 4, model: 4] */
    presk_host_RMSNorm_apply_2_at_Block_apply_2_at_Tower_apply_0_0(theta_norm_gamma, x, t4, arena + 0);
    /* Block.apply/%5 */
    float *t5 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_kernel_k4(t4, t5);
    /* Block.apply/%7 */
    float *t7 = (float *)(arena + 64);  /* f32[batch: 4, 4] */
    presk_host_Linear_apply(theta_proj_w, theta_proj_b, t5, t7, arena + 0);
    /* Block.apply/%8 */
    float *x_f32 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_convert_f64_to_f32(x_f32, x, 16);
    presk_kernel_k6(x_f32, t7, out);
}

/* RMSNorm.apply, laid out for its call in Block.apply.even.at.Tower.apply.1: 3 calls per run, its buffers placed among Block.apply.even.at.Tower.apply.1's. */
static void presk_host_RMSNorm_apply_at_Block_apply_even_at_Tower_apply_1_0(const uint16_t *theta_gamma, const float *x, float *out, unsigned char *arena)
{
    /* RMSNorm.apply/%3 */
    float *t3 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_kernel_k0(x, t3);
    /* RMSNorm.apply/%4 (ms) */
    float *ms = (float *)(arena + 64);  /* f32[batch: 4] */
    presk_kernel_k1(t3, ms);
    /* RMSNorm.apply/%5 */
    double *t5 = (double *)(arena + 0);  /* f64[] */
    presk_fill_f64(t5, 0x1.0c6f7a0b5ed8dp-20, 1);  /* 1e-06 */
    /* RMSNorm.apply/%6 */
    float *t5_f32 = (float *)(arena + 8);  /* f32[] */
    presk_convert_f64_to_f32(t5_f32, t5, 1);
    /* RMSNorm.apply/%7 (fused) */
    float *t7 = (float *)(arena + 80);  /* f32[batch: 4] */
    presk_kernel_k2(ms, t5_f32, t7);
    /* RMSNorm.apply/%10 (fused) */
    presk_kernel_k3(x, t7, theta_gamma, out);
}

/* Block.apply, laid out for the even iterations of its fold in Tower.apply: 2 calls per run, its buffers placed among Tower.apply's. */
static void presk_host_Block_apply_even_at_Tower_apply_1(const uint16_t *theta_norm_gamma, const float *theta_proj_w, const uint16_t *theta_proj_b, const float *x, float *out, unsigned char *arena)
{
    /* Block.apply/%4 */
    float *t4 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_host_RMSNorm_apply_at_Block_apply_even_at_Tower_apply_1_0(theta_norm_gamma, x, t4, arena + 0);
    /* Block.apply/%5 */
    float *t5 = (float *)(arena + 64);  /* f32[batch: 4, model: 4] */
    presk_kernel_k4(t4, t5);
    /* Block.apply/%7 */
    float *t7 = (float *)(arena + 0);  /* f32[batch: 4, 4] */
    presk_host_Linear_apply(theta_proj_w, theta_proj_b, t5, t7, arena + 0);
    /* Block.apply/%8 */
    presk_kernel_k6(x, t7, out);
}

/* RMSNorm.apply, laid out for its call in Block.apply.odd.at.Tower.apply.1: 3 calls per run, its buffers placed among Block.apply.odd.at.Tower.apply.1's. */
static void presk_host_RMSNorm_apply_at_Block_apply_odd_at_Tower_apply_1_0(const uint16_t *theta_gamma, const float *x, float *out, unsigned char *arena)
{
    /* RMSNorm.apply/%3 */
    float *t3 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_kernel_k0(x, t3);
    /* RMSNorm.apply/%4 (ms) */
    float *ms = (float *)(arena + 128);  /* f32[batch: 4] */
    presk_kernel_k1(t3, ms);
    /* RMSNorm.apply/%5 */
    double *t5 = (double *)(arena + 0);  /* f64[] */
    presk_fill_f64(t5, 0x1.0c6f7a0b5ed8dp-20, 1);  /* 1e-06 */
    /* RMSNorm.apply/%6 */
    float *t5_f32 = (float *)(arena + 8);  /* f32[] */
    presk_convert_f64_to_f32(t5_f32, t5, 1);
    /* RMSNorm.apply/%7 (fused) */
    float *t7 = (float *)(arena + 144);  /* f32[batch: 4] */
    presk_kernel_k2(ms, t5_f32, t7);
    /* RMSNorm.apply/%10 (fused) */
    presk_kernel_k3(x, t7, theta_gamma, out);
}

/* Block.apply, laid out for the odd iterations of its fold in Tower.apply: 2 calls per run, its buffers placed among Tower.apply's. */
static void presk_host_Block_apply_odd_at_Tower_apply_1(const uint16_t *theta_norm_gamma, const float *theta_proj_w, const uint16_t *theta_proj_b, const float *x, float *out, unsigned char *arena)
{
    /* Block.apply/%4 */
    float *t4 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_host_RMSNorm_apply_at_Block_apply_odd_at_Tower_apply_1_0(theta_norm_gamma, x, t4, arena + 0);
    /* Block.apply/%5 */
    float *t5 = (float *)(arena + 128);  /* f32[batch: 4, model: 4] */
    presk_kernel_k4(t4, t5);
    /* Block.apply/%7 */
    float *t7 = (float *)(arena + 0);  /* f32[batch: 4, 4] */
    presk_host_Linear_apply(theta_proj_w, theta_proj_b, t5, t7, arena + 0);
    /* Block.apply/%8 */
    presk_kernel_k6(x, t7, out);
}

/* RMSNorm.apply, laid out for its call in Tower.apply: 3 calls per run, its buffers placed among Tower.apply's. */
static void presk_host_RMSNorm_apply_at_Tower_apply_2(const uint16_t *theta_gamma, const float *x, float *out, unsigned char *arena)
{
    /* RMSNorm.apply/%3 */
    float *t3 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_kernel_k0(x, t3);
    /* RMSNorm.apply/%4 (ms) */
    float *ms = (float *)(arena + 64);  /* f32[batch: 4] */
    presk_kernel_k1(t3, ms);
    /* RMSNorm.apply/%5 */
    double *t5 = (double *)(arena + 0);  /* f64[] */
    presk_fill_f64(t5, 0x1.0c6f7a0b5ed8dp-20, 1);  /* 1e-06 */
    /* RMSNorm.apply/%6 */
    float *t5_f32 = (float *)(arena + 16);  /* f32[] */
    presk_convert_f64_to_f32(t5_f32, t5, 1);
    /* RMSNorm.apply/%7 (fused) */
    float *t7 = (float *)(arena + 0);  /* f32[batch: 4] */
    presk_kernel_k2(ms, t5_f32, t7);
    /* RMSNorm.apply/%10 (fused) */
    presk_kernel_k3(x, t7, theta_gamma, out);
}

/* Tower.apply: 1 call per run, 192 bytes of arena. */
static void presk_host_Tower_apply(const uint16_t *theta_blocks_norm_gamma, const float *theta_blocks_proj_w, const uint16_t *theta_blocks_proj_b, const uint16_t *theta_final_gamma, const double *x, float *out, unsigned char *arena)
{
    /* Tower.apply/%3 */
    const uint16_t *theta_blocks_norm_gamma_at = theta_blocks_norm_gamma + 0 * 4;
    const float *theta_blocks_proj_w_at = theta_blocks_proj_w + 0 * 16;
    const uint16_t *theta_blocks_proj_b_at = theta_blocks_proj_b + 0 * 4;
    float *t3 = (float *)(arena + 128);  /* f32[batch: 4, model: 4] */
    presk_host_Block_apply_2_at_Tower_apply_0(theta_blocks_norm_gamma_at, theta_blocks_proj_w_at, theta_blocks_proj_b_at, x, t3, arena + 0);
    float *t3_2 = (float *)(arena + 64);  /* f32[batch: 4, model: 4] */
    float *t3_3 = (float *)(arena + 128);  /* f32[batch: 4, model: 4] */
    const float *t3_acc = t3;
    for (int64_t l = 1; l < 3; l++) {
        float *next = ((l - 1) % 2 == 0) ? t3_2 : t3_3;
        const uint16_t *theta_blocks_norm_gamma_at_2 = theta_blocks_norm_gamma + l * 4;
        const float *theta_blocks_proj_w_at_2 = theta_blocks_proj_w + l * 16;
        const uint16_t *theta_blocks_proj_b_at_2 = theta_blocks_proj_b + l * 4;
        if ((l - 1) % 2 == 0) {  /* the even iterations' layout */
            presk_host_Block_apply_even_at_Tower_apply_1(theta_blocks_norm_gamma_at_2, theta_blocks_proj_w_at_2, theta_blocks_proj_b_at_2, t3_acc, next, arena + 0);
        } else {
            presk_host_Block_apply_odd_at_Tower_apply_1(theta_blocks_norm_gamma_at_2, theta_blocks_proj_w_at_2, theta_blocks_proj_b_at_2, t3_acc, next, arena + 0);
        }
        t3_acc = next;
    }
    /* Tower.apply/%6 */
    presk_host_RMSNorm_apply_at_Tower_apply_2(theta_final_gamma, t3_acc, out, arena + 0);
}

/* loss: 1 call per run, 192 bytes of arena. */
static void presk_host_loss(const uint16_t *theta_blocks_norm_gamma, const float *theta_blocks_proj_w, const uint16_t *theta_blocks_proj_b, const uint16_t *theta_final_gamma, const double *batch_0, const double *batch_1, double *out, unsigned char *arena)
{
    /* loss/%4 */
    float *t4 = (float *)(arena + 64);  /* f32[batch: 4, model: 4] */
    presk_host_Tower_apply(theta_blocks_norm_gamma, theta_blocks_proj_w, theta_blocks_proj_b, theta_final_gamma, batch_0, t4, arena + 0);
    /* loss/%5 */
    float *batch_1_f32 = (float *)(arena + 0);  /* f32[batch: 4, model: 4] */
    presk_convert_f64_to_f32(batch_1_f32, batch_1, 16);
    /* loss/%6 (fused) */
    float *t6 = (float *)(arena + 128);  /* f32[batch: 4, model: 4] */
    presk_kernel_k7(t4, batch_1_f32, t6);
    /* loss/%7 */
    presk_kernel_k8(t6, out);
}

void presk_loss(const presk_loss_inputs *in, presk_loss_outputs *out, void *arena)
{
    presk_host_loss(in->theta_blocks_norm_gamma, in->theta_blocks_proj_w, in->theta_blocks_proj_b, in->theta_final_gamma, in->batch_0, in->batch_1, out->result, (unsigned char *)arena);
}
