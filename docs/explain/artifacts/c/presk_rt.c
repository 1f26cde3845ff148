/* The Presk C runtime's conversions and fills (presk_rt.h). */
#include "presk_rt.h"

void presk_convert_f64_to_f32(float *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

void presk_convert_f64_to_bf16(uint16_t *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = presk_f32_to_bf16(presk_f64_to_f32_odd(src[i]));
}

void presk_convert_f32_to_f64(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (double)src[i];
}

void presk_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = presk_f32_to_bf16(src[i]);
}

void presk_convert_bf16_to_f64(double *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (double)presk_bf16_to_f32(src[i]);
}

void presk_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = presk_bf16_to_f32(src[i]);
}

void presk_fill_f64(double *dst, double value, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = value;
}

void presk_fill_f32(float *dst, float value, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = value;
}

void presk_fill_bf16(uint16_t *dst, uint16_t bits, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = bits;
}
