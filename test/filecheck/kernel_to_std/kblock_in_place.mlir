// convert-psk-kernel-to-std on a panelled xᵀ·g (`pack = "panels"`): its i operand x,
// indexed [k, i], is copied into panels of R rows; its j operand g, indexed [k, j], is
// copied into panels of C columns too — unless k is swept in blocks (`kblock`), when a
// block of g's rows, read in place C columns a k step, stays in L2 anyway: then only x is
// copied (one malloc, not two). The same loads of the same values: the same bits.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  // CHECK-LABEL: @presk_kernel_whole(
  // CHECK-COUNT-2: llvm.call @malloc
  // CHECK-NOT:     llvm.call @malloc
  // CHECK:         func.return
  psk_kernel.kernel @whole(%0: !psk_kernel.buffer<f32, 8, 4>, %1: !psk_kernel.buffer<f32, 8, 4>, %2: !psk_kernel.buffer<f32, 4, 4>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 4], lanes = 4, order = "IJ", pack = "panels">, outputs = 1 : i64, title = "contract"} {
    psk_kernel.for %3 = 0 to 4 {
      psk_kernel.for %4 = 0 to 4 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 8 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%7, %3] : !psk_kernel.buffer<f32, 8, 4> -> f32
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f32, 8, 4> -> f32
          %11 = psk_kernel.fma %9, %10, %8 : f32
          psk_kernel.yield %11 : f32
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f32, 4, 4>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  // CHECK-LABEL: @presk_kernel_blocked(
  // CHECK:         llvm.call @malloc
  // CHECK-NOT:     llvm.call @malloc
  // CHECK:         func.return
  psk_kernel.kernel @blocked(%0: !psk_kernel.buffer<f32, 8, 4>, %1: !psk_kernel.buffer<f32, 8, 4>, %2: !psk_kernel.buffer<f32, 4, 4>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 4], lanes = 4, order = "IJ", pack = "panels", kblock = 4>, outputs = 1 : i64, title = "contract"} {
    psk_kernel.for %3 = 0 to 4 {
      psk_kernel.for %4 = 0 to 4 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 8 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%7, %3] : !psk_kernel.buffer<f32, 8, 4> -> f32
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f32, 8, 4> -> f32
          %11 = psk_kernel.fma %9, %10, %8 : f32
          psk_kernel.yield %11 : f32
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f32, 4, 4>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}
