// convert-psk-kernel-to-std on tiled contractions: the layout's tile = [2, 4] computes 2
// rows × 4 columns of outputs at once — the columns one vector<4xf32> (a contiguous load of
// the j operand), each row its own accumulator in the k loop (k ascending, the nest's
// order), the i operand a scalar broadcast to the lanes; the rows past the last full tile
// run as a tile of fewer rows, the columns past it the nest as it is. @k1 reads its j
// operand transposed (w[j, k]): it is packed once per launch into malloc'd memory, j
// last, and freed at the end.
// RUN: presk-opt %s -p convert-psk-kernel-to-std | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 5, 3>, %1: !psk_kernel.buffer<f32, 3, 6>, %2: !psk_kernel.buffer<f32, 5, 6>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 4], lanes = 4, order = "IJ">, outputs = 1 : i64, title = "dot"} {
    psk_kernel.for %3 = 0 to 5 {
      psk_kernel.for %4 = 0 to 6 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 3 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f32, 5, 3> -> f32
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f32, 3, 6> -> f32
          %11 = psk_kernel.mul %9, %10 : f32
          %12 = psk_kernel.add %8, %11 : f32
          psk_kernel.yield %12 : f32
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f32, 5, 6>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, 4, 3>, %1: !psk_kernel.buffer<f32, 4, 3>, %2: !psk_kernel.buffer<f32, 4, 4>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 4], lanes = 4, order = "IJ">, outputs = 1 : i64, title = "contract"} {
    psk_kernel.for %3 = 0 to 4 {
      psk_kernel.for %4 = 0 to 4 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
        %6 = psk_kernel.for %7 = 0 to 3 iter(%8 = %5) -> (f32) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f32, 4, 3> -> f32
          %10 = psk_kernel.load %1[%4, %7] : !psk_kernel.buffer<f32, 4, 3> -> f32
          %11 = psk_kernel.mul %9, %10 : f32
          %12 = psk_kernel.add %8, %11 : f32
          psk_kernel.yield %12 : f32
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f32, 4, 4>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}

// CHECK:      func.func private @presk_kernel_k0(
// The tiles: rows [0, 4) in steps of 2, columns [0, 4) in steps of 4.
// CHECK:        %[[I0:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[I4:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[I2:.*]] = arith.constant 2 : index
// CHECK-NEXT:   scf.for %[[I:.*]] = %[[I0]] to %[[I4]] step %[[I2]] {
// CHECK:          scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// The accumulators start as the constant broadcast to the lanes, one per row.
// CHECK:            %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:            %[[ZV:[0-9]+]] = llvm.shufflevector %{{.*}}, %{{.*}} [0, 0, 0, 0] : vector<4xf32>
// CHECK:            %[[R0:[0-9]+]], %[[R1:[0-9]+]] = scf.for %[[K:[0-9]+]] = %{{[0-9]+}} to %{{[0-9]+}} step %{{[0-9]+}} iter_args(%[[A0:[0-9]+]] = %[[ZV]], %[[A1:[0-9]+]] = %{{[0-9]+}}) -> (vector<4xf32>, vector<4xf32>) {
// Row 0's scalar of the i operand, row 1's at i + 1; one vector of the j operand for both.
// CHECK:              llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK:              arith.addi %[[I]], %{{.*}} : index
// CHECK:              llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK:              %[[B:.*]] = llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK:              %[[P0:.*]] = arith.mulf %{{.*}}, %[[B]] : vector<4xf32>
// CHECK:              %[[P1:.*]] = arith.mulf %{{.*}}, %[[B]] : vector<4xf32>
// CHECK:              %[[S0:.*]] = arith.addf %[[A0]], %[[P0]] : vector<4xf32>
// CHECK-NEXT:         %[[S1:.*]] = arith.addf %[[A1]], %[[P1]] : vector<4xf32>
// CHECK-NEXT:         scf.yield %[[S0]], %[[S1]] : vector<4xf32>, vector<4xf32>
// CHECK:            llvm.store %[[R0]], %{{.*}} {alignment = 4 : i64} : vector<4xf32>, !llvm.ptr
// CHECK:            llvm.store %[[R1]], %{{.*}} {alignment = 4 : i64} : vector<4xf32>, !llvm.ptr
// The row past the last full tile (row 4) as a tile of one row: one accumulator.
// CHECK:        %[[R4:[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:   %[[R5:[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:   %{{[0-9]+}} = arith.constant 1 : index
// CHECK-NEXT:   scf.for %{{[0-9]+}} = %[[R4]] to %[[R5]] step %{{[0-9]+}} {
// CHECK:            %{{[0-9]+}} = scf.for %{{[0-9]+}} = %{{[0-9]+}} to %{{[0-9]+}} step %{{[0-9]+}} iter_args(%{{[0-9]+}} = %{{[0-9]+}}) -> (vector<4xf32>) {
// CHECK:            llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<4xf32>, !llvm.ptr
// The columns past the tiles (4 and 5) of every row, scalar.
// CHECK:        %[[T0:[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:   %[[T5:[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:   %{{[0-9]+}} = arith.constant 1 : index
// CHECK-NEXT:   scf.for %{{[0-9]+}} = %[[T0]] to %[[T5]] step %{{[0-9]+}} {
// CHECK-NEXT:     %[[C4:[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:     %[[C6:[0-9]+]] = arith.constant 6 : index
// CHECK-NEXT:     %{{[0-9]+}} = arith.constant 1 : index
// CHECK-NEXT:     scf.for %{{[0-9]+}} = %[[C4]] to %[[C6]] step %{{[0-9]+}} {
// CHECK:              arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NOT:    scf.for
// CHECK:        func.return

// CHECK:      func.func private @presk_kernel_k1(
// CHECK:        %[[SIZE:.*]] = arith.constant 48 : i64
// CHECK-NEXT:   %[[MEM:.*]] = llvm.call @malloc(%[[SIZE]]) : (i64) -> !llvm.ptr
// The copy: w[j, k] → packed[k, j].
// CHECK:        llvm.load %{{.*}} : !llvm.ptr -> f32
// CHECK:        llvm.getelementptr inbounds %[[MEM]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:            llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> vector<4xf32>
// CHECK:        llvm.call @free(%[[MEM]]) : (!llvm.ptr) -> ()
// CHECK-NEXT:   func.return

// CHECK:      llvm.func @free(!llvm.ptr)
// CHECK:      llvm.func @malloc(i64) -> !llvm.ptr
