// psk-egraph-opt, accuracy rules that are also cheaper (so they win on time alone, as
// presk-opt runs the pass without a probe): log(1 + x) → log1p x, exp(x) − 1 → expm1 x,
// log Σ exp → logsumexp, log1p(exp x) → softplus x; and the textbook variance
// E[z²] − E[z]², z = x + 1000, which becomes E[(x − E[x])²] (variance + shift-cancels:
// the pass adding 1000 is gone, so it is cheaper too).
// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s

builtin.module {
  psk_core.func @f(%0: !psk_core.tensor<batch: 4, model: 8>) -> !psk_core.tensor<batch: 4> attributes {arg_names = ["x"]} {
    %1 = psk_core.constant {site = "f/%1", value = 1.0 : f64} : !psk_core.tensor<>
    %2 = psk_core.add %1, %0 {site = "f/%2"} : (!psk_core.tensor<>, !psk_core.tensor<batch: 4, model: 8>) -> !psk_core.tensor<batch: 4, model: 8>
    %3 = psk_core.log %2 {name = "l", site = "f/%3"} : !psk_core.tensor<batch: 4, model: 8>
    %4 = psk_core.exp %0 {site = "f/%4"} : !psk_core.tensor<batch: 4, model: 8>
    %5 = psk_core.sub %4, %1 {name = "e", site = "f/%5"} : (!psk_core.tensor<batch: 4, model: 8>, !psk_core.tensor<>) -> !psk_core.tensor<batch: 4, model: 8>
    %6 = psk_core.add %1, %4 {site = "f/%6"} : (!psk_core.tensor<>, !psk_core.tensor<batch: 4, model: 8>) -> !psk_core.tensor<batch: 4, model: 8>
    %7 = psk_core.log %6 {name = "sp", site = "f/%7"} : !psk_core.tensor<batch: 4, model: 8>
    %8 = psk_core.add %3, %5 {site = "f/%8"} : (!psk_core.tensor<batch: 4, model: 8>, !psk_core.tensor<batch: 4, model: 8>) -> !psk_core.tensor<batch: 4, model: 8>
    %9 = psk_core.add %8, %7 {site = "f/%9"} : (!psk_core.tensor<batch: 4, model: 8>, !psk_core.tensor<batch: 4, model: 8>) -> !psk_core.tensor<batch: 4, model: 8>
    %10 = psk_core.exp %9 {site = "f/%10"} : !psk_core.tensor<batch: 4, model: 8>
    %11 = psk_core.sum %10 {axis = "model", site = "f/%11"} : (!psk_core.tensor<batch: 4, model: 8>) -> !psk_core.tensor<batch: 4>
    %12 = psk_core.log %11 {name = "lse", site = "f/%12"} : !psk_core.tensor<batch: 4>
    psk_core.return %12 {site = "f/%13"} : !psk_core.tensor<batch: 4>
  }
  psk_core.func @loss(%0: !psk_core.tensor<batch: 8, feat: 16>) -> !psk_core.tensor<> attributes {arg_names = ["x"]} {
    %1 = psk_core.constant {site = "loss/%1", value = 1.000000e+03 : f64} : !psk_core.tensor<>
    %2 = psk_core.add %0, %1 {name = "z", site = "loss/%2"} : (!psk_core.tensor<batch: 8, feat: 16>, !psk_core.tensor<>) -> !psk_core.tensor<batch: 8, feat: 16>
    %3 = psk_core.mean %2 {axis = "feat", name = "m", site = "loss/%3"} : (!psk_core.tensor<batch: 8, feat: 16>) -> !psk_core.tensor<batch: 8>
    %4 = psk_core.powi %2 {n = 2 : i64, site = "loss/%4"} : !psk_core.tensor<batch: 8, feat: 16>
    %5 = psk_core.mean %4 {axis = "feat", name = "m2", site = "loss/%5"} : (!psk_core.tensor<batch: 8, feat: 16>) -> !psk_core.tensor<batch: 8>
    %6 = psk_core.powi %3 {n = 2 : i64, site = "loss/%6"} : !psk_core.tensor<batch: 8>
    %7 = psk_core.sub %5, %6 {name = "v", site = "loss/%7"} : (!psk_core.tensor<batch: 8>, !psk_core.tensor<batch: 8>) -> !psk_core.tensor<batch: 8>
    %8 = psk_core.mean %7 {site = "loss/%8"} : (!psk_core.tensor<batch: 8>) -> !psk_core.tensor<>
    psk_core.return %8 {site = "loss/%9"} : !psk_core.tensor<>
  }
}

// CHECK-LABEL: psk_core.func @f(
// CHECK-DAG:   psk_core.log1p %0 {name = "l", site = "f/%3"}
// CHECK-DAG:   psk_core.expm1 %0 {name = "e", site = "f/%5"}
// CHECK-DAG:   psk_core.softplus %0 {name = "sp", site = "f/%7"}
// CHECK:       psk_core.logsumexp %{{[0-9]+}} {axis = "model", name = "lse", site = "f/%12"}
// CHECK-NOT:   psk_core.log %

// CHECK-LABEL: psk_core.func @loss(
// CHECK-NEXT:  %[[M:[0-9]+]] = psk_core.mean %0 {axis = "feat", site = "loss/%7{{[0-9]+}}"}
// CHECK-NEXT:  %[[D:[0-9]+]] = psk_core.sub %0, %[[M]] {site = "loss/%7{{[0-9]+}}"}
// CHECK-NEXT:  %[[S:[0-9]+]] = psk_core.powi %[[D]] {n = 2 : i64, site = "loss/%7{{[0-9]+}}"}
// CHECK-NEXT:  %[[V:[0-9]+]] = psk_core.mean %[[S]] {axis = "feat", name = "v", site = "loss/%7"}
// CHECK-NEXT:  %[[R:[0-9]+]] = psk_core.mean %[[V]] {site = "loss/%8"}
// CHECK-NEXT:  psk_core.return %[[R]]
