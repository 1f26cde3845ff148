// psk-differentiate on a minimal Core function: f(w, x) = sum(w * exp(x)), so
// df/dw = exp(x) and df/dx = w * exp(x) (the seed d%4 spread over the sum's shape).
// store keeps the values the reverse sweep reads (the product, exp x and w); recompute
// keeps only the arguments and computes exp x again in @f.bwd.
// RUN: presk-opt %s -p 'psk-differentiate{entries=f}' | filecheck %s --check-prefix=STORE
// RUN: presk-opt %s -p 'psk-differentiate{entries=f remat=recompute}' | filecheck %s --check-prefix=RECOMPUTE

builtin.module {
  psk_core.func @f(%0: !psk_core.tensor<4>, %1: !psk_core.tensor<4>) -> !psk_core.tensor<> attributes {arg_names = ["w", "x"]} {
    %2 = psk_core.exp %1 {site = "f/%2"} : !psk_core.tensor<4>
    %3 = psk_core.mul %0, %2 {site = "f/%3"} : (!psk_core.tensor<4>, !psk_core.tensor<4>) -> !psk_core.tensor<4>
    %4 = psk_core.sum %3 {site = "f/%4"} : (!psk_core.tensor<4>) -> !psk_core.tensor<>
    psk_core.return %4 {site = "f/%5"} : !psk_core.tensor<>
  }
}

// The original function stays; the four new ones follow it.
// STORE-LABEL: psk_core.func @f(
// STORE-LABEL: psk_core.func @f.fwd(
// STORE:       psk_core.tuple %4, %3, %2, %0 {site = "f.fwd/%6"}
// STORE-LABEL: psk_core.func @f.bwd(%0: tuple<!psk_core.tensor<>, !psk_core.tensor<4>, !psk_core.tensor<4>, !psk_core.tensor<4>>, %1: !psk_core.tensor<>)
// STORE-SAME:  arg_names = ["res", "d%4"]
// STORE:       %[[EXP:[0-9]+]] = psk_core.get %0 {index = 2 : i64, site = "f/%2"}
// STORE-NEXT:  %[[W:[0-9]+]] = psk_core.get %0 {index = 3 : i64, name = "w", site = "f/%0"}
// STORE-NEXT:  %[[D3:[0-9]+]] = psk_core.spread %1, %{{[0-9]+}} {adjoint = ["f/%3"], name = "d%3"
// STORE-NEXT:  %[[DW:[0-9]+]] = psk_core.mul %[[D3]], %[[EXP]] {adjoint = ["f/%0"], name = "dw"
// STORE-NEXT:  %[[D2:[0-9]+]] = psk_core.mul %[[D3]], %[[W]] {adjoint = ["f/%2"], name = "d%2"
// STORE-NEXT:  %[[DX:[0-9]+]] = psk_core.mul %[[D2]], %[[EXP]] {adjoint = ["f/%1"], name = "dx"
// STORE-NEXT:  psk_core.tuple %[[DW]], %[[DX]]
// STORE-LABEL: psk_core.func @f.value_vjp(%0: !psk_core.tensor<4>, %1: !psk_core.tensor<4>, %2: !psk_core.tensor<>) -> tuple<!psk_core.tensor<>, !psk_core.tensor<4>, !psk_core.tensor<4>>
// STORE:       psk_core.call @f.fwd(%0, %1)
// STORE:       psk_core.call @f.bwd(
// STORE-LABEL: psk_core.func @f.vjp(%0: !psk_core.tensor<4>, %1: !psk_core.tensor<4>, %2: !psk_core.tensor<>) -> tuple<!psk_core.tensor<4>, !psk_core.tensor<4>>

// RECOMPUTE-LABEL: psk_core.func @f.fwd(
// RECOMPUTE:       psk_core.tuple %4, %0, %1 {site = "f.fwd/%6"}
// RECOMPUTE-LABEL: psk_core.func @f.bwd(
// RECOMPUTE:       %[[X:[0-9]+]] = psk_core.get %0 {index = 2 : i64, name = "x", site = "f/%1"}
// RECOMPUTE-NEXT:  %[[EXP:[0-9]+]] = psk_core.exp %[[X]] {site = "f/%2"}
// RECOMPUTE:       psk_core.mul %{{[0-9]+}}, %[[EXP]] {adjoint = ["f/%0"], name = "dw"
