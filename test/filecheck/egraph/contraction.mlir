// psk-egraph-opt, contraction rules: Σ over the last axis of x·w (w a vector on that
// axis) is the dot x · w, and a scale moves through the dot onto its smaller result.
// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s

builtin.module {
  psk_core.func @f(%0: !psk_core.tensor<batch: 64, model: 32>, %1: !psk_core.tensor<model: 32>) -> !psk_core.tensor<batch: 64> attributes {arg_names = ["x", "w"]} {
    %2 = psk_core.constant {site = "f/%2", value = 0.5 : f64} : !psk_core.tensor<>
    %3 = psk_core.mul %0, %2 {site = "f/%3"} : (!psk_core.tensor<batch: 64, model: 32>, !psk_core.tensor<>) -> !psk_core.tensor<batch: 64, model: 32>
    %4 = psk_core.mul %3, %1 {site = "f/%4"} : (!psk_core.tensor<batch: 64, model: 32>, !psk_core.tensor<model: 32>) -> !psk_core.tensor<batch: 64, model: 32>
    %5 = psk_core.sum %4 {axis = "model", name = "y", site = "f/%5"} : (!psk_core.tensor<batch: 64, model: 32>) -> !psk_core.tensor<batch: 64>
    psk_core.return %5 {site = "f/%6"} : !psk_core.tensor<batch: 64>
  }
}

// CHECK-LABEL: psk_core.func @f(
// CHECK:       %[[D:[0-9]+]] = psk_core.dot %0, %1 {site = "f/%5{{[0-9]+}}"}
// CHECK:       psk_core.mul %[[D]], %{{[0-9]+}} {name = "y", site = "f/%5"}
// CHECK-NOT:   psk_core.sum
