// convert-psk-kernel-to-std on a sum down columns (kernel_to_std/blocked_sum.py
// `column_sum`): each of 16 columns sums 100 rows in 64 partials. The loop over columns
// and the sum inside it become one chunk of W = 16 columns: 64 × 16 partials in one stack
// array (p[j·16 + c]), set to +0; the full block of 64 rows and the tail of 36, each row's
// 16 terms added by an inner loop over the columns (contiguous loads: LLVM vectorizes it);
// the tree per column (p_j += p_{j+h}, 32·16 elements apart for h = 32, …); then the
// store of p[c] to column c. Each column's partials see its terms in the blocked order.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 100, 16>, %1: !psk_kernel.buffer<f32, 16>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum_to"} {
    psk_kernel.for %2 = 0 to 16 {
      %3 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
      %4 = psk_kernel.for %5 = 0 to 100 iter(%6 = %3) -> (f32) attributes {partials = 64 : i64} {
        %7 = psk_kernel.load %0[%5, %2] : !psk_kernel.buffer<f32, 100, 16> -> f32
        %8 = psk_kernel.add %6, %7 : f32
        psk_kernel.yield %8 : f32
      }
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 16>
      psk_kernel.yield
    }
  }
}

// CHECK:      func.func private @presk_kernel_k0(%0: !llvm.ptr {llvm.noalias}, %1: !llvm.ptr {llvm.noalias}) {
// CHECK-NEXT:   %2 = arith.constant 1024 : i64
// CHECK-NEXT:   %3 = llvm.alloca %2 x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
// CHECK:        %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// the partials set to +0: 64 × 16
// CHECK:        arith.constant 64 : index
// CHECK:          arith.constant 16 : index
// CHECK:            llvm.store %[[ZERO]], %{{.*}} : f32, !llvm.ptr
// one full block of 64 rows, each row's 16 columns in an inner loop: p[j·16 + c] += x[row·16 + c]
// CHECK:        arith.constant 64 : index
// CHECK:            arith.constant 16 : index
// CHECK:              %[[SLOT:.*]] = llvm.getelementptr inbounds %3[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:              %[[P:.*]] = llvm.load %[[SLOT]] : !llvm.ptr -> f32
// CHECK:              %[[X:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NEXT:         %[[S:.*]] = arith.addf %[[P]], %[[X]] : f32
// CHECK-NEXT:         llvm.store %[[S]], %[[SLOT]] : f32, !llvm.ptr
// the tail of 36 rows into partials 0..35
// CHECK:        arith.constant 36 : index
// CHECK:            arith.addf
// the tree, per column: h = 32 is 512 elements on, …, h = 1 is 16
// CHECK:        arith.constant 32 : index
// CHECK:            llvm.getelementptr inbounds %{{.*}}[512] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK:            llvm.getelementptr inbounds %{{.*}}[256] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK:            llvm.getelementptr inbounds %{{.*}}[16] : (!llvm.ptr) -> !llvm.ptr, f32
// the store of p[c] to column c
// CHECK:        arith.constant 16 : index
// CHECK:          %[[R:.*]] = llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK-NEXT:     arith.index_cast %{{.*}} : index to i64
// CHECK-NEXT:     %[[OUT:.*]] = llvm.getelementptr inbounds %1[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:     llvm.store %[[R]], %[[OUT]] : f32, !llvm.ptr
// CHECK:      func.return
