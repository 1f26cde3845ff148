// psk-fuse on a minimal PSK-Realize function (the recording of record_small.mlir's @f
// under realization_small.json): the mul joins the exp's group (its one reader,
// element-wise over the same shape); the exp ends it, being read through a convert; the
// group's inputs are the converted operands. limit=1 allows no group of two ops.
// RUN: presk-opt %s -p psk-fuse | filecheck %s
// RUN: presk-opt %s -p 'psk-fuse{limit=1}' | filecheck %s --check-prefix=LIMIT1

builtin.module {
  psk_realize.func @f(%0: !psk_realize.tensor<f64, batch: 2, model: 4>, %1: !psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f32, batch: 2> attributes {arg_names = ["x", "w"], source = "f"} {
    %2 = psk_realize.convert %0 {site = "f/%2"} : (!psk_realize.tensor<f64, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    %3 = psk_realize.convert %1 {site = "f/%2"} : (!psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f32, 4>
    %4 = psk_realize.mul %2, %3 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%2"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    %5 = psk_realize.exp %4 {site = "f/%3"} : !psk_realize.tensor<f32, batch: 2, model: 4>
    %6 = psk_realize.convert %5 {site = "f/%3"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<bf16, batch: 2, model: 4>
    %7 = psk_realize.convert %6 {site = "f/%4"} : (!psk_realize.tensor<bf16, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    %8 = psk_realize.sum %7 {axis = 1 : i64, axis_name = "model", name = "s", site = "f/%4"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2>
    psk_realize.return %8 {site = "f/%5"} : !psk_realize.tensor<f32, batch: 2>
  }
}

// CHECK:      psk_realize.func @f
// CHECK-NEXT:   %2 = psk_realize.convert %0 {site = "f/%2"}
// CHECK-NEXT:   %3 = psk_realize.convert %1 {site = "f/%2"}
// CHECK-NEXT:   %4 = psk_realize.group %2, %3 {site = "f/%3"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4> {
// CHECK-NEXT:   ^bb0(%5: !psk_realize.tensor<f32, batch: 2, model: 4>, %6: !psk_realize.tensor<f32, 4>):
// CHECK-NEXT:     %7 = psk_realize.mul %5, %6 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%2"}
// CHECK-NEXT:     %8 = psk_realize.exp %7 {site = "f/%3"} : !psk_realize.tensor<f32, batch: 2, model: 4>
// CHECK-NEXT:     psk_realize.yield %8 : !psk_realize.tensor<f32, batch: 2, model: 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   %5 = psk_realize.convert %4 {site = "f/%3"}
// CHECK-NEXT:   %6 = psk_realize.convert %5 {site = "f/%4"}
// CHECK-NEXT:   %7 = psk_realize.sum %6
// CHECK-NEXT:   psk_realize.return %7

// LIMIT1-NOT: psk_realize.group
// LIMIT1:     psk_realize.mul
// LIMIT1-NOT: psk_realize.group
