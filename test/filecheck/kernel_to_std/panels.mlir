// convert-psk-kernel-to-std on out = aᵀ·b (a : [5, 9], b : [5, 37]) under tile [4, 32] with
// pack = "panels": b is copied into [37 / 32 = 1, 5, 32] panels (640 bytes: each tile's 32
// columns contiguous along k), a — whose last axis is i — into [9 / 4 = 2, 5, 4] panels
// (160 bytes: each tile's 4 rows contiguous along k); the tiles read the panels (panel
// j0 / 32 and i0 / 4), the remainder nests (row 8, columns 32..36) the operands as they
// are; both copies are freed at the end.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

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
// CHECK-NEXT: %[[A:.*]] = llvm.call @malloc(%[[ROWS]])
// CHECK:      %[[COLS:.*]] = arith.constant 640 : i64
// CHECK-NEXT: %[[B:.*]] = llvm.call @malloc(%[[COLS]])
// CHECK:      scf.for {{.*}} -> (vector<32xf32>, vector<32xf32>, vector<32xf32>, vector<32xf32>) {
// CHECK:        arith.divui
// CHECK:        llvm.load {{.*}} -> vector<32xf32>
// CHECK:      llvm.call @free(%[[A]])
// CHECK-NEXT: llvm.call @free(%[[B]])
