// psk-inline on a minimal program (Lin.apply = x · w + b; f = relu(Lin.apply(θ, x))): the
// call is replaced by the callee's ops (they keep their sites), and the callee, no longer
// reached, is removed. Then psk-fuse groups the bias add with the relu, and the group,
// the dot's one reader, reading it at its own indices, all of it the kernel's own
// arithmetic, becomes the dot's epilogue: one kernel "dot+add+relu" (the sum, then the
// add and the max on it, then the store). Without psk-inline: a dot+add kernel in
// Lin.apply and a relu kernel in f; with epilogues=false, the dot and the add are two.
// RUN: presk-opt %s -p psk-inline | filecheck %s
// RUN: presk-opt %s -p psk-inline,psk-fuse,convert-psk-realize-to-kernel,psk-kernel-dedup | filecheck %s --check-prefix=KERNEL
// RUN: presk-opt %s -p psk-fuse,convert-psk-realize-to-kernel,psk-kernel-dedup | filecheck %s --check-prefix=NOINLINE
// RUN: presk-opt %s -p 'convert-psk-realize-to-kernel{epilogues=false}' | filecheck %s --check-prefix=NOEPI

builtin.module {
  psk_realize.func @Lin.apply(%0: !psk_realize.tensor<f64, 3, 2>, %1: !psk_realize.tensor<f64, 2>, %2: !psk_realize.tensor<f64, batch: 2, 3>) -> !psk_realize.tensor<f64, batch: 2, 2> attributes {arg_names = ["θ.w", "θ.b", "x"], source = "Lin.apply"} {
    %3 = psk_realize.dot %2, %0 {site = "Lin.apply/%3"} : (!psk_realize.tensor<f64, batch: 2, 3>, !psk_realize.tensor<f64, 3, 2>) -> !psk_realize.tensor<f64, batch: 2, 2>
    %4 = psk_realize.add %3, %1 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "Lin.apply/%5"} : (!psk_realize.tensor<f64, batch: 2, 2>, !psk_realize.tensor<f64, 2>) -> !psk_realize.tensor<f64, batch: 2, 2>
    psk_realize.return %4 {site = "Lin.apply/%6"} : !psk_realize.tensor<f64, batch: 2, 2>
  }
  psk_realize.func @f(%0: !psk_realize.tensor<f64, 3, 2>, %1: !psk_realize.tensor<f64, 2>, %2: !psk_realize.tensor<f64, batch: 2, 3>) -> !psk_realize.tensor<f64, batch: 2, 2> attributes {arg_names = ["θ.w", "θ.b", "x"], dims = {B = 2 : i64}, entry, source = "f"} {
    %3 = psk_realize.call @Lin.apply(%0, %1, %2) {site = "f/%2"} : (!psk_realize.tensor<f64, 3, 2>, !psk_realize.tensor<f64, 2>, !psk_realize.tensor<f64, batch: 2, 3>) -> !psk_realize.tensor<f64, batch: 2, 2>
    %4 = psk_realize.relu %3 {site = "f/%3"} : !psk_realize.tensor<f64, batch: 2, 2>
    psk_realize.return %4 {site = "f/%4"} : !psk_realize.tensor<f64, batch: 2, 2>
  }
}


// CHECK:      builtin.module {
// CHECK-NOT:    @Lin.apply
// CHECK:        psk_realize.func @f(%0: {{.*}}, %1: {{.*}}, %2: {{.*}})
// CHECK-NEXT:     %3 = psk_realize.dot %2, %0 {site = "Lin.apply/%3"}
// CHECK-NEXT:     %4 = psk_realize.add %3, %1 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "Lin.apply/%5"}
// CHECK-NEXT:     %5 = psk_realize.relu %4 {site = "f/%3"}
// CHECK-NEXT:     psk_realize.return %5 {site = "f/%4"}

// KERNEL:      psk_kernel.kernel @k0({{.*}}) attributes {{{.*}}title = "dot+add+relu"}
// KERNEL:          %7 = psk_kernel.for %8 = 0 to 3 iter(%9 = %6) -> (f64) {
// KERNEL:            %13 = psk_kernel.add %9, %12 : f64
// KERNEL:          %14 = psk_kernel.load %2[%5]
// KERNEL-NEXT:     %15 = psk_kernel.add %7, %14 : f64
// KERNEL-NEXT:     %16 = psk_kernel.max %15, %6 : f64
// KERNEL-NEXT:     psk_kernel.store %16, %3[%4, %5]
// KERNEL:      psk_kernel.host @f
// KERNEL-NEXT:   psk_kernel.launch @k0(%2, %0, %1, %3) {fused, site = "f/%3", sites = ["Lin.apply/%3", "Lin.apply/%5", "f/%3"]}
// KERNEL-NEXT: }

// NOINLINE:    title = "dot+add"}
// NOINLINE:    title = "relu"}
// NOINLINE:    psk_kernel.host @Lin.apply
// NOINLINE:    psk_kernel.host @f
// NOINLINE:      psk_kernel.call @Lin.apply

// NOEPI:       title = "dot"}
// NOEPI:       title = "add"}
// NOEPI:       title = "relu"}
