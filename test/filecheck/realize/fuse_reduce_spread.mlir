// psk-fuse-reduce when a spread takes the square only for its shape (`like`), as the
// reverse sweep of RMSNorm's mean(x^2) does: the spread reads no element of %sq, so the
// mean is still its one reader and the square joins it; the spread then takes its shape
// from %x, the value the square was computed from (the same sizes). Without that rule the
// square was stored, a launch of its own, for a reader that never loads it.
// RUN: presk-opt %s -p psk-fuse-reduce | filecheck %s
// RUN: presk-opt %s -p psk-fuse-reduce,convert-psk-realize-to-kernel | filecheck %s --check-prefix=KERNEL

builtin.module {
  psk_realize.func @f(%x: !psk_realize.tensor<f32, batch: 2, model: 4>, %c: !psk_realize.tensor<f32, batch: 2>) -> !psk_realize.tensor<f32, batch: 2, model: 4> attributes {arg_names = ["x", "c"], source = "f", entry} {
    %sq = psk_realize.powi %x {n = 2 : i64, site = "f/%3"} : !psk_realize.tensor<f32, batch: 2, model: 4>
    %ms = psk_realize.mean %sq {axis = 1 : i64, axis_name = "model", name = "ms", site = "f/%4"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2>
    %s = psk_realize.spread %c, %sq {mean, places = array<i64: 0>, site = "f/%5"} : (!psk_realize.tensor<f32, batch: 2>, !psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    %d = psk_realize.div %s, %ms {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 0>, site = "f/%6"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, batch: 2>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    psk_realize.return %d {site = "f/%7"} : !psk_realize.tensor<f32, batch: 2, model: 4>
  }
}

// CHECK:      psk_realize.func @f
// CHECK-NEXT:   %s = psk_realize.spread %c, %x {mean, places = array<i64: 0>, site = "f/%5"}
// CHECK-NEXT:   %d = psk_realize.reduce_group %x, %s {site = "f/%6"}
// CHECK-NEXT:   ^bb0(%0: {{.*}}, %1: {{.*}}):
// CHECK-NEXT:     %sq = psk_realize.powi %0 {n = 2 : i64, site = "f/%3"}
// CHECK-NEXT:     %ms = psk_realize.mean %sq
// CHECK-NEXT:     %{{.*}} = psk_realize.div %1, %ms
// CHECK-NEXT:     psk_realize.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_realize.return %d

// KERNEL:      psk_kernel.host @f
// KERNEL-NEXT:   psk_kernel.mark
// KERNEL-NEXT:   psk_kernel.alloc {site = "f/%5"}
// KERNEL-NEXT:   psk_kernel.launch @k0(%1, %4) {site = "f/%5", sites = ["f/%5"]}
// KERNEL-NEXT:   psk_kernel.launch @k1(%0, %4, %2) {fused, site = "f/%6", sites = ["f/%3", "f/%4", "f/%6"]}
// KERNEL-NEXT:   psk_kernel.release
