// psk-realize-drop-unread on the recorded gradient of a stack of two blocks y = exp(x · w)
// (`fold_fwd` and `fold_bwd` recorded as loops, convert-psk-core-to-realize): the forward
// fold stacks all four results of @Blk.apply.fwd (y, exp, w, x); @Blk.apply.bwd reads
// three, never res.0 (the step's value), so res.0 leaves @Blk.apply.bwd, its stack leaves
// the reverse fold's operands, @Deep.apply.bwd's and @loss.bwd's arguments and the forward
// instances' results, and the forward fold stacks results 1-3 only. @Deep.apply.bwd's own
// res.0 (a call's value, no stack) stays: only what a fold's stacks reach is dropped.
// RUN: presk-opt %s -p psk-realize-drop-unread | filecheck %s
// RUN: presk-opt %s -p psk-realize-drop-unread,psk-realize-drop-unread | filecheck %s

builtin.module {
  psk_realize.func @Blk.apply.fwd(%0: !psk_realize.tensor<f64, 2>, %1: !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2>, !psk_realize.tensor<f64, m: 2>) attributes {arg_names = ["θ.w", "x"], source = "Blk.apply.fwd"} {
    %2 = psk_realize.mul %1, %0 {lhs_map = array<i64: 0>, rhs_map = array<i64: 0>, site = "Blk.apply/%3"} : (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2>) -> !psk_realize.tensor<f64, m: 2>
    %3 = psk_realize.exp %2 {site = "Blk.apply/%4"} : !psk_realize.tensor<f64, m: 2>
    psk_realize.return %3, %3, %0, %1 {site = "Blk.apply.fwd/%7"} : !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2>, !psk_realize.tensor<f64, m: 2>
  }
  psk_realize.func @Deep.apply.fwd(%0: !psk_realize.tensor<f64, 2, 2>, %1: !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>) attributes {arg_names = ["θ.blocks.w", "x"], source = "Deep.apply.fwd"} {
    %2, %3, %4, %5, %6 = psk_realize.fold @Blk.apply.fwd(%0, %1) {acc = 0 : i64, from = 0 : i64, site = "Deep.apply.fwd/%5", stacks = [0 : i64, 1 : i64, 2 : i64, 3 : i64], to = 2 : i64} : (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>)
    psk_realize.return %2, %0, %3, %4, %5, %6 {site = "Deep.apply.fwd/%8"} : !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>
  }
  psk_realize.func @loss.fwd(%0: !psk_realize.tensor<f64, 2, 2>, %1: !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>) attributes {arg_names = ["θ.blocks.w", "x"], source = "loss.fwd"} {
    %2, %3, %4, %5, %6, %7 = psk_realize.call @Deep.apply.fwd(%0, %1) {site = "loss.fwd/%5"} : (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>)
    %8 = psk_realize.sum %2 {site = "loss/%3"} : (!psk_realize.tensor<f64, m: 2>) -> !psk_realize.tensor<f64>
    psk_realize.return %8, %2, %2, %3, %4, %5, %6, %7 {site = "loss.fwd/%7"} : !psk_realize.tensor<f64>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>
  }
  psk_realize.func @Blk.apply.bwd(%0: !psk_realize.tensor<f64, m: 2>, %1: !psk_realize.tensor<f64, m: 2>, %2: !psk_realize.tensor<f64, 2>, %3: !psk_realize.tensor<f64, m: 2>, %4: !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, 2>, !psk_realize.tensor<f64, m: 2>) attributes {arg_names = ["res.0", "res.1", "res.2", "res.3", "d%4"], source = "Blk.apply.bwd"} {
    %5 = psk_realize.mul %4, %1 {lhs_map = array<i64: 0>, name = "d%3", rhs_map = array<i64: 0>, site = "Blk.apply.bwd/%8"} : !psk_realize.tensor<f64, m: 2>
    %6 = psk_realize.mul %5, %2 {lhs_map = array<i64: 0>, name = "dx", rhs_map = array<i64: 0>, site = "Blk.apply.bwd/%9"} : (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2>) -> !psk_realize.tensor<f64, m: 2>
    %7 = psk_realize.mul %5, %3 {lhs_map = array<i64: 0>, rhs_map = array<i64: 0>, site = "Blk.apply.bwd/%10"} : !psk_realize.tensor<f64, m: 2>
    %8 = psk_realize.sum_to %7 {keep = array<i64: 0>, name = "dw", site = "Blk.apply.bwd/%11"} : (!psk_realize.tensor<f64, m: 2>) -> !psk_realize.tensor<f64, 2>
    psk_realize.return %8, %6 {site = "Blk.apply.bwd/%14"} : !psk_realize.tensor<f64, 2>, !psk_realize.tensor<f64, m: 2>
  }
  psk_realize.func @Deep.apply.bwd(%0: !psk_realize.tensor<f64, m: 2>, %1: !psk_realize.tensor<f64, 2, 2>, %2: !psk_realize.tensor<f64, 2, m: 2>, %3: !psk_realize.tensor<f64, 2, m: 2>, %4: !psk_realize.tensor<f64, 2, 2>, %5: !psk_realize.tensor<f64, 2, m: 2>, %6: !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>) attributes {arg_names = ["res.0", "res.1.w", "res.2.0", "res.2.1", "res.2.2", "res.2.3", "d%3"], source = "Deep.apply.bwd"} {
    %7, %8 = psk_realize.fold @Blk.apply.bwd(%2, %3, %4, %5, %6) {acc = 1 : i64, from = 0 : i64, reverse, site = "Deep.apply.bwd/%10", stacks = [0 : i64], to = 2 : i64} : (!psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>)
    psk_realize.return %8, %7 {site = "Deep.apply.bwd/%15"} : !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>
  }
  psk_realize.func @loss.bwd(%0: !psk_realize.tensor<f64>, %1: !psk_realize.tensor<f64, m: 2>, %2: !psk_realize.tensor<f64, m: 2>, %3: !psk_realize.tensor<f64, 2, 2>, %4: !psk_realize.tensor<f64, 2, m: 2>, %5: !psk_realize.tensor<f64, 2, m: 2>, %6: !psk_realize.tensor<f64, 2, 2>, %7: !psk_realize.tensor<f64, 2, m: 2>, %8: !psk_realize.tensor<f64>) -> (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>) attributes {arg_names = ["res.0", "res.1", "res.2.0", "res.2.1.w", "res.2.2.0", "res.2.2.1", "res.2.2.2", "res.2.2.3", "d%3"], source = "loss.bwd"} {
    %9 = psk_realize.spread %8, %1 {name = "d%2", places = array<i64>, site = "loss.bwd/%9"} : (!psk_realize.tensor<f64>, !psk_realize.tensor<f64, m: 2>) -> !psk_realize.tensor<f64, m: 2>
    %10, %11 = psk_realize.call @Deep.apply.bwd(%2, %3, %4, %5, %6, %7, %9) {site = "loss.bwd/%10"} : (!psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>)
    psk_realize.return %10, %11 {site = "loss.bwd/%14"} : !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>
  }
  psk_realize.func @loss.value_vjp(%0: !psk_realize.tensor<f64, 2, 2>, %1: !psk_realize.tensor<f64, m: 2>, %2: !psk_realize.tensor<f64>) -> (!psk_realize.tensor<f64>, !psk_realize.tensor<f64, 2, 2>) attributes {arg_names = ["θ.blocks.w", "x", "d%3"], entry, result_names = ["result", "grad.blocks.w"], source = "loss.value_vjp"} {
    %3, %4, %5, %6, %7, %8, %9, %10 = psk_realize.call @loss.fwd(%0, %1) {site = "loss.value_vjp/%3"} : (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>) -> (!psk_realize.tensor<f64>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>)
    %11, %12 = psk_realize.call @loss.bwd(%3, %4, %5, %6, %7, %8, %9, %10, %2) {site = "loss.value_vjp/%4"} : (!psk_realize.tensor<f64>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, 2, m: 2>, !psk_realize.tensor<f64>) -> (!psk_realize.tensor<f64, 2, 2>, !psk_realize.tensor<f64, m: 2>)
    psk_realize.return %3, %11 {site = "loss.value_vjp/%9"} : !psk_realize.tensor<f64>, !psk_realize.tensor<f64, 2, 2>
  }
}


// CHECK:      psk_realize.func @Blk.apply.fwd(
// CHECK:      psk_realize.return %3, %3, %0, %1
// CHECK:      psk_realize.func @Deep.apply.fwd(
// CHECK-NEXT:   %2, %3, %4, %5 = psk_realize.fold @Blk.apply.fwd(%0, %1) {acc = 0 : i64, from = 0 : i64, site = "Deep.apply.fwd/%5", stacks = [1 : i64, 2 : i64, 3 : i64], to = 2 : i64}
// CHECK-NEXT:   psk_realize.return %2, %0, %3, %4, %5 {
// CHECK:      psk_realize.func @Blk.apply.bwd({{.*}}) -> ({{.*}}) attributes {arg_names = ["res.1", "res.2", "res.3", "d%4"]
// CHECK:      psk_realize.func @Deep.apply.bwd({{.*}}) -> ({{.*}}) attributes {arg_names = ["res.0", "res.1.w", "res.2.1", "res.2.2", "res.2.3", "d%3"]
// CHECK-NEXT:   %6, %7 = psk_realize.fold @Blk.apply.bwd(%2, %3, %4, %5) {acc = 1 : i64, from = 0 : i64, reverse, site = "Deep.apply.bwd/%10", stacks = [0 : i64], to = 2 : i64}
// CHECK:      psk_realize.func @loss.value_vjp(
// CHECK:      psk_realize.return %3, %10
