// psk-kernel-share-converts: %x converted to f32 twice is converted once — the second
// convert and its alloc go, its reader reads the first's buffer (CHECK-NOT in @shared).
// Not shared: a conversion into another type (bf16), one after a launch that writes the
// source (@rewritten), one after a `release` (@scoped), one whose destination a kernel
// also writes (@written). Running the pass again changes nothing.
// RUN: presk-opt %s -p psk-kernel-share-converts | filecheck %s
// RUN: presk-opt %s -p psk-kernel-share-converts,psk-kernel-share-converts | filecheck %s

builtin.module {
  psk_kernel.kernel @neg(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, 4> -> f32
      %4 = psk_kernel.neg %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 4>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @twice(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f64, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "add"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f64, 4> -> f64
      %4 = psk_kernel.add %3, %3 : f64
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f64, 4>
      psk_kernel.yield
    }
  }
  // CHECK-LABEL: psk_kernel.host @shared
  // CHECK:      %[[A:.*]] = psk_kernel.alloc {site = "f/%1"}
  // CHECK-NEXT: psk_kernel.convert %0 to %[[A]] {site = "f/%1"}
  // CHECK:      psk_kernel.launch @neg(%[[A]], %1)
  // CHECK-NOT:  psk_kernel.convert %0 to %{{.*}} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
  // CHECK:      %[[B:.*]] = psk_kernel.alloc {site = "f/%3"} : !psk_kernel.buffer<bf16, 4>
  // CHECK-NEXT: psk_kernel.convert %0 to %[[B]]
  // CHECK:      psk_kernel.launch @neg(%[[A]], %2)
  psk_kernel.host @shared(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a", "b"], function = "f", outputs = 2 : i64} {
    %3 = psk_kernel.alloc {site = "f/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %3 {site = "f/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%3, %1) {site = "f/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    %4 = psk_kernel.alloc {site = "f/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %4 {site = "f/%2"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    %5 = psk_kernel.alloc {site = "f/%3"} : !psk_kernel.buffer<bf16, 4>
    psk_kernel.convert %0 to %5 {site = "f/%3"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<bf16, 4>
    psk_kernel.launch @neg(%4, %2) {site = "f/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @rewritten
  // CHECK-COUNT-2: psk_kernel.convert %3 to
  psk_kernel.host @rewritten(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a", "b"], function = "f", outputs = 2 : i64} {
    %3 = psk_kernel.alloc {site = "g/%1"} : !psk_kernel.buffer<f64, 4>
    psk_kernel.launch @twice(%0, %3) {site = "g/%1"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, 4>)
    %4 = psk_kernel.alloc {site = "g/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %3 to %4 {site = "g/%2"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%4, %1) {site = "g/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @twice(%0, %3) {site = "g/%1"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, 4>)
    %5 = psk_kernel.alloc {site = "g/%3"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %3 to %5 {site = "g/%3"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%5, %2) {site = "g/%3"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @scoped
  // CHECK-COUNT-2: psk_kernel.convert %0 to
  psk_kernel.host @scoped(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a", "b"], function = "f", outputs = 2 : i64} {
    %3 = psk_kernel.mark
    %4 = psk_kernel.alloc {site = "h/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %4 {site = "h/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%4, %1) {site = "h/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %3
    %5 = psk_kernel.alloc {site = "h/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %5 {site = "h/%2"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%5, %2) {site = "h/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @written
  // CHECK-COUNT-2: psk_kernel.convert %0 to
  psk_kernel.host @written(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a", "b"], function = "f", outputs = 2 : i64} {
    %3 = psk_kernel.alloc {site = "w/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %3 {site = "w/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%3, %1) {site = "w/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    %4 = psk_kernel.alloc {site = "w/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %4 {site = "w/%2"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%1, %4) {site = "w/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @neg(%4, %2) {site = "w/%3"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
}
