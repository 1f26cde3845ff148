// psk-kernel-split then convert-psk-kernel-to-std on a kernel whose layout splits its outermost loop among two
// workers: two part kernels over rows [0, 4) and [4, 9) (as even as 9 rows go), each
// lowered like any tiled kernel; the kernel's function launches both on the worker pool
// (presk_pool_run) through trampolines that unpack the buffer pointers. With
// spawn=threads it starts part 1 on a new thread, runs part 0, and joins.
// RUN: presk-opt %s -p psk-kernel-split,convert-psk-kernel-to-std | filecheck %s
// RUN: presk-opt %s -p 'psk-kernel-split,convert-psk-kernel-to-std{spawn=threads}' | filecheck %s --check-prefix=THREADS

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 9, 5>, %1: !psk_kernel.buffer<f32, 5, 37>, %2: !psk_kernel.buffer<f32, 9, 37>) attributes {layout = #psk_kernel.layout<tiled, tile = [4, 32], lanes = 16, order = "IJ", split = [0, 2]>, outputs = 1 : i64, title = "dot"} {
    psk_kernel.for %3 = 0 to 9 {
      psk_kernel.for %4 = 0 to 37 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 5 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f32, 9, 5> -> f32
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
  psk_kernel.host @f(%0: !psk_kernel.buffer<f32, 9, 5>, %1: !psk_kernel.buffer<f32, 5, 37>, %2: !psk_kernel.buffer<f32, 9, 37>) attributes {arg_names = ["x", "w", "out"], entry, function = "f", outputs = 1 : i64} {
    psk_kernel.launch @k0(%0, %1, %2) {site = "f/%3"} : (!psk_kernel.buffer<f32, 9, 5>, !psk_kernel.buffer<f32, 5, 37>, !psk_kernel.buffer<f32, 9, 37>)
  }
}

// CHECK:      func.func private @presk_kernel_k0_part0(%0: !llvm.ptr {llvm.noalias}, %1: !llvm.ptr {llvm.noalias}, %2: !llvm.ptr {llvm.noalias}) {
// CHECK:        %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[E:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[S:.*]] = arith.constant 4 : index
// CHECK-NEXT:   scf.for %{{.*}} = %[[Z]] to %[[E]] step %[[S]] {
// CHECK:      func.func private @presk_kernel_k0_part1(
// CHECK:        %[[Z1:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[E1:.*]] = arith.constant 8 : index
// CHECK-NEXT:   %[[S1:.*]] = arith.constant 4 : index
// CHECK-NEXT:   scf.for %{{.*}} = %[[Z1]] to %[[E1]] step %[[S1]] {
// The row past the last whole tile of part 1, scalar, up to 9:
// CHECK:        arith.constant 9 : index
// CHECK:      func.func private @presk_host_f(
// CHECK:        func.call @presk_kernel_k0(%0, %1, %2)
// CHECK:      func.func private @presk_kernel_k0_thread0(%0: !llvm.ptr) {
// CHECK:        func.call @presk_kernel_k0_part0(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:      func.func private @presk_kernel_k0_thread1(%0: !llvm.ptr) {
// CHECK:        func.call @presk_kernel_k0_part1(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:      func.func private @presk_kernel_k0(%0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
// CHECK:        %[[ARGS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK:        %[[F0:.*]] = llvm.mlir.addressof @presk_kernel_k0_thread0 : !llvm.ptr
// CHECK-NEXT:   %[[F1:.*]] = llvm.mlir.addressof @presk_kernel_k0_thread1 : !llvm.ptr
// CHECK:        %[[FNS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK:        llvm.store %[[F0]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK:        llvm.store %[[F1]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK:        %[[N:.*]] = arith.constant 2 : i32
// CHECK-NEXT:   llvm.call @presk_pool_run(%[[N]], %[[FNS]], %[[ARGS]]) : (i32, !llvm.ptr, !llvm.ptr) -> ()
// CHECK:      llvm.func @presk_pool_run(i32, !llvm.ptr, !llvm.ptr)
// CHECK-NOT:  pthread_create

// THREADS:      func.func private @presk_kernel_k0_thread1(%0: !llvm.ptr) -> !llvm.ptr {
// THREADS:        func.call @presk_kernel_k0_part1(%{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// THREADS:        func.return %{{.*}} : !llvm.ptr
// THREADS:      func.func private @presk_kernel_k0(%0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
// THREADS:        %[[ARGS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// THREADS:        %[[TID:.*]] = llvm.alloca %{{.*}} x i64
// THREADS-NEXT:   %[[FN:.*]] = llvm.mlir.addressof @presk_kernel_k0_thread1 : !llvm.ptr
// THREADS-NEXT:   %{{.*}} = llvm.call @pthread_create(%[[TID]], %{{.*}}, %[[FN]], %[[ARGS]])
// THREADS-NEXT:   func.call @presk_kernel_k0_part0(%0, %1, %2)
// THREADS-NEXT:   %[[T:.*]] = llvm.load %[[TID]] : !llvm.ptr -> i64
// THREADS-NEXT:   %{{.*}} = llvm.call @pthread_join(%[[T]], %{{.*}})
// THREADS:      llvm.func @pthread_create(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> i32
// THREADS:      llvm.func @pthread_join(i64, !llvm.ptr) -> i32
