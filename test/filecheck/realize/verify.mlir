// The verifiers of psk_realize: a group holds element-wise ops over one shape, shapes agree
// with the broadcast maps, element types agree, and no arithmetic is done in bf16. Each
// error names the op's site.
// RUN: presk-opt %s --verify-diagnostics --split-input-file | filecheck %s

psk_realize.func @f(%x: !psk_realize.tensor<f32, batch: 4, model: 4>) -> !psk_realize.tensor<f32, batch: 4> attributes {arg_names = ["x"], source = "f", entry} {
  %0 = psk_realize.group %x {site = "f/%2"} : (!psk_realize.tensor<f32, batch: 4, model: 4>) -> !psk_realize.tensor<f32, batch: 4> {
  ^bb0(%a: !psk_realize.tensor<f32, batch: 4, model: 4>):
    %1 = psk_realize.mean %a {axis = 1 : i64, axis_name = "model", site = "f/%2"} : (!psk_realize.tensor<f32, batch: 4, model: 4>) -> !psk_realize.tensor<f32, batch: 4>
    psk_realize.yield %1 : !psk_realize.tensor<f32, batch: 4>
  }
  psk_realize.return %0 {site = "f/%3"} : !psk_realize.tensor<f32, batch: 4>
}
// CHECK: f/%2: psk_realize.group: f/%2 psk_realize.mean is not element-wise: a group holds element-wise operations only

// -----

psk_realize.func @f(%x: !psk_realize.tensor<f32, batch: 4, model: 4>, %m: !psk_realize.tensor<f32, batch: 4>) -> !psk_realize.tensor<f32, batch: 4, model: 4> attributes {arg_names = ["x", "m"], source = "f", entry} {
  %0 = psk_realize.group %x, %m {site = "f/%4"} : (!psk_realize.tensor<f32, batch: 4, model: 4>, !psk_realize.tensor<f32, batch: 4>) -> !psk_realize.tensor<f32, batch: 4, model: 4> {
  ^bb0(%a: !psk_realize.tensor<f32, batch: 4, model: 4>, %b: !psk_realize.tensor<f32, batch: 4>):
    %1 = psk_realize.sqrt %b {site = "f/%3"} : !psk_realize.tensor<f32, batch: 4>
    %2 = psk_realize.div %a, %1 {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 0>, site = "f/%4"} : (!psk_realize.tensor<f32, batch: 4, model: 4>, !psk_realize.tensor<f32, batch: 4>) -> !psk_realize.tensor<f32, batch: 4, model: 4>
    psk_realize.yield %2 : !psk_realize.tensor<f32, batch: 4, model: 4>
  }
  psk_realize.return %0 {site = "f/%5"} : !psk_realize.tensor<f32, batch: 4, model: 4>
}
// CHECK: f/%4: psk_realize.group: f/%3 psk_realize.sqrt makes f32[batch: 4], the group's shape is [4, 4]: a group is one loop nest over one shape

// -----

psk_realize.func @f(%x: !psk_realize.tensor<f32, batch: 4, model: 4>, %g: !psk_realize.tensor<f32, 3>) -> !psk_realize.tensor<f32, batch: 4, model: 4> attributes {arg_names = ["x", "θ.γ"], source = "f", entry} {
  %0 = psk_realize.mul %x, %g {lhs_map = array<i64: 0, 1>, rhs_map = array<i64: 1>, site = "f/%3"} : (!psk_realize.tensor<f32, batch: 4, model: 4>, !psk_realize.tensor<f32, 3>) -> !psk_realize.tensor<f32, batch: 4, model: 4>
  psk_realize.return %0 {site = "f/%4"} : !psk_realize.tensor<f32, batch: 4, model: 4>
}
// CHECK: f/%3: psk_realize.mul: shape mismatch: axis 0 of the rhs f32[3] has size 3, the result's axis 1 of f32[batch: 4, model: 4] 4

// -----

psk_realize.func @f(%x: !psk_realize.tensor<f32, batch: 4, model: 4>) -> !psk_realize.tensor<f32, batch: 4> attributes {arg_names = ["x"], source = "f", entry} {
  %0 = psk_realize.sum %x {axis = 1 : i64, site = "f/%2"} : (!psk_realize.tensor<f32, batch: 4, model: 4>) -> !psk_realize.tensor<f32, batch: 3>
  psk_realize.return %0 {site = "f/%3"} : !psk_realize.tensor<f32, batch: 3>
}
// CHECK: f/%2: psk_realize.sum: shape mismatch: reducing f32[batch: 4, model: 4] over axis 1 makes [4], not f32[batch: 3]

// -----

psk_realize.func @f(%x: !psk_realize.tensor<bf16, 4>, %y: !psk_realize.tensor<bf16, 4>) -> !psk_realize.tensor<bf16, 4> attributes {arg_names = ["x", "y"], source = "f", entry} {
  %0 = psk_realize.add %x, %y {lhs_map = array<i64: 0>, rhs_map = array<i64: 0>, site = "f/%2"} : (!psk_realize.tensor<bf16, 4>, !psk_realize.tensor<bf16, 4>) -> !psk_realize.tensor<bf16, 4>
  psk_realize.return %0 {site = "f/%3"} : !psk_realize.tensor<bf16, 4>
}
// CHECK: f/%2: psk_realize.add: an arithmetic op in bf16: bf16 is a storage type, compute in f32 and convert

// -----

psk_realize.func @f(%x: !psk_realize.tensor<f64, 4>, %y: !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, 4> attributes {arg_names = ["x", "y"], source = "f", entry} {
  %0 = psk_realize.add %x, %y {lhs_map = array<i64: 0>, rhs_map = array<i64: 0>, site = "f/%2"} : (!psk_realize.tensor<f64, 4>, !psk_realize.tensor<f32, 4>) -> !psk_realize.tensor<f32, 4>
  psk_realize.return %0 {site = "f/%3"} : !psk_realize.tensor<f32, 4>
}
// CHECK: f/%2: psk_realize.add: operand 0 is f64[4], the result f32[4]: element types differ (a conversion is an explicit psk_realize.convert)

// -----

psk_realize.func @f(%x: !psk_realize.tensor<f32, batch: N>) -> !psk_realize.tensor<f32, batch: N> attributes {arg_names = ["x"], source = "f", entry} {
  psk_realize.return %x {site = "f/%1"} : !psk_realize.tensor<f32, batch: N>
}
// CHECK: a psk_realize tensor has integer sizes, not `N`
