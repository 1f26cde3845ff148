// convert-psk-kernel-to-std{scratch=pool}: a tile's packed operands live in the runtime's
// per-thread scratch blocks (presk_pool.c presk_scratch), kept between launches, not
// malloc'd and freed by every launch: out = aᵀ·b under tile [4, 32] with panels (as
// panels.mlir) takes slot 0 for a's 160 bytes of panels and slot 1 for b's 640, and frees
// nothing. The copies and the tiles that read them are the same ops as under malloc.
// RUN: presk-opt %s -p 'convert-psk-kernel-to-std{scratch=pool}' | filecheck %s
// RUN: presk-opt %s -p 'convert-psk-kernel-to-std{scratch=malloc}' | filecheck %s --check-prefix=MALLOC

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 5, 9>, %1: !psk_kernel.buffer<f32, 5, 37>, %2: !psk_kernel.buffer<f32, 9, 37>) attributes {layout = #psk_kernel.layout<tiled, tile = [4, 32], lanes = 16, order = "IJ", pack = "panels">, outputs = 1 : i64, title = "contract"} {
    psk_kernel.for %3 = 0 to 9 {
      psk_kernel.for %4 = 0 to 37 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 5 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%7, %3] : !psk_kernel.buffer<f32, 5, 9> -> f32
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f32, 5, 37> -> f32
          %11 = psk_kernel.mul %9, %10 : f32
          %12 = psk_kernel.add %8, %11 : f32
          psk_kernel.yield %12 : f32
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f32, 9, 37>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}

// CHECK:      %[[ROWS:.*]] = arith.constant 160 : i64
// CHECK-NEXT: %[[SLOT0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: llvm.call @presk_scratch(%[[SLOT0]], %[[ROWS]])
// CHECK:      %[[COLS:.*]] = arith.constant 640 : i64
// CHECK-NEXT: %[[SLOT1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: llvm.call @presk_scratch(%[[SLOT1]], %[[COLS]])
// CHECK:      scf.for {{.*}} -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>) {
// CHECK:        llvm.load {{.*}} -> vector<32xf32>
// CHECK-NOT:  llvm.call @free
// CHECK-NOT:  llvm.call @malloc
// CHECK:      llvm.func @presk_scratch(i32, i64) -> !llvm.ptr

// MALLOC:     llvm.call @malloc
// MALLOC:     llvm.call @malloc
// MALLOC-NOT: presk_scratch
// MALLOC:     llvm.call @free
// MALLOC:     llvm.call @free
