// convert-psk-kernel-to-std on a blocked sum (presk/summation.py): 100 terms in 64
// partials, kept in a stack array allocated in the kernel's entry block; the partials set
// to +0, one full block (an outer loop of 1 × an inner loop over the 64 partials, whose
// iterations are independent: LLVM vectorizes it), the tail of 36 terms into partials
// 0..35, then the tree p_j = p_j + p_{j+h} for h = 32 … 1, and the result p_0.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 2, 100>, %1: !psk_kernel.buffer<f32, 2>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum axis 1"} {
    psk_kernel.for %2 = 0 to 2 {
      %3 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
      %4 = psk_kernel.for %5 = 0 to 100 iter(%6 = %3) -> (f32) attributes {partials = 64 : i64} {
        %7 = psk_kernel.load %0[%2, %5] : !psk_kernel.buffer<f32, 2, 100> -> f32
        %8 = psk_kernel.add %6, %7 : f32
        psk_kernel.yield %8 : f32
      }
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 2>
      psk_kernel.yield
    }
  }
}

// CHECK:      func.func private @presk_kernel_k0(%0: !llvm.ptr {llvm.noalias}, %1: !llvm.ptr {llvm.noalias}) {
// CHECK-NEXT:   %2 = arith.constant 64 : i64
// CHECK-NEXT:   %3 = llvm.alloca %2 x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
// CHECK:        scf.for %9 = %6 to %7 step %8 {
// CHECK-NEXT:     %10 = arith.constant 0.000000e+00 : f32
// CHECK:          %12 = arith.constant 64 : index
// CHECK:          scf.for %14 = %11 to %12 step %13 {
// CHECK:            llvm.store %10, %16 : f32, !llvm.ptr
// CHECK:          %18 = arith.constant 1 : index
// CHECK:          scf.for %20 = %17 to %18 step %19 {
// CHECK:            scf.for %24 = %21 to %22 step %23 {
// CHECK:              %27 = arith.muli %20, %26 : index
// CHECK:              %30 = llvm.getelementptr inbounds %3[%29] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:         %31 = arith.addi %28, %24 : index
// CHECK-NEXT:         %32 = llvm.load %30 : !llvm.ptr -> f32
// CHECK:              %39 = arith.addf %32, %38 : f32
// CHECK-NEXT:         llvm.store %39, %30 : f32, !llvm.ptr
// CHECK:          %41 = arith.constant 36 : index
// CHECK:          scf.for %43 = %40 to %41 step %42 {
// CHECK-NEXT:       %44 = arith.constant 64 : index
// CHECK:            %55 = arith.addf %48, %54 : f32
// CHECK:          %57 = arith.constant 32 : index
// CHECK:          scf.for %59 = %56 to %57 step %58 {
// CHECK:            %62 = llvm.getelementptr inbounds %61[32] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK:            %65 = arith.addf %63, %64 : f32
// CHECK-NEXT:       llvm.store %65, %61 : f32, !llvm.ptr
// CHECK:          %67 = arith.constant 16 : index
// CHECK:          llvm.getelementptr inbounds %{{.*}}[1] : (!llvm.ptr) -> !llvm.ptr, f32
// CHECK:          %[[R:.*]] = llvm.load %3 : !llvm.ptr -> f32
// CHECK:          llvm.store %[[R]], %{{.*}} : f32, !llvm.ptr
