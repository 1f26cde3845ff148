// The C export of a small PSK-Kernel module (presk/emit/c_program.py): a kernel's nest
// as plain C loops under its listing (a bf16 load widened by bits, numpy's max, the math
// library's erf, a cast, a sum carried in a variable, a bf16 store rounded by bits), and
// the host: a fill, a convert, a fold over a stacked parameter, each launch under its site.
// RUN: python -m presk.emit.c_program %s kernels.c | filecheck %s --check-prefix=KERNELS
// RUN: python -m presk.emit.c_program %s model.c | filecheck %s --check-prefix=MODEL
// RUN: python -m presk.emit.c_program %s presk_libm.c | filecheck %s --check-prefix=LIBM

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, batch: 2, 3>, %1: !psk_kernel.buffer<bf16, 3>, %2: !psk_kernel.buffer<f64, batch: 2>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "fused 3 steps"} {
    psk_kernel.for %3 = 0 to 2 {
      %4 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
      %5 = psk_kernel.for %6 = 0 to 3 iter(%7 = %4) -> (f64) {
        %8 = psk_kernel.load %0[%3, %6] : !psk_kernel.buffer<f32, batch: 2, 3> -> f32
        %9 = psk_kernel.load %1[%6] : !psk_kernel.buffer<bf16, 3> -> f32
        %10 = psk_kernel.max %8, %9 : f32
        %11 = psk_kernel.math "erf" %10 : f32
        %12 = psk_kernel.cast %11 : f32 -> f64
        %13 = psk_kernel.add %7, %12 : f64
        psk_kernel.yield %13 : f64
      }
      psk_kernel.store %5, %2[%3] : !psk_kernel.buffer<f64, batch: 2>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, batch: 2, 3>, %1: !psk_kernel.buffer<f32>, %2: !psk_kernel.buffer<f32, batch: 2, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "mul"} {
    psk_kernel.for %3 = 0 to 2 {
      psk_kernel.for %4 = 0 to 3 {
        %5 = psk_kernel.load %0[%3, %4] : !psk_kernel.buffer<f32, batch: 2, 3> -> f32
        %6 = psk_kernel.load %1[] : !psk_kernel.buffer<f32> -> f32
        %7 = psk_kernel.mul %5, %6 : f32
        psk_kernel.store %7, %2[%3, %4] : !psk_kernel.buffer<f32, batch: 2, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.host @f(%0: !psk_kernel.buffer<bf16, 3>, %1: !psk_kernel.buffer<f64, batch: 2, 3>, %2: !psk_kernel.buffer<f64, batch: 2>) attributes {arg_names = ["θ.γ", "x", "out"], entry, function = "f", outputs = 1 : i64} {
    %3 = psk_kernel.mark
    %4 = psk_kernel.alloc {site = "f/%2"} : !psk_kernel.buffer<f32>
    psk_kernel.fill %4 {site = "f/%2", value = 1.000000e-01 : f64} : !psk_kernel.buffer<f32>
    %5 = psk_kernel.alloc {site = "f/%3"} : !psk_kernel.buffer<f32, batch: 2, 3>
    psk_kernel.convert %1 to %5 {site = "f/%3"} : !psk_kernel.buffer<f64, batch: 2, 3> -> !psk_kernel.buffer<f32, batch: 2, 3>
    %6 = psk_kernel.alloc {site = "f/%4"} : !psk_kernel.buffer<f32, batch: 2, 3>
    %7 = psk_kernel.alloc {site = "f/%4"} : !psk_kernel.buffer<f32, batch: 2, 3>
    %8 = psk_kernel.fold %9 = 0 to 2, %10 = %5, %11 in (%6, %7) {site = "f/%4"} : !psk_kernel.buffer<f32, batch: 2, 3> {
      psk_kernel.launch @k1(%10, %4, %11) {site = "f/%4", sites = ["f/%4"]} : (!psk_kernel.buffer<f32, batch: 2, 3>, !psk_kernel.buffer<f32>, !psk_kernel.buffer<f32, batch: 2, 3>)
    }
    psk_kernel.launch @k0(%8, %0, %2) {fused, site = "f/%7", sites = ["f/%5", "f/%6", "f/%7"]} : (!psk_kernel.buffer<f32, batch: 2, 3>, !psk_kernel.buffer<bf16, 3>, !psk_kernel.buffer<f64, batch: 2>)
    psk_kernel.release %3
  }
}

// KERNELS: #include "presk_rt.h"
// KERNELS: void presk_kernel_k0(const float *restrict in0, const uint16_t *restrict in1, double *restrict out0);
// KERNELS: void presk_kernel_k1(const float *restrict in0, const float *restrict in1, float *restrict out0);
// KERNELS-LABEL: // k0: 1 launch at f/%7 (fused)
// KERNELS-NEXT: // kernel fused 3 steps (%0 : f32[batch: 2, 3], %1 : bf16[3]) -> %2 : f64[batch: 2] {
// KERNELS-NEXT: //   for i0 in 0..2 {
// KERNELS-NEXT: //     s0 = 0
// KERNELS-NEXT: //     for i1 in 0..3 {
// KERNELS-NEXT: //       s0 = (s0 + f64(erf(max(%0[i0, i1], %1[i1]))))
// KERNELS-NEXT: //     }
// KERNELS-NEXT: //     %2[i0] = s0
// KERNELS-NEXT: //   }
// KERNELS-NEXT: // }
// KERNELS-NEXT: void presk_kernel_k0(const float *restrict in0, const uint16_t *restrict in1, double *restrict out0)
// KERNELS-NEXT: {
// KERNELS-NEXT:     for (int64_t i0 = 0; i0 < 2; i0++) {
// KERNELS-NEXT:         const double v0 = 0x0.0p+0;  /* 0.0 */
// KERNELS-NEXT:         double s0 = v0;
// KERNELS-NEXT:         for (int64_t i1 = 0; i1 < 3; i1++) {
// KERNELS-NEXT:             const float v1 = in0[i0 * 3 + i1];
// KERNELS-NEXT:             const float v2 = presk_bf16_to_f32(in1[i1]);
// KERNELS-NEXT:             const float v3 = presk_max_f32(v1, v2);
// KERNELS-NEXT:             const float v4 = presk_erf_f32(v3);
// KERNELS-NEXT:             const double v5 = (double)v4;
// KERNELS-NEXT:             const double v6 = s0 + v5;
// KERNELS-NEXT:             s0 = v6;
// KERNELS-NEXT:         }
// KERNELS-NEXT:         out0[i0] = s0;
// KERNELS-NEXT:     }
// KERNELS-NEXT: }
// KERNELS-LABEL: // k1: 2 launches at f/%4
// KERNELS: void presk_kernel_k1(const float *restrict in0, const float *restrict in1, float *restrict out0)
// KERNELS-NEXT: {
// KERNELS-NEXT:     for (int64_t i0 = 0; i0 < 2; i0++) {
// KERNELS-NEXT:         for (int64_t i1 = 0; i1 < 3; i1++) {
// KERNELS-NEXT:             const float v0 = in0[i0 * 3 + i1];
// KERNELS-NEXT:             const float v1 = in1[0];
// KERNELS-NEXT:             const float v2 = v0 * v1;
// KERNELS-NEXT:             out0[i0 * 3 + i1] = v2;

// MODEL: /* f: 1 call per run, 56 bytes of arena. */
// MODEL-NEXT: static void presk_host_f(const uint16_t *theta_gamma, const double *x, double *out, unsigned char *arena)
// MODEL-NEXT: {
// MODEL-NEXT:     /* f/%2 */
// MODEL-NEXT:     float *t2 = (float *)(arena + 24);  /* f32[] */
// MODEL-NEXT:     presk_fill_f32(t2, 0x1.99999a0000000p-4f, 1);  /* 0.1 */
// MODEL-NEXT:     /* f/%3 */
// MODEL-NEXT:     float *x_f32 = (float *)(arena + 0);  /* f32[batch: 2, 3] */
// MODEL-NEXT:     presk_convert_f64_to_f32(x_f32, x, 6);
// MODEL-NEXT:     /* f/%4 */
// MODEL-NEXT:     float *t4 = (float *)(arena + 32);  /* f32[batch: 2, 3] */
// MODEL-NEXT:     float *t4_2 = (float *)(arena + 0);  /* f32[batch: 2, 3] */
// MODEL-NEXT:     const float *x_f32_acc = x_f32;
// MODEL-NEXT:     for (int64_t l = 0; l < 2; l++) {
// MODEL-NEXT:         float *next = ((l - 0) % 2 == 0) ? t4 : t4_2;
// MODEL-NEXT:         presk_kernel_k1(x_f32_acc, t2, next);
// MODEL-NEXT:         x_f32_acc = next;
// MODEL-NEXT:     }
// MODEL-NEXT:     /* f/%7 (fused) */
// MODEL-NEXT:     presk_kernel_k0(x_f32_acc, theta_gamma, out);
// MODEL-NEXT: }
// MODEL: void presk_f(const presk_f_inputs *in, presk_f_outputs *out, void *arena)
// MODEL-NEXT: {
// MODEL-NEXT:     presk_host_f(in->theta_gamma, in->x, out->out, (unsigned char *)arena);
// MODEL-NEXT: }

// LIBM: float presk_erf_f32(float x);
// LIBM-NOT: presk_erf_f64
