// convert-psk-realize-to-kernel on a small instance: a narrowing convert is a host
// convert, a widening one (a bf16 parameter) is folded into the kernel's load; an
// element-wise op with a broadcast map, a reduction over a named axis, and a dot whose
// only reader is an add: one dot+add kernel with the add as its epilogue.
// RUN: presk-opt %s -p convert-psk-realize-to-kernel,psk-kernel-dedup | filecheck %s
// RUN: presk-opt %s -p convert-psk-realize-to-kernel,psk-kernel-dedup | presk-opt | filecheck %s

builtin.module {
  psk_realize.func @f(%0: !psk_realize.tensor<bf16, 3>, %1: !psk_realize.tensor<f32, 3, 2>, %2: !psk_realize.tensor<f64, batch: 2, model: 3>) -> !psk_realize.tensor<f32, batch: 2, 2> attributes {arg_names = ["θ.g", "θ.w", "x"], entry, source = "f"} {
    %3 = psk_realize.convert %2 {site = "f/%3"} : (!psk_realize.tensor<f64, batch: 2, model: 3>) -> !psk_realize.tensor<f32, batch: 2, model: 3>
    %4 = psk_realize.convert %0 {site = "f/%3"} : (!psk_realize.tensor<bf16, 3>) -> !psk_realize.tensor<f32, 3>
    %5 = psk_realize.mul %3, %4 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%3"} : (!psk_realize.tensor<f32, batch: 2, model: 3>, !psk_realize.tensor<f32, 3>) -> !psk_realize.tensor<f32, batch: 2, model: 3>
    %6 = psk_realize.sum %5 {axis = 1 : i64, axis_name = "model", name = "s", site = "f/%4"} : (!psk_realize.tensor<f32, batch: 2, model: 3>) -> !psk_realize.tensor<f32, batch: 2>
    %7 = psk_realize.dot %5, %1 {site = "f/%5"} : (!psk_realize.tensor<f32, batch: 2, model: 3>, !psk_realize.tensor<f32, 3, 2>) -> !psk_realize.tensor<f32, batch: 2, 2>
    %8 = psk_realize.add %7, %6 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 0>, site = "f/%6"} : (!psk_realize.tensor<f32, batch: 2, 2>, !psk_realize.tensor<f32, batch: 2>) -> !psk_realize.tensor<f32, batch: 2, 2>
    psk_realize.return %8 {site = "f/%7"} : !psk_realize.tensor<f32, batch: 2, 2>
  }
}

// CHECK: builtin.module {
// CHECK-NEXT: psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, batch: 2, model: 3>, %1: !psk_kernel.buffer<bf16, 3>, %2: !psk_kernel.buffer<f32, batch: 2, model: 3>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "mul"} {
// CHECK-NEXT: psk_kernel.for %3 = 0 to 2 {
// CHECK-NEXT: psk_kernel.for %4 = 0 to 3 {
// CHECK-NEXT: %5 = psk_kernel.load %0[%3, %4] : !psk_kernel.buffer<f32, batch: 2, model: 3> -> f32
// CHECK-NEXT: %6 = psk_kernel.load %1[%4] : !psk_kernel.buffer<bf16, 3> -> f32
// CHECK-NEXT: %7 = psk_kernel.mul %5, %6 : f32
// CHECK-NEXT: psk_kernel.store %7, %2[%3, %4] : !psk_kernel.buffer<f32, batch: 2, model: 3>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, batch: 2, model: 3>, %1: !psk_kernel.buffer<f32, batch: 2>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum axis model"} {
// CHECK-NEXT: psk_kernel.for %2 = 0 to 2 {
// CHECK-NEXT: %3 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
// CHECK-NEXT: %4 = psk_kernel.for %5 = 0 to 3 iter(%6 = %3) -> (f32) attributes {partials = 4 : i64} {
// CHECK-NEXT: %7 = psk_kernel.load %0[%2, %5] : !psk_kernel.buffer<f32, batch: 2, model: 3> -> f32
// CHECK-NEXT: %8 = psk_kernel.add %6, %7 : f32
// CHECK-NEXT: psk_kernel.yield %8 : f32
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f32, batch: 2>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k2(%0: !psk_kernel.buffer<f32, batch: 2, model: 3>, %1: !psk_kernel.buffer<f32, 3, 2>, %2: !psk_kernel.buffer<f32, batch: 2>, %3: !psk_kernel.buffer<f32, batch: 2, 2>) attributes {layout = #psk_kernel.layout<tiled, tile = [2, 2], lanes = 2, order = "IJ">, outputs = 1 : i64, title = "dot+add"} {
// CHECK-NEXT: psk_kernel.for %4 = 0 to 2 {
// CHECK-NEXT: psk_kernel.for %5 = 0 to 2 {
// CHECK-NEXT: %6 = psk_kernel.constant {value = 0.000000e+00 : f64} : f32
// CHECK-NEXT: %7 = psk_kernel.for %8 = 0 to 3 iter(%9 = %6) -> (f32) {
// CHECK-NEXT: %10 = psk_kernel.load %0[%4, %8] : !psk_kernel.buffer<f32, batch: 2, model: 3> -> f32
// CHECK-NEXT: %11 = psk_kernel.load %1[%8, %5] : !psk_kernel.buffer<f32, 3, 2> -> f32
// CHECK-NEXT: %12 = psk_kernel.mul %10, %11 : f32
// CHECK-NEXT: %13 = psk_kernel.add %9, %12 : f32
// CHECK-NEXT: psk_kernel.yield %13 : f32
// CHECK-NEXT: }
// CHECK-NEXT: %14 = psk_kernel.load %2[%4] : !psk_kernel.buffer<f32, batch: 2> -> f32
// CHECK-NEXT: %15 = psk_kernel.add %7, %14 : f32
// CHECK-NEXT: psk_kernel.store %15, %3[%4, %5] : !psk_kernel.buffer<f32, batch: 2, 2>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.host @f(%0: !psk_kernel.buffer<bf16, 3>, %1: !psk_kernel.buffer<f32, 3, 2>, %2: !psk_kernel.buffer<f64, batch: 2, model: 3>, %3: !psk_kernel.buffer<f32, batch: 2, 2>) attributes {arg_names = ["θ.g", "θ.w", "x", "out"], entry, function = "f", outputs = 1 : i64} {
// CHECK-NEXT: %4 = psk_kernel.mark
// CHECK-NEXT: %5 = psk_kernel.alloc {site = "f/%3"} : !psk_kernel.buffer<f32, batch: 2, model: 3>
// CHECK-NEXT: psk_kernel.convert %2 to %5 {site = "f/%3"} : !psk_kernel.buffer<f64, batch: 2, model: 3> -> !psk_kernel.buffer<f32, batch: 2, model: 3>
// CHECK-NEXT: %6 = psk_kernel.alloc {site = "f/%3"} : !psk_kernel.buffer<f32, batch: 2, model: 3>
// CHECK-NEXT: psk_kernel.launch @k0(%5, %0, %6) {site = "f/%3", sites = ["f/%3"]} : (!psk_kernel.buffer<f32, batch: 2, model: 3>, !psk_kernel.buffer<bf16, 3>, !psk_kernel.buffer<f32, batch: 2, model: 3>)
// CHECK-NEXT: %7 = psk_kernel.alloc {name = "s", site = "f/%4"} : !psk_kernel.buffer<f32, batch: 2>
// CHECK-NEXT: psk_kernel.launch @k1(%6, %7) {name = "s", site = "f/%4", sites = ["f/%4"]} : (!psk_kernel.buffer<f32, batch: 2, model: 3>, !psk_kernel.buffer<f32, batch: 2>)
// CHECK-NEXT: psk_kernel.launch @k2(%6, %1, %7, %3) {site = "f/%6", sites = ["f/%5", "f/%6"]} : (!psk_kernel.buffer<f32, batch: 2, model: 3>, !psk_kernel.buffer<f32, 3, 2>, !psk_kernel.buffer<f32, batch: 2>, !psk_kernel.buffer<f32, batch: 2, 2>)
// CHECK-NEXT: psk_kernel.release %4
// CHECK-NEXT: }
// CHECK-NEXT: }
