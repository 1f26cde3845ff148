// convert-psk-kernel-to-std on a k-blocked tile (`kblock = 4`): the tiles sweep k in [0, 4)
// then in [4, 6); between the blocks each row's accumulator vector is stored to the output
// and loaded back as the next block's start, and only the last block adds the bias (the
// epilogue) before its store. Each output still sums k ascending: the same bits.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 2, 6>, %1: !psk_kernel.buffer<f32, 6, 4>, %b: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 2, 4>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 4], lanes = 4, order = "IJ", kblock = 4>, outputs = 1 : i64, title = "dot+add"} {
    psk_kernel.for %3 = 0 to 2 {
      psk_kernel.for %4 = 0 to 4 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 6 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f32, 2, 6> -> f32
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f32, 6, 4> -> f32
          %11 = psk_kernel.fma %9, %10, %8 : f32
          psk_kernel.yield %11 : f32
        }
        %12 = psk_kernel.load %b[%4] : !psk_kernel.buffer<f32, 4> -> f32
        %13 = psk_kernel.add %6, %12 : f32
        psk_kernel.store %13, %2[%3, %4] : !psk_kernel.buffer<f32, 2, 4>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}

// CHECK:      %[[A0:[0-9]+]], %[[A1:[0-9]+]] = scf.for
// CHECK-NOT:  arith.addf
// CHECK:      llvm.store %[[A0]], %{{.*}} : vector<4xf32>, !llvm.ptr
// CHECK:      llvm.store %[[A1]], %{{.*}} : vector<4xf32>, !llvm.ptr
// CHECK:      %[[R0:[0-9]+]] = llvm.load %{{.*}} -> vector<4xf32>
// CHECK:      %[[R1:[0-9]+]] = llvm.load %{{.*}} -> vector<4xf32>
// CHECK-NEXT: %[[S4:[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT: %[[S6:[0-9]+]] = arith.constant 6 : index
// CHECK:      scf.for %{{.*}} = %[[S4]] to %[[S6]] step %{{.*}} iter_args(%{{.*}} = %[[R0]], %{{.*}} = %[[R1]])
// CHECK:      llvm.call_intrinsic "llvm.fma.v4f32"
// CHECK:      arith.addf
// CHECK:      arith.addf
// CHECK:      llvm.store
