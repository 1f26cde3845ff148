// psk-kernel-hoist-input-converts: the entry's input %x, read by nothing but one convert
// into f32, becomes an f32 input (named in `rounded_inputs`; the caller rounds it when it
// binds the call) and the convert and its alloc go. %y is read in f64 as well, so it
// stays f64 with its convert; so does an input whose converted copy a kernel then writes
// (an input is only read), and a host that nobody calls is left alone. Down the calls:
// the entry @e hands %x to @h2, which converts it, and %z to @k2, which converts it and
// hands it on to @h2: both narrow, with @h2's and @k2's arguments, and their converts go.
// @e2 hands its %v to @m, which gives it to @h, but @m's other caller @n hands @m a buffer
// of its own (not an argument), so @m's %v stays f64 — and with it @h's argument and @e2's
// input. Running
// the pass again changes nothing.
// RUN: presk-opt %s -p psk-kernel-hoist-input-converts | filecheck %s
// RUN: presk-opt %s -p psk-kernel-hoist-input-converts,psk-kernel-hoist-input-converts | filecheck %s

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
  // CHECK-LABEL: psk_kernel.host @f(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f64, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>, %4: !psk_kernel.buffer<f64, 4>)
  // CHECK-SAME:  rounded_inputs = ["x"]
  // CHECK-NEXT:    %5 = psk_kernel.mark
  // CHECK-NEXT:    psk_kernel.launch @neg(%0, %2)
  // CHECK-NEXT:    %6 = psk_kernel.alloc {site = "f/%2"}
  // CHECK-NEXT:    psk_kernel.convert %1 to %6
  // CHECK-NEXT:    psk_kernel.launch @neg(%6, %3)
  // CHECK-NEXT:    psk_kernel.launch @twice(%1, %4)
  psk_kernel.host @f(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f64, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>, %4: !psk_kernel.buffer<f64, 4>) attributes {arg_names = ["x", "y", "a", "b", "c"], entry, function = "f", outputs = 3 : i64} {
    %5 = psk_kernel.mark
    %6 = psk_kernel.alloc {site = "f/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %6 {site = "f/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%6, %2) {site = "f/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    %7 = psk_kernel.alloc {site = "f/%2"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %1 to %7 {site = "f/%2"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%7, %3) {site = "f/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @twice(%1, %4) {site = "f/%3"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, 4>)
    psk_kernel.release %5
  }
  // CHECK-LABEL: psk_kernel.host @w(%0: !psk_kernel.buffer<f64, 4>
  // CHECK-NOT:     rounded_inputs
  // CHECK:         psk_kernel.convert %0 to
  psk_kernel.host @w(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a"], entry, function = "w", outputs = 1 : i64} {
    %2 = psk_kernel.alloc {site = "w/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %2 {site = "w/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%1, %2) {site = "w/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.launch @neg(%2, %1) {site = "w/%3"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @g(%0: !psk_kernel.buffer<f64, 4>
  // CHECK:         psk_kernel.convert %0 to
  psk_kernel.host @g(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a"], function = "g", outputs = 1 : i64} {
    %2 = psk_kernel.alloc {site = "g/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %2 {site = "g/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%2, %1) {site = "g/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @h(%0: !psk_kernel.buffer<f64, 4>
  // CHECK:         psk_kernel.convert %0 to
  psk_kernel.host @h(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a"], function = "h", outputs = 1 : i64} {
    %2 = psk_kernel.mark
    %3 = psk_kernel.alloc {site = "h/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %3 {site = "h/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%3, %1) {site = "h/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %2
  }
  // CHECK-LABEL: psk_kernel.host @k2(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>)
  // CHECK-NEXT:    %3 = psk_kernel.mark
  // CHECK-NEXT:    psk_kernel.launch @neg(%0, %1)
  // CHECK-NEXT:    psk_kernel.call @h2(%0, %2)
  // CHECK-NEXT:    psk_kernel.release %3
  psk_kernel.host @k2(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["z", "a", "b"], function = "k", outputs = 2 : i64} {
    %3 = psk_kernel.mark
    %4 = psk_kernel.alloc {site = "k/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %4 {site = "k/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%4, %1) {site = "k/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.call @h2(%0, %2) {site = "k/%2"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %3
  }
  // CHECK-LABEL: psk_kernel.host @h2(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>)
  // CHECK-NEXT:    %2 = psk_kernel.mark
  // CHECK-NEXT:    psk_kernel.launch @neg(%0, %1)
  // CHECK-NEXT:    psk_kernel.release %2
  psk_kernel.host @h2(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "a"], function = "h", outputs = 1 : i64} {
    %2 = psk_kernel.mark
    %3 = psk_kernel.alloc {site = "h/%1"} : !psk_kernel.buffer<f32, 4>
    psk_kernel.convert %0 to %3 {site = "h/%1"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 4>
    psk_kernel.launch @neg(%3, %1) {site = "h/%1"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %2
  }
  // CHECK-LABEL: psk_kernel.host @e(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>, %4: !psk_kernel.buffer<f32, 4>)
  // CHECK-SAME:  rounded_inputs = ["x", "z"]
  // CHECK-NEXT:    psk_kernel.call @h2(%0, %2)
  // CHECK-NEXT:    psk_kernel.call @k2(%1, %3, %4)
  psk_kernel.host @e(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f64, 4>, %2: !psk_kernel.buffer<f32, 4>, %3: !psk_kernel.buffer<f32, 4>, %4: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["x", "z", "a", "b", "c"], entry, function = "e", outputs = 3 : i64} {
    psk_kernel.call @h2(%0, %2) {site = "e/%1"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.call @k2(%1, %3, %4) {site = "e/%2"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @m(%0: !psk_kernel.buffer<f64, 4>
  // CHECK-NEXT:    psk_kernel.call @h(%0, %1)
  psk_kernel.host @m(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["v", "a"], function = "m", outputs = 1 : i64} {
    psk_kernel.call @h(%0, %1) {site = "m/%1"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
  }
  // CHECK-LABEL: psk_kernel.host @n(
  // CHECK:         psk_kernel.call @m(%3, %1)
  psk_kernel.host @n(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["v", "a"], function = "n", outputs = 1 : i64} {
    %2 = psk_kernel.mark
    %3 = psk_kernel.alloc {site = "n/%1"} : !psk_kernel.buffer<f64, 4>
    psk_kernel.launch @twice(%0, %3) {site = "n/%1"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, 4>)
    psk_kernel.call @m(%3, %1) {site = "n/%2"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.release %2
  }
  // CHECK-LABEL: psk_kernel.host @e2(%0: !psk_kernel.buffer<f64, 4>
  // CHECK-NOT:     rounded_inputs
  psk_kernel.host @e2(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>, %2: !psk_kernel.buffer<f32, 4>) attributes {arg_names = ["v", "a", "b"], entry, function = "e2", outputs = 2 : i64} {
    psk_kernel.call @m(%0, %1) {site = "e2/%1"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
    psk_kernel.call @n(%0, %2) {site = "e2/%2"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
  }
}
