/* The kernels: each one loop nest of PSK-Kernel, in the nest's order of
 * operations (a sum in the blocked order of presk/summation.py), as the
 * native backend computes it. */
#include <math.h>
#include <stdint.h>

#include "presk_rt.h"

void presk_kernel_k0(const float *restrict in0, float *restrict out0);
void presk_kernel_k1(const float *restrict in0, float *restrict out0);
void presk_kernel_k2(const float *restrict in0, const float *restrict in1, float *restrict out0);
void presk_kernel_k3(const float *restrict in0, const float *restrict in1, const uint16_t *restrict in2, float *restrict out0);
void presk_kernel_k4(const float *restrict in0, float *restrict out0);
void presk_kernel_k5(const float *restrict in0, const float *restrict in1, const uint16_t *restrict in2, float *restrict out0);
void presk_kernel_k6(const float *restrict in0, const float *restrict in1, float *restrict out0);
void presk_kernel_k7(const float *restrict in0, const float *restrict in1, float *restrict out0);
void presk_kernel_k8(const float *restrict in0, double *restrict out0);

// k0: 4 launches at RMSNorm.apply/%3
// kernel pow 2 (%0 : f32[batch: 4, model: 4]) -> %1 : f32[batch: 4, model: 4] {
//   for i0 in 0..4 {
//     for i1 in 0..4 {
//       %1[i0, i1] = (%0[i0, i1] * %0[i0, i1])
//     }
//   }
// }
void presk_kernel_k0(const float *restrict in0, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v0 = in0[i0 * 4 + i1];
            const float v1 = v0 * v0;
            out0[i0 * 4 + i1] = v1;
        }
    }
}

// k1: 4 launches at RMSNorm.apply/%4 (ms)
// kernel mean axis model (%0 : f32[batch: 4, model: 4]) -> %1 : f32[batch: 4] {
//   for i0 in 0..4 {
//     s0 = 0
//     for i1 in 0..4 in 4 partials, then pairwise {
//       s0 = (s0 + %0[i0, i1])
//     }
//     %1[i0] = (s0 / 4)
//   }
// }
void presk_kernel_k1(const float *restrict in0, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        const float v0 = 0x0.0p+0f;  /* 0.0 */
        float s0[4];
        for (int64_t j = 0; j < 4; j++) s0[j] = v0;
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v1 = in0[i0 * 4 + i1];
            const float v2 = s0[(i1 - 0) % 4] + v1;
            s0[(i1 - 0) % 4] = v2;
        }
        for (int64_t h = 2; h > 0; h /= 2)
            for (int64_t j = 0; j < h; j++) s0[j] = s0[j] + s0[j + h];
        const float v3 = 0x1.0000000000000p+2f;  /* 4.0 */
        const float v4 = s0[0] / v3;
        out0[i0] = v4;
    }
}

// k2: 4 launches at RMSNorm.apply/%7 (fused)
// kernel fused 2 steps (%0 : f32[batch: 4], %1 : f32[]) -> %2 : f32[batch: 4] {
//   for i0 in 0..4 {
//     %2[i0] = sqrt((%0[i0] + %1[]))
//   }
// }
void presk_kernel_k2(const float *restrict in0, const float *restrict in1, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        const float v0 = in0[i0];
        const float v1 = in1[0];
        const float v2 = v0 + v1;
        const float v3 = sqrtf(v2);
        out0[i0] = v3;
    }
}

// k3: 4 launches at RMSNorm.apply/%10 (fused)
// kernel fused 2 steps (%0 : f32[batch: 4, model: 4], %1 : f32[batch: 4], %2 : bf16[4]) -> %3 : f32[batch: 4, model: 4] {
//   for i0 in 0..4 {
//     for i1 in 0..4 {
//       %3[i0, i1] = ((%0[i0, i1] / %1[i0]) * %2[i1])
//     }
//   }
// }
void presk_kernel_k3(const float *restrict in0, const float *restrict in1, const uint16_t *restrict in2, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v0 = in0[i0 * 4 + i1];
            const float v1 = in1[i0];
            const float v2 = v0 / v1;
            const float v3 = presk_bf16_to_f32(in2[i1]);
            const float v4 = v2 * v3;
            out0[i0 * 4 + i1] = v4;
        }
    }
}

// k4: 3 launches at Block.apply/%5
// kernel gelu (%0 : f32[batch: 4, model: 4]) -> %1 : f32[batch: 4, model: 4] {
//   for i0 in 0..4 {
//     for i1 in 0..4 {
//       %1[i0, i1] = (%0[i0, i1] * ((1 + erf((%0[i0, i1] / 1.4142135623730951))) / 2))
//     }
//   }
// }
void presk_kernel_k4(const float *restrict in0, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v0 = in0[i0 * 4 + i1];
            const float v1 = 0x1.0000000000000p+0f;  /* 1.0 */
            const float v2 = 0x1.6a09e60000000p+0f;  /* 1.4142135623730951 */
            const float v3 = v0 / v2;
            const float v4 = presk_erf_f32(v3);
            const float v5 = v1 + v4;
            const float v6 = 0x1.0000000000000p+1f;  /* 2.0 */
            const float v7 = v5 / v6;
            const float v8 = v0 * v7;
            out0[i0 * 4 + i1] = v8;
        }
    }
}

// k5: 3 launches at Linear.apply/%3 + Linear.apply/%5
// kernel dot+add (%0 : f32[batch: 4, 4], %1 : f32[4, 4], %2 : bf16[4]) -> %3 : f32[batch: 4, 4] {
//   // layout: tiled, tile [4, 4], lanes 4, order IJ
//   for i0 in 0..4 {
//     for i1 in 0..4 {
//       s0 = 0
//       for i2 in 0..4 {
//         s0 = (s0 + (%0[i0, i2] * %1[i2, i1]))
//       }
//       %3[i0, i1] = (s0 + %2[i1])
//     }
//   }
// }
void presk_kernel_k5(const float *restrict in0, const float *restrict in1, const uint16_t *restrict in2, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v0 = 0x0.0p+0f;  /* 0.0 */
            float s0 = v0;
            for (int64_t i2 = 0; i2 < 4; i2++) {
                const float v1 = in0[i0 * 4 + i2];
                const float v2 = in1[i2 * 4 + i1];
                const float v3 = v1 * v2;
                const float v4 = s0 + v3;
                s0 = v4;
            }
            const float v5 = presk_bf16_to_f32(in2[i1]);
            const float v6 = s0 + v5;
            out0[i0 * 4 + i1] = v6;
        }
    }
}

// k6: 3 launches at Block.apply/%8
// kernel add (%0 : f32[batch: 4, model: 4], %1 : f32[batch: 4, 4]) -> %2 : f32[batch: 4, model: 4] {
//   for i0 in 0..4 {
//     for i1 in 0..4 {
//       %2[i0, i1] = (%0[i0, i1] + %1[i0, i1])
//     }
//   }
// }
void presk_kernel_k6(const float *restrict in0, const float *restrict in1, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v0 = in0[i0 * 4 + i1];
            const float v1 = in1[i0 * 4 + i1];
            const float v2 = v0 + v1;
            out0[i0 * 4 + i1] = v2;
        }
    }
}

// k7: 1 launch at loss/%6 (fused)
// kernel fused 2 steps (%0 : f32[batch: 4, model: 4], %1 : f32[batch: 4, model: 4]) -> %2 : f32[batch: 4, model: 4] {
//   for i0 in 0..4 {
//     for i1 in 0..4 {
//       %2[i0, i1] = ((%0[i0, i1] - %1[i0, i1]) * (%0[i0, i1] - %1[i0, i1]))
//     }
//   }
// }
void presk_kernel_k7(const float *restrict in0, const float *restrict in1, float *restrict out0)
{
    for (int64_t i0 = 0; i0 < 4; i0++) {
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v0 = in0[i0 * 4 + i1];
            const float v1 = in1[i0 * 4 + i1];
            const float v2 = v0 - v1;
            const float v3 = v2 * v2;
            out0[i0 * 4 + i1] = v3;
        }
    }
}

// k8: 1 launch at loss/%7
// kernel mean (%0 : f32[batch: 4, model: 4]) -> %1 : f64[] {
//   s0 = 0
//   for i0 in 0..4 in 4 partials, then pairwise {
//     s1 = 0
//     for i1 in 0..4 in 4 partials, then pairwise {
//       s1 = (s1 + f64(%0[i0, i1]))
//     }
//     s0 = (s0 + s1)
//   }
//   %1[] = (s0 / 16)
// }
void presk_kernel_k8(const float *restrict in0, double *restrict out0)
{
    const double v0 = 0x0.0p+0;  /* 0.0 */
    double s0[4];
    for (int64_t j = 0; j < 4; j++) s0[j] = v0;
    for (int64_t i0 = 0; i0 < 4; i0++) {
        const double v1 = 0x0.0p+0;  /* 0.0 */
        double s1[4];
        for (int64_t j = 0; j < 4; j++) s1[j] = v1;
        for (int64_t i1 = 0; i1 < 4; i1++) {
            const float v2 = in0[i0 * 4 + i1];
            const double v3 = (double)v2;
            const double v4 = s1[(i1 - 0) % 4] + v3;
            s1[(i1 - 0) % 4] = v4;
        }
        for (int64_t h = 2; h > 0; h /= 2)
            for (int64_t j = 0; j < h; j++) s1[j] = s1[j] + s1[j + h];
        const double v5 = s0[(i0 - 0) % 4] + s1[0];
        s0[(i0 - 0) % 4] = v5;
    }
    for (int64_t h = 2; h > 0; h /= 2)
        for (int64_t j = 0; j < h; j++) s0[j] = s0[j] + s0[j + h];
    const double v6 = 0x1.0000000000000p+4;  /* 16.0 */
    const double v7 = s0[0] / v6;
    out0[0] = v7;
}
