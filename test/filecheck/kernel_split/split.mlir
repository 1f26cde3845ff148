// psk-kernel-split: a kernel whose layout says split = [0, 3] over an outermost loop of
// 7 gets three parts over [0, 2), [2, 4), [4, 7) (untiled: ranges of single rows), each
// the nest over its range with the layout's split dropped, placed before the kernel; the
// kernel stays as it was and lists them in `parts`. A kernel without a split is left as is,
// and running the pass again changes nothing. The result verifies (the round trip).
// RUN: presk-opt %s -p psk-kernel-split | filecheck %s
// RUN: presk-opt %s -p psk-kernel-split,psk-kernel-split | presk-opt | filecheck %s

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 7>, %1: !psk_kernel.buffer<f32, 7>) attributes {layout = #psk_kernel.layout<default, split = [0, 3]>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 7 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, 7> -> f32
      %4 = psk_kernel.neg %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 7>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, 7>, %1: !psk_kernel.buffer<f32, 7>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "add"} {
    psk_kernel.for %2 = 0 to 7 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, 7> -> f32
      %4 = psk_kernel.add %3, %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 7>
      psk_kernel.yield
    }
  }
}

// CHECK:      psk_kernel.kernel @k0_part0({{.*}}) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"}
// CHECK-NEXT:   psk_kernel.for %2 = 0 to 2 {
// CHECK:      psk_kernel.kernel @k0_part1({{.*}}) attributes {layout = #psk_kernel.layout<default>,
// CHECK-NEXT:   psk_kernel.for %2 = 2 to 4 {
// CHECK:      psk_kernel.kernel @k0_part2({{.*}}) attributes {layout = #psk_kernel.layout<default>,
// CHECK-NEXT:   psk_kernel.for %2 = 4 to 7 {
// CHECK:      psk_kernel.kernel @k0({{.*}}) attributes {layout = #psk_kernel.layout<default, split = [0, 3]>, outputs = 1 : i64, parts = [@k0_part0, @k0_part1, @k0_part2], title = "neg"}
// CHECK-NEXT:   psk_kernel.for %2 = 0 to 7 {
// CHECK:      psk_kernel.kernel @k1({{.*}}) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "add"}
// CHECK-NOT:  _part
