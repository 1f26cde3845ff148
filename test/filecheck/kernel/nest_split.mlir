// convert-psk-realize-to-kernel's default split of nests that are not contractions: an
// element-wise nest and a row reduction of 2^15 innermost iterations get `split = [0, n]`
// (n = PRESK_THREADS, the workers), the same nests at 2^14 iterations and a sum to one
// value (its one loop carries the sum) stay whole.
// RUN: env PRESK_THREADS=2 presk-opt %s -p convert-psk-realize-to-kernel | filecheck %s
// RUN: env PRESK_THREADS=1 presk-opt %s -p convert-psk-realize-to-kernel | filecheck %s --check-prefix=ONE

builtin.module {
  psk_realize.func @f(%0: !psk_realize.tensor<f32, batch: 128, model: 256>, %1: !psk_realize.tensor<f32, batch: 64, model: 256>) -> !psk_realize.tensor<f32> attributes {arg_names = ["x", "y"], entry, source = "f"} {
    %2 = psk_realize.mul %0, %0 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 0, 1>, site = "f/%2"} : (!psk_realize.tensor<f32, batch: 128, model: 256>, !psk_realize.tensor<f32, batch: 128, model: 256>) -> !psk_realize.tensor<f32, batch: 128, model: 256>
    %3 = psk_realize.sum %2 {axis = 1 : i64, axis_name = "model", name = "s", site = "f/%3"} : (!psk_realize.tensor<f32, batch: 128, model: 256>) -> !psk_realize.tensor<f32, batch: 128>
    %4 = psk_realize.mul %1, %1 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 0, 1>, site = "f/%4"} : (!psk_realize.tensor<f32, batch: 64, model: 256>, !psk_realize.tensor<f32, batch: 64, model: 256>) -> !psk_realize.tensor<f32, batch: 64, model: 256>
    %5 = psk_realize.sum %4 {axis = 1 : i64, axis_name = "model", name = "s", site = "f/%5"} : (!psk_realize.tensor<f32, batch: 64, model: 256>) -> !psk_realize.tensor<f32, batch: 64>
    %6 = psk_realize.sum %3 {axis = 0 : i64, axis_name = "batch", name = "t", site = "f/%6"} : (!psk_realize.tensor<f32, batch: 128>) -> !psk_realize.tensor<f32>
    psk_realize.return %6 {site = "f/%7"} : !psk_realize.tensor<f32>
  }
}

// CHECK: psk_kernel.kernel @k0({{.*}}) attributes {layout = #psk_kernel.layout<default, split = [0, 2]>, outputs = 1 : i64, title = "mul"}
// CHECK: psk_kernel.kernel @k1({{.*}}) attributes {layout = #psk_kernel.layout<default, split = [0, 2]>, outputs = 1 : i64, title = "sum axis model"}
// CHECK: psk_kernel.kernel @k2({{.*}}) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "mul"}
// CHECK: psk_kernel.kernel @k3({{.*}}) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum axis model"}
// CHECK: psk_kernel.kernel @k4({{.*}}) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum axis batch"}
// ONE-NOT: split
