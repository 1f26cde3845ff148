/* The Presk C runtime: bf16 by bits, conversions between the element types,
 * numpy's min/max and heaviside -- the semantics of presk/analysis/kernel_interpret.py. */
#ifndef PRESK_RT_H
#define PRESK_RT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum presk_type { PRESK_F64, PRESK_F32, PRESK_BF16 } presk_type;

/* bf16 bits -> f32, exactly. */
static inline float presk_bf16_to_f32(uint16_t bits)
{
    const uint32_t u = (uint32_t)bits << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* f32 -> bf16 bits, to nearest even by bits; a NaN stays a quiet NaN with its sign. */
static inline uint16_t presk_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t upper = u >> 16;
    const uint32_t rounded = (u + 0x7FFFu + (upper & 1u)) >> 16;
    return (uint16_t)(x != x ? (upper | 0x40u) : rounded);
}

/* f64 -> f32 rounded to odd: rounding that to bf16 is the correct rounding of x. */
static inline float presk_f64_to_f32_odd(double x)
{
    const float t = (float)x;
    const double back = (double)t;
    const int inexact = back != x && x - x == 0.0;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const uint32_t toward_zero = fabs(back) > fabs(x) ? bits - 1u : bits;
    const uint32_t out = inexact ? (toward_zero | 1u) : bits;
    float r;
    memcpy(&r, &out, sizeof r);
    return r;
}

/* numpy's minimum/maximum: NaN from either side; of two equal values the second. */
static inline double presk_min_f64(double a, double b) { return (a < b || a != a) ? a : b; }
static inline double presk_max_f64(double a, double b) { return (a > b || a != a) ? a : b; }
static inline float presk_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float presk_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }

/* numpy's heaviside: 1 above 0, 0 below, h at 0, the canonical quiet NaN for a NaN. */
static inline double presk_heaviside_f64(double x, double h)
{
    const uint64_t bits = UINT64_C(0x7FF8000000000000);
    double nan;
    memcpy(&nan, &bits, sizeof nan);
    return x > 0.0 ? 1.0 : x < 0.0 ? 0.0 : x != x ? nan : h;
}
static inline float presk_heaviside_f32(float x, float h)
{
    const uint32_t bits = UINT32_C(0x7FC00000);
    float nan;
    memcpy(&nan, &bits, sizeof nan);
    return x > 0.0f ? 1.0f : x < 0.0f ? 0.0f : x != x ? nan : h;
}

/* A host `convert`: every element, rounded once to nearest even. */
void presk_convert_f64_to_f32(float *dst, const double *src, size_t n);
void presk_convert_f64_to_bf16(uint16_t *dst, const double *src, size_t n);
void presk_convert_f32_to_f64(double *dst, const float *src, size_t n);
void presk_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void presk_convert_bf16_to_f64(double *dst, const uint16_t *src, size_t n);
void presk_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n);

/* A host `fill`: every element the constant (already in the buffer's type). */
void presk_fill_f64(double *dst, double value, size_t n);
void presk_fill_f32(float *dst, float value, size_t n);
void presk_fill_bf16(uint16_t *dst, uint16_t bits, size_t n);

/* The math library (presk_libm.c): the native backend's functions. */
float presk_erf_f32(float);

#endif
