// convert-psk-kernel-to-std on fused contractions (a realization's `fma` site): each
// `psk_kernel.fma` is ONE llvm.fma — a scalar `llvm.fma.f64` in a nest as written, and in a
// register tile [2, 4] one `llvm.fma.v4f32` per row on the j operand's vector and the i
// operand broadcast (k ascending, the nest's order); no fmul, no fadd in the k loop.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f64, 3, 5>, %1: !psk_kernel.buffer<f64, 5, 2>, %2: !psk_kernel.buffer<f64, 3, 2>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "dot"} {
    psk_kernel.for %3 = 0 to 3 {
      psk_kernel.for %4 = 0 to 2 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
        %6 = psk_kernel.for %7 = 0 to 5 iter(%8 = %5) -> (f64) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f64, 3, 5> -> f64
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f64, 5, 2> -> f64
          %11 = psk_kernel.fma %9, %10, %8 : f64
          psk_kernel.yield %11 : f64
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f64, 3, 2>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, 4, 3>, %1: !psk_kernel.buffer<f32, 3, 8>, %2: !psk_kernel.buffer<f32, 4, 8>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 4], lanes = 4, order = "IJ">, outputs = 1 : i64, title = "dot"} {
    psk_kernel.for %3 = 0 to 4 {
      psk_kernel.for %4 = 0 to 8 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 3 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f32, 4, 3> -> f32
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f32, 3, 8> -> f32
          %11 = psk_kernel.fma %9, %10, %8 : f32
          psk_kernel.yield %11 : f32
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f32, 4, 8>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}

// CHECK-LABEL: func.func private @presk_kernel_k0
// CHECK: scf.for
// CHECK-NOT: arith.mulf
// CHECK-NOT: arith.addf
// CHECK: llvm.call_intrinsic "llvm.fma.f64"(%{{.*}}, %{{.*}}, %{{.*}}) : (f64, f64, f64) -> f64
// CHECK-LABEL: func.func private @presk_kernel_k1
// CHECK: scf.for
// CHECK: scf.for
// CHECK: scf.for {{.*}} iter_args
// CHECK-NOT: arith.mulf
// CHECK: llvm.call_intrinsic "llvm.fma.v4f32"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
// CHECK: llvm.call_intrinsic "llvm.fma.v4f32"(%{{.*}}, %{{.*}}, %{{.*}}) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
// CHECK-NOT: llvm.fma
// CHECK: scf.yield
