// psk-kernel-dedup: @neg_a and @neg_b have the same nest (their titles and axis names
// differ), so @neg_b goes and its launch launches @neg_a; @double differs. The kernels are
// then k0, k1 in the order the entry first launches them: @double (k0), then the negation
// (k1, with the first one's title), put at the module's start in that order.
// RUN: presk-opt %s -p psk-kernel-dedup | filecheck %s
// RUN: presk-opt %s -p psk-kernel-dedup,psk-kernel-dedup | filecheck %s

builtin.module {
  psk_kernel.kernel @neg_a(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, 4> -> f32
      %4 = psk_kernel.neg %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 4>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @double(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "add"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, 4> -> f32
      %4 = psk_kernel.add %3, %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 4>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @neg_b(%0: !psk_kernel.buffer<f32, n: 4>, %1: !psk_kernel.buffer<f32, n: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "negate"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, n: 4> -> f32
      %4 = psk_kernel.neg %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, n: 4>
      psk_kernel.yield
    }
  }
  psk_kernel.host @f(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "out"], entry, function = "f", outputs = 1 : i64} {
    %2 = psk_kernel.mark
    %3 = psk_kernel.alloc {site = "f/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @double(%0, %3) {site = "f/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    %4 = psk_kernel.alloc {site = "f/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg_b(%3, %4) {site = "f/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @neg_a(%4, %1) {site = "f/%3"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %2
  }
}

// CHECK:      psk_kernel.kernel @k0({{.*}}) attributes {{{.*}}title = "add"}
// CHECK:      psk_kernel.add
// CHECK:      psk_kernel.kernel @k1({{.*}}) attributes {{{.*}}title = "neg"}
// CHECK:      psk_kernel.neg
// CHECK-NOT:  psk_kernel.kernel
// CHECK:      psk_kernel.host @f
// CHECK:      psk_kernel.launch @k0(%0, %3)
// CHECK:      psk_kernel.launch @k1(%3, %4)
// CHECK:      psk_kernel.launch @k1(%4, %1)
