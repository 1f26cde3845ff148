// convert-psk-kernel-to-std collapses an element-wise nest to one loop over its elements
// (collapse_nest.py): each access of the two indices is [.., i, j, ..] with j spanning its
// axis, so the row-major offset is one index k over the merged axes. k0: a 4 × 3 nest and a
// scalar read, one loop of 12; k1: a 2 × 3 × 4 nest, one loop of 24, k the offset itself;
// k2: a split part's rows [1, 3) of 4, k in [3, 9); k3, a short inner loop (3 f64, less than
// a 512-bit vector) calling erf, with broadcasts: g[j] read at k mod 3, r[i] at k / 3. Left
// nested: k4's inner loop carries a sum, k5's inner loop is part of its axis, k6's inner
// loop of 16 f64 keeps its broadcast r[i] (a vector's worth of contiguous reads), k7's
// short inner loop calls no function (sqrt is an instruction): each row one vector
// (presk/emit/short_loops.py).
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f64, 4, 3>, %1: !psk_kernel.buffer<f64>, %2: !psk_kernel.buffer<f64, 4, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "mul"} {
    psk_kernel.for %3 = 0 to 4 {
      psk_kernel.for %4 = 0 to 3 {
        %5 = psk_kernel.load %0[%3, %4] : !psk_kernel.buffer<f64, 4, 3> -> f64
        %6 = psk_kernel.load %1[] : !psk_kernel.buffer<f64> -> f64
        %7 = psk_kernel.mul %5, %6 : f64
        psk_kernel.store %7, %2[%3, %4] : !psk_kernel.buffer<f64, 4, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, 2, 3, 4>, %1: !psk_kernel.buffer<f32, 2, 3, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 2 {
      psk_kernel.for %3 = 0 to 3 {
        psk_kernel.for %4 = 0 to 4 {
          %5 = psk_kernel.load %0[%2, %3, %4] : !psk_kernel.buffer<f32, 2, 3, 4> -> f32
          %6 = psk_kernel.neg %5 : f32
          psk_kernel.store %6, %1[%2, %3, %4] : !psk_kernel.buffer<f32, 2, 3, 4>
          psk_kernel.yield
        }
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k2(%0: !psk_kernel.buffer<f64, 4, 3>, %1: !psk_kernel.buffer<f64, 4, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 1 to 3 {
      psk_kernel.for %3 = 0 to 3 {
        %4 = psk_kernel.load %0[%2, %3] : !psk_kernel.buffer<f64, 4, 3> -> f64
        %5 = psk_kernel.neg %4 : f64
        psk_kernel.store %5, %1[%2, %3] : !psk_kernel.buffer<f64, 4, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k3(%0: !psk_kernel.buffer<f64, 4, 3>, %1: !psk_kernel.buffer<f64, 3>, %2: !psk_kernel.buffer<f64, 4>, %3: !psk_kernel.buffer<f64, 4, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "fused 2 steps"} {
    psk_kernel.for %4 = 0 to 4 {
      psk_kernel.for %5 = 0 to 3 {
        %6 = psk_kernel.load %0[%4, %5] : !psk_kernel.buffer<f64, 4, 3> -> f64
        %7 = psk_kernel.load %1[%5] : !psk_kernel.buffer<f64, 3> -> f64
        %8 = psk_kernel.mul %6, %7 : f64
        %9 = psk_kernel.load %2[%4] : !psk_kernel.buffer<f64, 4> -> f64
        %10 = psk_kernel.div %8, %9 : f64
        %11 = psk_kernel.math "erf" %10 : f64
        psk_kernel.store %11, %3[%4, %5] : !psk_kernel.buffer<f64, 4, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k4(%0: !psk_kernel.buffer<f64, 4, 3>, %1: !psk_kernel.buffer<f64, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum_to"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
      %4 = psk_kernel.for %5 = 0 to 3 iter(%6 = %3) -> (f64) {
        %7 = psk_kernel.load %0[%2, %5] : !psk_kernel.buffer<f64, 4, 3> -> f64
        %8 = psk_kernel.add %6, %7 : f64
        psk_kernel.yield %8 : f64
      }
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f64, 4>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k6(%0: !psk_kernel.buffer<f64, 2, 16>, %1: !psk_kernel.buffer<f64, 2>, %2: !psk_kernel.buffer<f64, 2, 16>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "div"} {
    psk_kernel.for %3 = 0 to 2 {
      psk_kernel.for %4 = 0 to 16 {
        %5 = psk_kernel.load %0[%3, %4] : !psk_kernel.buffer<f64, 2, 16> -> f64
        %6 = psk_kernel.load %1[%3] : !psk_kernel.buffer<f64, 2> -> f64
        %7 = psk_kernel.div %5, %6 : f64
        psk_kernel.store %7, %2[%3, %4] : !psk_kernel.buffer<f64, 2, 16>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k5(%0: !psk_kernel.buffer<f64, 4, 3>, %1: !psk_kernel.buffer<f64, 4, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 4 {
      psk_kernel.for %3 = 1 to 3 {
        %4 = psk_kernel.load %0[%2, %3] : !psk_kernel.buffer<f64, 4, 3> -> f64
        %5 = psk_kernel.neg %4 : f64
        psk_kernel.store %5, %1[%2, %3] : !psk_kernel.buffer<f64, 4, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k7(%0: !psk_kernel.buffer<f64, 4, 3>, %1: !psk_kernel.buffer<f64, 3>, %2: !psk_kernel.buffer<f64, 4>, %3: !psk_kernel.buffer<f64, 4, 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "fused 3 steps"} {
    psk_kernel.for %4 = 0 to 4 {
      psk_kernel.for %5 = 0 to 3 {
        %6 = psk_kernel.load %0[%4, %5] : !psk_kernel.buffer<f64, 4, 3> -> f64
        %7 = psk_kernel.load %1[%5] : !psk_kernel.buffer<f64, 3> -> f64
        %8 = psk_kernel.mul %6, %7 : f64
        %9 = psk_kernel.load %2[%4] : !psk_kernel.buffer<f64, 4> -> f64
        %10 = psk_kernel.div %8, %9 : f64
        %11 = psk_kernel.math "sqrt" %10 : f64
        psk_kernel.store %11, %3[%4, %5] : !psk_kernel.buffer<f64, 4, 3>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}

// CHECK:      func.func private @presk_kernel_k0(%0: !llvm.ptr {llvm.noalias}, %1: !llvm.ptr {llvm.noalias}, %2: !llvm.ptr {llvm.noalias}) {
// CHECK:        %[[LO:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[HI:.*]] = arith.constant 12 : index
// CHECK-NEXT:   %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:   scf.for %[[K:.*]] = %[[LO]] to %[[HI]] step %[[ONE]] {
// CHECK-NEXT:     %[[K64:.*]] = arith.index_cast %[[K]] : index to i64
// CHECK-NEXT:     %[[P:.*]] = llvm.getelementptr inbounds %0[%[[K64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NOT:      scf.for
// CHECK:          llvm.getelementptr inbounds %2[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK:        func.return

// CHECK:      func.func private @presk_kernel_k1(
// CHECK:        %[[HI1:.*]] = arith.constant 24 : index
// CHECK:        scf.for %[[K1:.*]] = %{{.*}} to %[[HI1]] step %{{.*}} {
// CHECK-NEXT:     %[[K164:.*]] = arith.index_cast %[[K1]] : index to i64
// CHECK-NEXT:     llvm.getelementptr inbounds %0[%[[K164]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NOT:      scf.for
// CHECK:        func.return

// CHECK:      func.func private @presk_kernel_k2(
// CHECK:        %[[LO2:.*]] = arith.constant 3 : index
// CHECK-NEXT:   %[[HI2:.*]] = arith.constant 9 : index
// CHECK:        scf.for %{{.*}} = %[[LO2]] to %[[HI2]] step %{{.*}} {
// CHECK-NOT:      scf.for
// CHECK:        func.return

// CHECK:      func.func private @presk_kernel_k3(
// CHECK:        %[[HI3:.*]] = arith.constant 12 : index
// CHECK:        scf.for %[[K3:.*]] = %{{.*}} to %[[HI3]] step %{{.*}} {
// CHECK-DAG:      %[[COL:.*]] = arith.remui %[[K3]], %{{.*}} : index
// CHECK-DAG:      %[[ROW:.*]] = arith.divui %[[K3]], %{{.*}} : index
// CHECK-NOT:      scf.for
// CHECK-DAG:      %[[COL64:.*]] = arith.index_cast %[[COL]] : index to i64
// CHECK-DAG:      llvm.getelementptr inbounds %1[%[[COL64]]]
// CHECK-DAG:      %[[ROW64:.*]] = arith.index_cast %[[ROW]] : index to i64
// CHECK-DAG:      llvm.getelementptr inbounds %2[%[[ROW64]]]
// CHECK:        func.return
// CHECK:      func.func private @presk_kernel_k4(
// CHECK:        scf.for
// CHECK:          scf.for
// CHECK:      func.func private @presk_kernel_k6(
// CHECK:        scf.for
// CHECK:          scf.for
// CHECK-NOT:        arith.divui
// CHECK:      func.func private @presk_kernel_k5(
// CHECK:        scf.for
// CHECK:          scf.for
// CHECK:      func.func private @presk_kernel_k7(
// CHECK:        scf.for
// CHECK:          scf.for
// CHECK-NOT:        arith.divui
// CHECK-NOT:        arith.remui
// CHECK:        func.return
