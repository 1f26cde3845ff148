// psk-kernel-forward-copies: @lin.fwd hands back its input %x and a row of its weight
// stack as copies (`copy %x to %out`). The copies move to its caller (hoist), where the
// first becomes the buffer gelu writes (its alloc goes: the caller's output is written
// in place) and the second is hoisted again, into the entry, and there the entry's
// residual alloc becomes the parameter's row itself (coalesce). @lin.fwd's two outputs
// that nothing writes any more leave its signature and its call.
// Not removed: a copy whose source a later launch writes (@rewritten), one whose
// destination is read after a `release` (@scoped). Running the pass again changes nothing.
// RUN: presk-opt %s -p psk-kernel-forward-copies | filecheck %s
// RUN: presk-opt %s -p psk-kernel-forward-copies,psk-kernel-forward-copies | filecheck %s

builtin.module {
  psk_kernel.kernel @neg(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 4 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f32, 4> -> f32
      %4 = psk_kernel.neg %3 : f32
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, 4>
      psk_kernel.yield
    }
  }
  // CHECK-LABEL: psk_kernel.host @lin.fwd(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>)
  // CHECK-SAME:  arg_names = ["w", "x", "out.0"]
  // CHECK-SAME:  outputs = 1 : i64
  // CHECK-NEXT:  psk_kernel.launch @neg(%1, %2)
  // CHECK-NEXT:  }
  psk_kernel.host @lin.fwd(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>, %4: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["w", "x", "out.0", "out.1", "out.2"], function = "lin.fwd", outputs = 3 : i64} {
    psk_kernel.launch @neg(%1, %2) {site = "lin/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.copy %0 to %3 {site = "lin.fwd/%2"} : !psk_kernel.buffer<f32, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.copy %1 to %4 {site = "lin.fwd/%2"} : !psk_kernel.buffer<f32, 4> -> !psk_kernel.buffer<f32, 4>
  }
  // CHECK-LABEL: psk_kernel.host @block.fwd(%0: !psk_kernel.buffer<f32, 2, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>)
  // CHECK-SAME:  outputs = 2 : i64
  // CHECK-NEXT:  %4 = psk_kernel.at %0[1]
  // CHECK-NEXT:  psk_kernel.launch @neg(%1, %3)
  // CHECK-NEXT:  psk_kernel.call @lin.fwd(%4, %3, %2)
  // CHECK-NOT:   psk_kernel.copy
  psk_kernel.host @block.fwd(%0: !psk_kernel.buffer<f32, 2, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>, %4: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["ws", "x", "out.0", "out.1", "out.2"], function = "block.fwd", outputs = 3 : i64} {
    %5 = psk_kernel.at %0[1] : !psk_kernel.buffer<f32, 2, 4> -> !psk_kernel.buffer<f32, 4>
    %6 = psk_kernel.alloc {site = "block/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%1, %6) {site = "block/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.call @lin.fwd(%5, %6, %2, %3, %4) {site = "block/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @entry
  // CHECK-NEXT:  %3 = psk_kernel.mark
  // CHECK-NEXT:  %4 = psk_kernel.alloc
  // CHECK-NEXT:  %5 = psk_kernel.alloc
  // CHECK-NEXT:  psk_kernel.call @block.fwd(%0, %1, %4, %5)
  // CHECK-NEXT:  %6 = psk_kernel.at %0[1]
  // CHECK-NEXT:  psk_kernel.launch @neg(%6, %2)
  psk_kernel.host @entry(%0: !psk_kernel.buffer<f32, 2, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["ws", "x", "result"], entry, function = "entry", outputs = 1 : i64} {
    %3 = psk_kernel.mark
    %4 = psk_kernel.alloc {site = "e/%1"} : !psk_kernel.buffer<f32, 4>
    %5 = psk_kernel.alloc {site = "e/%1"} : !psk_kernel.buffer<f32, 4>
    %6 = psk_kernel.alloc {site = "e/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.call @block.fwd(%0, %1, %4, %5, %6) {site = "e/%1"} : (!psk_kernel.buffer<f32, 2, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @neg(%5, %2) {site = "e/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %3
  }
  // CHECK-LABEL: psk_kernel.host @rewritten
  // CHECK:       psk_kernel.copy %0 to %3
  psk_kernel.host @rewritten(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "result"], entry, function = "rewritten", outputs = 1 : i64} {
    %2 = psk_kernel.alloc {site = "r/%1"} : !psk_kernel.buffer<f32, 4>
    %3 = psk_kernel.alloc {site = "r/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.copy %0 to %3 {site = "r/%2"} : !psk_kernel.buffer<f32, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%3, %0) {site = "r/%3"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @neg(%3, %1) {site = "r/%4"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @scoped
  // CHECK:       psk_kernel.copy %3 to %4
  psk_kernel.host @scoped(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "result"], entry, function = "scoped", outputs = 1 : i64} {
    %2 = psk_kernel.mark
    %3 = psk_kernel.alloc {site = "s/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%0, %3) {site = "s/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    %4 = psk_kernel.alloc {site = "s/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.copy %3 to %4 {site = "s/%2"} : !psk_kernel.buffer<f32, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.release %2
    psk_kernel.launch @neg(%4, %1) {site = "s/%3"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
}
