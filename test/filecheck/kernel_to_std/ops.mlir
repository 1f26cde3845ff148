// convert-psk-kernel-to-std on a module that holds every PSK-Kernel op: buffers become
// pointers (noalias in kernels), loads and stores GEPs at Σ index·stride (an element-wise
// nest first collapsed to one loop), bf16 widened by
// bits and rounded to nearest even by bits, min/max as numpy's compare + select, math as
// ops of the math dialect (sqrt, exp: convert-math-to-llvm makes them an exact intrinsic
// and a call of the math library) or selects (heaviside); the host's
// arena static (an alloc of 64 bytes or more on a cache line, a smaller one on the power of
// two ≥ its size; a call's callee past the live buffers),
// convert/fill as loops, at as a GEP, fold as scf.for carrying the accumulator's pointer.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s
// RUN: presk-opt %s -p convert-psk-kernel-to-std,convert-scf-to-cf,convert-index-to-llvm,convert-arith-to-llvm,convert-math-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,reconcile-unrealized-casts | filecheck %s --check-prefix=LLVM

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<bf16, 2, 3>, %1: !psk_kernel.buffer<f32, 2, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "step"} {
    psk_kernel.for %2 = 0 to 2 {
      psk_kernel.for %3 = 0 to 3 {
        %4 = psk_kernel.load %0[%2, %3] : !psk_kernel.buffer<bf16, 2, 3> -> f32
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.max %4, %5 : f32
        %7 = psk_kernel.math "heaviside" %6, %5 : f32
        %8 = psk_kernel.math "sqrt" %7 : f32
        psk_kernel.store %8, %1[%2, %3] : !psk_kernel.buffer<f32, 2, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, 2, 3>, %1: !psk_kernel.buffer<bf16, 2, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "exp"} {
    psk_kernel.for %2 = 0 to 2 {
      psk_kernel.for %3 = 0 to 3 {
        %4 = psk_kernel.load %0[%2, %3] : !psk_kernel.buffer<f32, 2, 3> -> f32
        %5 = psk_kernel.math "exp" %4 : f32
        psk_kernel.store %5, %1[%2, %3] : !psk_kernel.buffer<bf16, 2, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.host @inner(%0: !psk_kernel.buffer<bf16, 2, 3>, %1: !psk_kernel.buffer<f32, 2, 3>) attributes {function = "inner", outputs = 1 : i64} {
    psk_kernel.launch @k0(%0, %1) {site = "inner/%2"} : (!psk_kernel.buffer<bf16, 2, 3>, !psk_kernel.buffer<f32, 2, 3>)
  }
  psk_kernel.host @f(%0: !psk_kernel.buffer<f64, 2, 3>, %1: !psk_kernel.buffer<bf16, 4, 2, 3>, %2: !psk_kernel.buffer<f32, 2, 3>) attributes {arg_names = ["x", "θ.s", "out"], entry, function = "f", outputs = 1 : i64} {
    %3 = psk_kernel.mark
    %4 = psk_kernel.alloc {site = "f/%3"} : !psk_kernel.buffer<bf16, 2, 3>
    psk_kernel.convert %0 to %4 {site = "f/%3"} : !psk_kernel.buffer<f64, 2, 3> -> !psk_kernel.buffer<bf16, 2, 3>
    %5 = psk_kernel.alloc {site = "f/%4"} : !psk_kernel.buffer<f32, 2, 3>
    psk_kernel.call @inner(%4, %5) {site = "f/%4"} : (!psk_kernel.buffer<bf16, 2, 3>, !psk_kernel.buffer<f32, 2, 3>)
    %6 = psk_kernel.alloc {site = "f/%5"} : !psk_kernel.buffer<f32, 2, 3>
    %7 = psk_kernel.alloc {site = "f/%5"} : !psk_kernel.buffer<f32, 2, 3>
    %8 = psk_kernel.fold %9 = 1 to 4, %10 = %5, %11 in (%6, %7) {site = "f/%5"} : !psk_kernel.buffer<f32, 2, 3> {
      %12 = psk_kernel.at %1[%9] {site = "f/%5"} : !psk_kernel.buffer<bf16, 4, 2, 3> -> !psk_kernel.buffer<bf16, 2, 3>
      psk_kernel.launch @k0(%12, %11) {site = "f/%5"} : (!psk_kernel.buffer<bf16, 2, 3>, !psk_kernel.buffer<f32, 2, 3>)
    }
    psk_kernel.fill %2 {site = "f/%6", value = 1.000000e-01 : f64} : !psk_kernel.buffer<f32, 2, 3>
    psk_kernel.release %3
  }
}

// The 2 × 3 nest is one loop over its 6 elements (collapse_nest.py; collapse_nest.mlir).
// CHECK:      func.func private @presk_kernel_k0(%0: !llvm.ptr {llvm.noalias}, %1: !llvm.ptr {llvm.noalias}) {
// CHECK:        %[[SIX:.*]] = arith.constant 6 : index
// CHECK:        scf.for %[[K:.*]] = %{{.*}} to %[[SIX]] step %{{.*}} {
// CHECK-NEXT:       %[[OFF64:.*]] = arith.index_cast %[[K]] : index to i64
// CHECK-NEXT:       %[[P:.*]] = llvm.getelementptr inbounds %0[%[[OFF64]]] : (!llvm.ptr, i64) -> !llvm.ptr, i16
// CHECK-NEXT:       %[[BITS:.*]] = llvm.load %[[P]] : !llvm.ptr -> i16
// CHECK-NEXT:       %[[W:.*]] = arith.extui %[[BITS]] : i16 to i32
// CHECK-NEXT:       %[[C16:.*]] = arith.constant 16 : i32
// CHECK-NEXT:       %[[SH:.*]] = arith.shli %[[W]], %[[C16]] : i32
// CHECK-NEXT:       %[[X:.*]] = arith.bitcast %[[SH]] : i32 to f32
// CHECK-NEXT:       %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       %[[GT:.*]] = arith.cmpf ogt, %[[X]], %[[Z]] : f32
// CHECK-NEXT:       %[[NAN:.*]] = arith.cmpf uno, %[[X]], %[[X]] : f32
// CHECK-NEXT:       %[[TAKE:.*]] = arith.ori %[[GT]], %[[NAN]] : i1
// CHECK-NEXT:       %[[M:.*]] = arith.select %[[TAKE]], %[[X]], %[[Z]] : f32
// CHECK:            arith.cmpf uno, %[[M]], %[[M]] : f32
// CHECK:            arith.cmpf olt, %[[M]]
// CHECK-NEXT:       arith.select
// CHECK-NEXT:       arith.cmpf ogt, %[[M]]
// CHECK-NEXT:       %[[H:.*]] = arith.select
// CHECK-NEXT:       %[[R:.*]] = math.sqrt %[[H]] : f32
// CHECK:            llvm.store %[[R]], %{{.*}} : f32, !llvm.ptr

// CHECK:      func.func private @presk_kernel_k1(
// CHECK:            %[[E:.*]] = math.exp %{{.*}} : f32
// CHECK:            %[[U:.*]] = arith.bitcast %[[E]] : f32 to i32
// CHECK-NEXT:       %[[C16B:.*]] = arith.constant 16 : i32
// CHECK-NEXT:       %[[UP:.*]] = arith.shrui %[[U]], %[[C16B]] : i32
// CHECK-NEXT:       %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:       %[[LSB:.*]] = arith.andi %[[UP]], %[[ONE]] : i32
// CHECK-NEXT:       %[[HALF:.*]] = arith.constant 32767 : i32
// CHECK-NEXT:       %[[B1:.*]] = arith.addi %[[U]], %[[HALF]] : i32
// CHECK-NEXT:       %[[B2:.*]] = arith.addi %[[B1]], %[[LSB]] : i32
// CHECK-NEXT:       %[[C16C:.*]] = arith.constant 16 : i32
// CHECK-NEXT:       %[[RND:.*]] = arith.shrui %[[B2]], %[[C16C]] : i32
// CHECK-NEXT:       %[[ISNAN:.*]] = arith.cmpf uno, %[[E]], %[[E]] : f32
// CHECK-NEXT:       %[[Q:.*]] = arith.constant 64 : i32
// CHECK-NEXT:       %[[QN:.*]] = arith.ori %[[UP]], %[[Q]] : i32
// CHECK-NEXT:       %[[SEL:.*]] = arith.select %[[ISNAN]], %[[QN]], %[[RND]] : i32
// CHECK-NEXT:       %[[B16:.*]] = arith.trunci %[[SEL]] : i32 to i16
// CHECK:            llvm.store %[[B16]], %{{.*}} : i16, !llvm.ptr

// CHECK:      func.func private @presk_host_inner(%0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
// CHECK:        func.call @presk_kernel_k0(%0, %1) : (!llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT:   func.return

// The arena of @f, placed by the buffers' lives (offsets are i64 operands: an arena may
// pass 2 GiB): the inner call's output (24 bytes, on 32) at 0, the bf16 copy of x (12
// bytes, on 16) at 32, the callee's own arena at 0 (it needs none); the fold reads no
// accumulator and nothing reads its result, so each scratch buffer lives only at its
// write and both take offset 0 (dead by then).
// CHECK:      func.func private @presk_host_f(%0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr, %3: !llvm.ptr) {
// CHECK:        %[[X_OFF:.*]] = arith.constant 32 : i64
// CHECK-NEXT:   %[[X:.*]] = llvm.getelementptr inbounds %3[%[[X_OFF]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK:        scf.for
// CHECK:          llvm.load %{{.*}} : !llvm.ptr -> f64
// CHECK:          arith.truncf %{{.*}} : f64 to f32
// CHECK:          arith.extf %{{.*}} : f32 to f64
// CHECK:          arith.cmpf une
// CHECK:          llvm.call_intrinsic "llvm.fabs.f64"
// CHECK:          arith.subi
// CHECK:          arith.ori
// CHECK:          llvm.store %{{.*}}, %{{.*}} : i16, !llvm.ptr
// CHECK:        func.call @presk_host_inner(%[[X]], %3, %3)
// CHECK:        %{{.*}} = scf.for %[[L:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %3) -> (!llvm.ptr) {
// CHECK:          %[[EVEN:.*]] = arith.cmpi eq
// CHECK-NEXT:     %[[DST:.*]] = arith.select %[[EVEN]], %3, %3 : !llvm.ptr
// CHECK:          %[[AT:.*]] = arith.muli %[[L]], %{{.*}} : index
// CHECK:          %[[W:.*]] = llvm.getelementptr inbounds %1[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i16
// CHECK:          func.call @presk_kernel_k0(%[[W]], %[[DST]])
// CHECK-NEXT:     scf.yield %[[DST]] : !llvm.ptr
// CHECK:        arith.constant 1.000000e-01 : f32
// CHECK:        func.return
// CHECK:      func.func @presk_entry_f(%0: !llvm.ptr, %1: !llvm.ptr) {
// CHECK-NEXT:   %2 = llvm.getelementptr inbounds %0[0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT:   %3 = llvm.load %2 : !llvm.ptr -> !llvm.ptr
// CHECK:        func.call @presk_host_f(%3, %5, %7, %1)

// LLVM-NOT: builtin.unrealized_conversion_cast
// LLVM-NOT: psk_kernel
// LLVM-NOT: math.
// LLVM:     llvm.call_intrinsic "llvm.sqrt.f32"
// LLVM:     llvm.call @presk_exp_f32(
// LLVM:     llvm.func @presk_entry_f(
// LLVM-NOT: builtin.unrealized_conversion_cast
// LLVM-NOT: psk_kernel
// LLVM-NOT: math.
