// psk-fuse-reduce on a minimal RMSNorm (mean(x^2) over `model`, then x / sqrt(ms + e) * g):
// the square joins the mean (its one reader), the add and sqrt on the reduced shape join,
// then the div and mul over the rows reading the row's sqrt: one reduce_group of 6 steps
// at the root's site; lowered, one nest per row: a blocked sum of x·x, then a loop
// storing x / r * g.
// RUN: presk-opt %s -p psk-fuse,psk-fuse-reduce | filecheck %s
// RUN: presk-opt %s -p psk-fuse,psk-fuse-reduce,convert-psk-realize-to-kernel | filecheck %s --check-prefix=KERNEL
// RUN: presk-opt %s -p psk-fuse | filecheck %s --check-prefix=NOREDUCE

builtin.module {
  psk_realize.func @norm(%x: !psk_realize.tensor<f32, batch: 2, model: 4>, %g: !psk_realize.tensor<f32, 4>, %e: !psk_realize.tensor<f32>) -> !psk_realize.tensor<f32, batch: 2, model: 4> attributes {arg_names = ["x", "g", "e"], source = "norm", entry} {
    %sq = psk_realize.powi %x {n = 2 : i64, site = "norm/%3"} : !psk_realize.tensor<f32, batch: 2, model: 4>
    %ms = psk_realize.mean %sq {axis = 1 : i64, axis_name = "model", name = "ms", site = "norm/%4"} : (!psk_realize.tensor<f32, batch: 2, model: 4>) -> !psk_realize.tensor<f32, batch: 2>
    %a = psk_realize.add %ms, %e {lhs_map = array<i64: 0>, rhs_map = array<i64>, site = "norm/%6"} : (!psk_realize.tensor<f32, batch: 2>, !psk_realize.tensor<f32>) -> !psk_realize.tensor<f32, batch: 2>
    %r = psk_realize.sqrt %a {site = "norm/%7"} : !psk_realize.tensor<f32, batch: 2>
    %d = psk_realize.div %x, %r {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 0>, site = "norm/%8"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, batch: 2>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    %y = psk_realize.mul %d, %g {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "norm/%10"} : (!psk_realize.tensor<f32, batch: 2, model: 4>, !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, batch: 2, model: 4>
    psk_realize.return %y {site = "norm/%11"} : !psk_realize.tensor<f32, batch: 2, model: 4>
  }
}

// CHECK:      psk_realize.func @norm
// CHECK-NEXT:   %y = psk_realize.reduce_group %x, %e, %g {site = "norm/%10"}
// CHECK-NEXT:   ^bb0(%0: {{.*}}, %1: {{.*}}, %2: {{.*}}):
// CHECK-NEXT:     %sq = psk_realize.powi %0 {n = 2 : i64, site = "norm/%3"}
// CHECK-NEXT:     %ms = psk_realize.mean %sq {axis = 1 : i64, axis_name = "model", name = "ms", site = "norm/%4"}
// CHECK-NEXT:     %a = psk_realize.add %ms, %1
// CHECK-NEXT:     %r = psk_realize.sqrt %a
// CHECK-NEXT:     %d = psk_realize.div %0, %r
// CHECK-NEXT:     %{{.*}} = psk_realize.mul %d, %2
// CHECK-NEXT:     psk_realize.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_realize.return %y

// KERNEL:      psk_kernel.kernel @k0({{.*}}) attributes {{{.*}}title = "fused 6 steps, mean axis model"}
// KERNEL-NEXT:   psk_kernel.for %4 = 0 to 2 {
// KERNEL:          psk_kernel.for %7 = 0 to 4 iter(%8 = %5) -> (f32) attributes {partials = 4 : i64} {
// KERNEL-NEXT:       %9 = psk_kernel.load %0[%4, %7]
// KERNEL-NEXT:       %10 = psk_kernel.mul %9, %9 : f32
// KERNEL-NEXT:       %11 = psk_kernel.add %8, %10 : f32
// KERNEL:          psk_kernel.div %6,
// KERNEL:          psk_kernel.math "sqrt"
// KERNEL:          psk_kernel.for %17 = 0 to 4 {
// KERNEL:            psk_kernel.div %18, %16 : f32
// KERNEL:            psk_kernel.store
// KERNEL:      psk_kernel.host @norm
// KERNEL-NEXT:   psk_kernel.launch @k0
// KERNEL-NOT:    psk_kernel.launch

// NOREDUCE-NOT: psk_realize.reduce_group
// NOREDUCE:     psk_realize.mean
