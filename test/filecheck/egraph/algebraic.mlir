// psk-egraph-opt, algebraic rules: x·1 + 0 is x (neutral elements), 2·3 folds to 6, and
// a·b + a·c factors into a·(b + c) (one multiply fewer); the result keeps the site.
// RUN: presk-opt %s -p psk-egraph-opt | filecheck %s

builtin.module {
  psk_core.func @f(%0: !psk_core.tensor<8>, %1: !psk_core.tensor<8>, %2: !psk_core.tensor<8>) -> !psk_core.tensor<8> attributes {arg_names = ["a", "b", "c"]} {
    %3 = psk_core.constant {site = "f/%3", value = 1.0 : f64} : !psk_core.tensor<>
    %4 = psk_core.constant {site = "f/%4", value = 0.0 : f64} : !psk_core.tensor<>
    %5 = psk_core.mul %0, %3 {site = "f/%5"} : (!psk_core.tensor<8>, !psk_core.tensor<>) -> !psk_core.tensor<8>
    %6 = psk_core.add %5, %4 {site = "f/%6"} : (!psk_core.tensor<8>, !psk_core.tensor<>) -> !psk_core.tensor<8>
    %7 = psk_core.mul %6, %1 {site = "f/%7"} : (!psk_core.tensor<8>, !psk_core.tensor<8>) -> !psk_core.tensor<8>
    %8 = psk_core.mul %6, %2 {site = "f/%8"} : (!psk_core.tensor<8>, !psk_core.tensor<8>) -> !psk_core.tensor<8>
    %9 = psk_core.add %7, %8 {name = "s", site = "f/%9"} : (!psk_core.tensor<8>, !psk_core.tensor<8>) -> !psk_core.tensor<8>
    %10 = psk_core.constant {site = "f/%10", value = 2.0 : f64} : !psk_core.tensor<>
    %11 = psk_core.constant {site = "f/%11", value = 3.0 : f64} : !psk_core.tensor<>
    %12 = psk_core.mul %10, %11 {site = "f/%12"} : (!psk_core.tensor<>, !psk_core.tensor<>) -> !psk_core.tensor<>
    %13 = psk_core.mul %9, %12 {site = "f/%13"} : (!psk_core.tensor<8>, !psk_core.tensor<>) -> !psk_core.tensor<8>
    psk_core.return %13 {site = "f/%14"} : !psk_core.tensor<8>
  }
}

// CHECK-LABEL: psk_core.func @f(
// CHECK-NEXT:  %[[BC:[0-9]+]] = psk_core.add %1, %2 {site = "f/%901"}
// CHECK-NEXT:  %[[S:[0-9]+]] = psk_core.mul %0, %[[BC]] {name = "s", site = "f/%9"}
// CHECK-NEXT:  %[[SIX:[0-9]+]] = psk_core.constant {site = "f/%12", value = 6.000000e+00 : f64}
// CHECK-NEXT:  %[[R:[0-9]+]] = psk_core.mul %[[S]], %[[SIX]] {site = "f/%13"}
// CHECK-NEXT:  psk_core.return %[[R]]
