// The verifiers of element-wise ops, reductions, contraction and broadcast: each error
// names the op's site.
// RUN: presk-opt %s --verify-diagnostics --split-input-file | filecheck %s

psk_core.func @f(%x : !psk_core.tensor<..., model: D>, %g : !psk_core.tensor<E>) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["x", "g"], dims = ["D", "E"]} {
  %0 = psk_core.mul %x, %g {site = "f/%2"} : (!psk_core.tensor<..., model: D>, !psk_core.tensor<E>) -> !psk_core.tensor<..., model: D>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<..., model: D>
}
// CHECK: f/%2: psk_core.mul: axis sizes E and D differ in ℝ[..., model: D] and ℝ[E]

// -----

psk_core.func @f(%x : !psk_core.tensor<batch: 2, model: 4>, %y : !psk_core.tensor<model: 4, batch: 2>) -> !psk_core.tensor<batch: 2, model: 4> attributes {arg_names = ["x", "y"]} {
  %0 = psk_core.add %x, %y {site = "f/%2"} : (!psk_core.tensor<batch: 2, model: 4>, !psk_core.tensor<model: 4, batch: 2>) -> !psk_core.tensor<batch: 2, model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<batch: 2, model: 4>
}
// CHECK: f/%2: psk_core.add: the named axes of ℝ[batch: 2, model: 4] stand in another order in ℝ[model: 4, batch: 2]

// -----

psk_core.func @f(%x : !psk_core.tensor<..., 4>, %y : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x", "y"]} {
  %0 = psk_core.sub %x, %y {site = "f/%2"} : (!psk_core.tensor<..., 4>, !psk_core.tensor<4>) -> !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%2: psk_core.sub: the operands make ℝ[..., 4], not ℝ[4]

// -----

psk_core.func @f(%x : f64, %y : f64) -> f64 attributes {arg_names = ["x", "y"]} {
  %0 = psk_core.add %x, %y {site = "f/%2"} : (f64, f64) -> f64
  psk_core.return %0 {site = "f/return"} : f64
}
// CHECK: f/%2: psk_core.add: operand 'lhs' at position 0 does not verify:
// CHECK-NEXT: f64 should be of base attribute psk_core.tensor

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x"]} {
  %0 = psk_core.exp %x {site = "f/%1"} : (!psk_core.tensor<4>) -> !psk_core.tensor<model: 4>
  psk_core.return %x {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%1: psk_core.exp: the result ℝ[model: 4] is not the operand's type ℝ[4]

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x"]} {
  %0 = psk_core.powi %x {n = -1, site = "f/%1"} : !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%1: psk_core.powi: the exponent -1 is not a natural

// -----

psk_core.func @f(%x : !psk_core.tensor<..., model: D>) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["x"], dims = ["D"]} {
  %0 = psk_core.mean %x {axis = "batch", site = "f/%1"} : (!psk_core.tensor<..., model: D>) -> !psk_core.tensor<...>
  psk_core.return %x {site = "f/return"} : !psk_core.tensor<..., model: D>
}
// CHECK: f/%1: psk_core.mean: ℝ[..., model: D] has no axis `batch`

// -----

psk_core.func @f(%x : !psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B> attributes {arg_names = ["x"], dims = ["B"]} {
  %0 = psk_core.sum %x {site = "f/%1"} : (!psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<batch: B>
}
// CHECK: f/%1: psk_core.sum: reducing ℝ[batch: B, model: 4] over every axis makes ℝ[], not ℝ[batch: B]

// -----

psk_core.func @f(%x : !psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B, model: 4> attributes {arg_names = ["x"], dims = ["B"]} {
  %0 = psk_core.softmax %x {axis = "vocab", site = "f/%1"} : !psk_core.tensor<batch: B, model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<batch: B, model: 4>
}
// CHECK: f/%1: psk_core.softmax: ℝ[batch: B, model: 4] has no axis `vocab`

// -----

psk_core.func @f(%x : !psk_core.tensor<..., In>, %w : !psk_core.tensor<Out, In>) -> !psk_core.tensor<..., In> attributes {arg_names = ["x", "w"], dims = ["In", "Out"]} {
  %0 = psk_core.dot %x, %w {site = "f/%2"} : (!psk_core.tensor<..., In>, !psk_core.tensor<Out, In>) -> !psk_core.tensor<..., In>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<..., In>
}
// CHECK: f/%2: psk_core.dot: axis sizes In and Out differ in ℝ[..., In] and ℝ[Out, In]

// -----

psk_core.func @f(%x : !psk_core.tensor<batch: 2, model: 4>) -> !psk_core.tensor<model: 4> attributes {arg_names = ["x"]} {
  %0 = psk_core.broadcast %x {site = "f/%1"} : (!psk_core.tensor<batch: 2, model: 4>) -> !psk_core.tensor<model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<model: 4>
}
// CHECK: f/%1: psk_core.broadcast: ℝ[batch: 2, model: 4] does not broadcast to ℝ[model: 4]

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x"]} {
  %0 = psk_core.neg %x {site = "f/seven"} : !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/seven: psk_core.neg: site `f/seven` is not of the form <function>/%<n>

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x"]} {
  %0 = psk_core.neg %x : !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: (no site): psk_core.neg: attribute 'site' expected in operation 'psk_core.neg'
