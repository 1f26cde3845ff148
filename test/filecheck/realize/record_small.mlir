// convert-psk-core-to-realize on a small program, then psk-fuse. @f multiplies by a weight
// that aligns by position (ℝ[4] against ℝ[..., model: 4]: the map puts it on axis 1, after
// the prefix), exponentiates and sums over `model`; @g calls it twice at B = 2.
// The realization (test/fixtures/realization_small.json) makes f/%3 bf16 and f/%4 f32:
// exp computes in f32 and is converted to bf16; the sum reads it back as f32; the mul
// follows the exp (its one reader, element-wise, same shape) and computes in f32, its f64
// operands converted under its site. Both calls share one instance of @f.
// RUN: presk-opt %s -p 'convert-psk-core-to-realize{entry=g dims="B=2" realize="%S/../../fixtures/realization_small.json"}' | filecheck %s --check-prefix=REC
// RUN: presk-opt %s -p 'convert-psk-core-to-realize{entry=g dims="B=2" realize="%S/../../fixtures/realization_small.json"},psk-fuse' | filecheck %s --check-prefix=FUSE
// RUN: presk-opt %s -p 'convert-psk-core-to-realize{entry=g dims="B=2"}' | filecheck %s --check-prefix=F64

builtin.module {
  psk_core.func @f(%0: !psk_core.tensor<..., model: 4>, %1: !psk_core.tensor<4>) -> !psk_core.tensor<...> attributes {arg_names = ["x", "w"]} {
    %2 = psk_core.mul %0, %1 {site = "f/%2"} : (!psk_core.tensor<..., model: 4>, !psk_core.tensor<4>) -> !psk_core.tensor<..., model: 4>
    %3 = psk_core.exp %2 {site = "f/%3"} : !psk_core.tensor<..., model: 4>
    %4 = psk_core.sum %3 {axis = "model", name = "s", site = "f/%4"} : (!psk_core.tensor<..., model: 4>) -> !psk_core.tensor<...>
    psk_core.return %4 {site = "f/%5"} : !psk_core.tensor<...>
  }
  psk_core.func @g(%0: !psk_core.tensor<batch: B, model: 4>, %1: !psk_core.tensor<4>) -> !psk_core.tensor<batch: B> attributes {arg_names = ["x", "w"], dims = ["B"]} {
    %2 = psk_core.call @f(%0, %1) {site = "g/%2"} : (!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<4>) -> !psk_core.tensor<batch: B>
    %3 = psk_core.call @f(%0, %1) {site = "g/%3"} : (!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<4>) -> !psk_core.tensor<batch: B>
    %4 = psk_core.add %2, %3 {site = "g/%4"} : (!psk_core.tensor<batch: B>, !psk_core.tensor<batch: B>) -> !psk_core.tensor<batch: B>
    psk_core.return %4 {site = "g/%5"} : !psk_core.tensor<batch: B>
  }
}

// REC:      builtin.module {
// REC-NEXT:   psk_realize.func @f(%0: !psk_realize.tensor<f64, batch: 2, model: 4>, %1: !psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f32, batch: 2> attributes {arg_names = ["x", "w"], source = "f"} {
// REC-NEXT:     %2 = psk_realize.convert %0 {site = "f/%2"} : (!psk_realize.tensor<f64, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
// REC-NEXT:     %3 = psk_realize.convert %1 {site = "f/%2"} : (!psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f32, 4>
// REC-NEXT:     %4 = psk_realize.mul %2, %3 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%2"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
// REC-NEXT:     %5 = psk_realize.exp %4 {site = "f/%3"} : !psk_realize.tensor<f32, batch: 2, model: 4>
// REC-NEXT:     %6 = psk_realize.convert %5 {site = "f/%3"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<bf16, batch: 2, model: 4>
// REC-NEXT:     %7 = psk_realize.convert %6 {site = "f/%4"} : (!psk_realize.tensor<bf16, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
// REC-NEXT:     %8 = psk_realize.sum %7 {axis = 1 : i64, axis_name = "model", name = "s", site = "f/%4"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2>
// REC-NEXT:     psk_realize.return %8 {site = "f/%5"} : !psk_realize.tensor<f32, batch: 2>
// REC-NEXT:   }
// REC-NEXT:   psk_realize.func @g(%0: !psk_realize.tensor<f64, batch: 2, model: 4>, %1: !psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f64, batch: 2> attributes {arg_names = ["x", "w"], dims = {B = 2 : i64}, entry, source = "g"} {
// REC-NEXT:     %2 = psk_realize.call @f(%0, %1) {site = "g/%2"} : (!psk_realize.tensor<f64, batch: 2, model: 4>, !psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f32, batch: 2>
// REC-NEXT:     %3 = psk_realize.call @f(%0, %1) {site = "g/%3"} : (!psk_realize.tensor<f64, batch: 2, model: 4>, !psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f32, batch: 2>
// REC-NEXT:     %4 = psk_realize.convert %2 {site = "g/%4"} : (!psk_realize.tensor<f32, batch: 2>) -> !psk_realize.tensor<f64, batch: 2>
// REC-NEXT:     %5 = psk_realize.convert %3 {site = "g/%4"} : (!psk_realize.tensor<f32, batch: 2>) -> !psk_realize.tensor<f64, batch: 2>
// REC-NEXT:     %6 = psk_realize.add %4, %5 {lhs_map = array<i64: 0>, rhs_map = array<i64: 0>, site = "g/%4"} : !psk_realize.tensor<f64, batch: 2>
// REC-NEXT:     psk_realize.return %6 {site = "g/%5"} : !psk_realize.tensor<f64, batch: 2>
// REC-NEXT:   }
// REC-NEXT: }

// The mul joins the exp's group: its one reader, element-wise over its shape. The exp
// ends it: it is read through a convert. The group's inputs are the converted operands.
// FUSE:      psk_realize.func @f
// FUSE-NEXT:   %2 = psk_realize.convert %0 {site = "f/%2"}
// FUSE-NEXT:   %3 = psk_realize.convert %1 {site = "f/%2"}
// FUSE-NEXT:   %4 = psk_realize.group %2, %3 {site = "f/%3"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4> {
// FUSE-NEXT:   ^bb0(%5: !psk_realize.tensor<f32, batch: 2, model: 4>, %6: !psk_realize.tensor<f32, 4>):
// FUSE-NEXT:     %7 = psk_realize.mul %5, %6 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%2"}
// FUSE-NEXT:     %8 = psk_realize.exp %7 {site = "f/%3"} : !psk_realize.tensor<f32, batch: 2, model: 4>
// FUSE-NEXT:     psk_realize.yield %8 : !psk_realize.tensor<f32, batch: 2, model: 4>
// FUSE-NEXT:   }
// FUSE-NEXT:   %5 = psk_realize.convert %4 {site = "f/%3"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<bf16, batch: 2, model: 4>
// FUSE-NEXT:   %6 = psk_realize.convert %5 {site = "f/%4"}
// FUSE-NEXT:   %7 = psk_realize.sum %6
// FUSE-NEXT:   psk_realize.return %7
// FUSE:      psk_realize.func @g
// FUSE-NOT:  psk_realize.group
// FUSE:      psk_realize.add

// All f64: no convert anywhere, and the sum's result is f64.
// F64-NOT:   psk_realize.convert
// F64:       %2 = psk_realize.mul %0, %1 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%2"} : (!psk_realize.tensor<f64, batch: 2, model: 4>, !psk_realize.tensor<f64, 4>) -> !psk_realize.tensor<f64, batch: 2, model: 4>
// F64-NOT:   psk_realize.convert
// F64:       psk_realize.sum {{.*}} -> !psk_realize.tensor<f64, batch: 2>
// F64-NOT:   psk_realize.convert
