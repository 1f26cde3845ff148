/* The model's interface: the entry's buffers and the arena it works in. */
#ifndef PRESK_LOSS_MODEL_H
#define PRESK_LOSS_MODEL_H

#include <stdint.h>

/* Scratch bytes one call of presk_loss needs (any storage aligned for double;
 * 64-byte alignment gives the native layout). One arena per concurrent call. */
#define PRESK_LOSS_ARENA_BYTES 192u

/* The inputs: row-major, bf16 as its 16 bits. */
typedef struct presk_loss_inputs {
    const uint16_t *theta_blocks_norm_gamma;  /* θ.blocks.norm.γ: bf16[3, 4] */
    const float *theta_blocks_proj_w;  /* θ.blocks.proj.w: f32[3, 4, 4] */
    const uint16_t *theta_blocks_proj_b;  /* θ.blocks.proj.b: bf16[3, 4] */
    const uint16_t *theta_final_gamma;  /* θ.final.γ: bf16[4] */
    const double *batch_0;  /* batch.0: f64[4, 4] */
    const double *batch_1;  /* batch.1: f64[4, 4] */
} presk_loss_inputs;

/* The outputs: row-major, bf16 as its 16 bits. */
typedef struct presk_loss_outputs {
    double *result;  /* result: f64[] */
} presk_loss_outputs;

/* Run the entry: read `in`, write every buffer of `out`, use `arena` (PRESK_LOSS_ARENA_BYTES bytes). */
void presk_loss(const presk_loss_inputs *in, presk_loss_outputs *out, void *arena);

#endif
