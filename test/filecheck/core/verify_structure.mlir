// The verifiers of scalars, tuples, parameter trees, calls, folds, functions and
// module declarations: each error names the op's site (a declaration's name).
// RUN: presk-opt %s --verify-diagnostics --split-input-file | filecheck %s

psk_core.func @f(%h : f64) -> !psk_core.tensor<4> attributes {arg_names = ["h"]} {
  %0 = psk_core.real %h {site = "f/%1"} : (f64) -> !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%1: psk_core.real: the result ℝ[4] is not ℝ[]

// -----

psk_core.func @f() -> !psk_core.tensor<...> attributes {arg_names = []} {
  %0 = psk_core.constant {site = "f/%0", value = 1.0 : f64} : !psk_core.tensor<...>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<...>
}
// CHECK: f/%0: psk_core.constant: a constant is f64, nat or ℝ[], not ℝ[...]

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> tuple<!psk_core.tensor<4>> attributes {arg_names = ["x"]} {
  %0 = psk_core.tuple %x, %x {site = "f/%1"} : (!psk_core.tensor<4>, !psk_core.tensor<4>) -> tuple<!psk_core.tensor<4>>
  psk_core.return %0 {site = "f/return"} : tuple<!psk_core.tensor<4>>
}
// CHECK: f/%1: psk_core.tuple: the result (ℝ[4]) is not the tuple of the operands' types

// -----

psk_core.func @f(%t : tuple<!psk_core.tensor<4>, f64>) -> f64 attributes {arg_names = ["t"]} {
  %0 = psk_core.get %t {index = 2, site = "f/%1"} : (tuple<!psk_core.tensor<4>, f64>) -> f64
  psk_core.return %0 {site = "f/return"} : f64
}
// CHECK: f/%1: psk_core.get: index 2 is outside (ℝ[4], f64)

// -----

psk_core.func @f(%t : tuple<!psk_core.tensor<4>, f64>) -> f64 attributes {arg_names = ["t"]} {
  %0 = psk_core.get %t {index = 0, site = "f/%1"} : (tuple<!psk_core.tensor<4>, f64>) -> f64
  psk_core.return %0 {site = "f/return"} : f64
}
// CHECK: f/%1: psk_core.get: element 0 of (ℝ[4], f64) is ℝ[4], not f64

// -----

psk_core.module @Lin attributes {dims = ["I", "O"]} {
  psk_core.param "w" : !psk_core.tensor<I, O>
}
psk_core.func @f(%p : !psk_core.params<Lin{2, 3}>) -> !psk_core.tensor<2, 3> attributes {arg_names = ["θ"]} {
  %0 = psk_core.field %p {field = "b", site = "f/%1"} : (!psk_core.params<Lin{2, 3}>) -> !psk_core.tensor<2, 3>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<2, 3>
}
// CHECK: f/%1: psk_core.field: module Lin has no field `b`

// -----

psk_core.module @Lin attributes {dims = ["I", "O"]} {
  psk_core.param "w" : !psk_core.tensor<I, O>
}
psk_core.func @f(%p : !psk_core.params<Lin{2, 3}>) -> !psk_core.tensor<3, 2> attributes {arg_names = ["θ"]} {
  %0 = psk_core.field %p {field = "w", name = "w", site = "f/%1"} : (!psk_core.params<Lin{2, 3}>) -> !psk_core.tensor<3, 2>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<3, 2>
}
// CHECK: f/%1: psk_core.field: field `w` of params Lin{2, 3} is ℝ[2, 3], not ℝ[3, 2]

// -----

psk_core.module @Lin attributes {dims = ["I", "O"]} {
  psk_core.param "w" : !psk_core.tensor<I, O>
}
psk_core.func @f(%p : !psk_core.params<stack{3}(Lin{2, 3})>) -> !psk_core.tensor<2, 3> attributes {arg_names = ["θ"]} {
  %0 = psk_core.field %p {field = "w", site = "f/%1"} : (!psk_core.params<stack{3}(Lin{2, 3})>) -> !psk_core.tensor<2, 3>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<2, 3>
}
// CHECK: f/%1: psk_core.field: field `w` of params stack{3}(Lin{2, 3}) is ℝ[3, 2, 3], not ℝ[2, 3]

// -----

psk_core.func @f(%p : !psk_core.params<Missing>) -> !psk_core.tensor<> attributes {arg_names = ["θ"]} {
  %0 = psk_core.field %p {field = "w", site = "f/%1"} : (!psk_core.params<Missing>) -> !psk_core.tensor<>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<>
}
// CHECK: f/%1: psk_core.field: no psk_core.module @Missing is declared

// -----

psk_core.module @Lin attributes {dims = ["I", "O"]} {
  psk_core.param "w" : !psk_core.tensor<I, O>
}
psk_core.func @f(%p : !psk_core.params<Lin{2}>) -> !psk_core.tensor<> attributes {arg_names = ["θ"]} {
  %0 = psk_core.field %p {field = "w", site = "f/%1"} : (!psk_core.params<Lin{2}>) -> !psk_core.tensor<>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<>
}
// CHECK: f/%1: psk_core.field: params Lin{2} gives 1 dims to module Lin, which has 2

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x"]} {
  %0 = psk_core.call @g(%x) {site = "f/%1"} : (!psk_core.tensor<4>) -> !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%1: psk_core.call: no psk_core.func @g is defined

// -----

psk_core.func @g(%x : !psk_core.tensor<..., model: D>, %e : f64) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["x", "eps"], dims = ["D"]} {
  psk_core.return %x {site = "g/return"} : !psk_core.tensor<..., model: D>
}
psk_core.func @f(%x : !psk_core.tensor<model: 4>) -> !psk_core.tensor<model: 4> attributes {arg_names = ["x"]} {
  %0 = psk_core.call @g(%x) {dims = {D = 4}, site = "f/%1"} : (!psk_core.tensor<model: 4>) -> !psk_core.tensor<model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<model: 4>
}
// CHECK: f/%1: psk_core.call: @g takes 2 arguments, given 1

// -----

psk_core.func @g(%x : !psk_core.tensor<..., model: D>) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["x"], dims = ["D"]} {
  psk_core.return %x {site = "g/return"} : !psk_core.tensor<..., model: D>
}
psk_core.func @f(%x : !psk_core.tensor<model: 4>) -> !psk_core.tensor<model: 4> attributes {arg_names = ["x"]} {
  %0 = psk_core.call @g(%x) {site = "f/%1"} : (!psk_core.tensor<model: 4>) -> !psk_core.tensor<model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<model: 4>
}
// CHECK: f/%1: psk_core.call: @g takes dims ['D'], given []

// -----

psk_core.func @g(%x : !psk_core.tensor<..., model: D>) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["x"], dims = ["D"]} {
  psk_core.return %x {site = "g/return"} : !psk_core.tensor<..., model: D>
}
psk_core.func @f(%x : !psk_core.tensor<batch: 2, model: 4>) -> !psk_core.tensor<batch: 2, model: 4> attributes {arg_names = ["x"]} {
  %0 = psk_core.call @g(%x) {dims = {D = 8}, site = "f/%1"} : (!psk_core.tensor<batch: 2, model: 4>) -> !psk_core.tensor<batch: 2, model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<batch: 2, model: 4>
}
// CHECK: f/%1: psk_core.call: argument `x` of @g: axis size 4 of ℝ[batch: 2, model: 4] does not fit 8 of ℝ[..., model: D]

// -----

psk_core.func @g(%x : !psk_core.tensor<..., model: D>) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["x"], dims = ["D"]} {
  psk_core.return %x {site = "g/return"} : !psk_core.tensor<..., model: D>
}
psk_core.func @f(%x : !psk_core.tensor<batch: 2, model: 4>) -> !psk_core.tensor<model: 4> attributes {arg_names = ["x"]} {
  %0 = psk_core.call @g(%x) {dims = {D = 4}, site = "f/%1"} : (!psk_core.tensor<batch: 2, model: 4>) -> !psk_core.tensor<model: 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<model: 4>
}
// CHECK: f/%1: psk_core.call: @g returns ℝ[batch: 2, model: 4] here, not ℝ[model: 4]

// -----

psk_core.func @g(%x : !psk_core.tensor<..., D>, %y : !psk_core.tensor<..., D>) -> !psk_core.tensor<..., D> attributes {arg_names = ["x", "y"], dims = ["D"]} {
  psk_core.return %x {site = "g/return"} : !psk_core.tensor<..., D>
}
psk_core.func @f(%x : !psk_core.tensor<2, 4>, %y : !psk_core.tensor<3, 4>) -> !psk_core.tensor<2, 4> attributes {arg_names = ["x", "y"]} {
  %0 = psk_core.call @g(%x, %y) {dims = {D = 4}, site = "f/%2"} : (!psk_core.tensor<2, 4>, !psk_core.tensor<3, 4>) -> !psk_core.tensor<2, 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<2, 4>
}
// CHECK: f/%2: psk_core.call: argument `y` of @g: `...` stands for ℝ[2] and for ℝ[3] at once

// -----

psk_core.module @B {
  psk_core.param "w" : !psk_core.tensor<4>
}
psk_core.func @B.apply(%p : !psk_core.params<B>, %x : !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., 4> attributes {arg_names = ["θ", "x"]} {
  psk_core.return %x {site = "B.apply/return"} : !psk_core.tensor<..., 4>
}
psk_core.func @f(%p : !psk_core.params<stack{3}(B)>, %x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["θ", "x"]} {
  %0 = psk_core.fold @B.apply(%p, %x) {count = 2, site = "f/%2"} : (!psk_core.params<stack{3}(B)>, !psk_core.tensor<4>) -> !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%2: psk_core.fold: count 2 is not the stack count of params stack{3}(B)

// -----

psk_core.module @B {
  psk_core.param "w" : !psk_core.tensor<4>
}
psk_core.func @B.apply(%p : !psk_core.params<B>, %x : !psk_core.tensor<..., 4>) -> !psk_core.tensor<4> attributes {arg_names = ["θ", "x"]} {
  %0 = psk_core.field %p {field = "w", site = "B.apply/%2"} : (!psk_core.params<B>) -> !psk_core.tensor<4>
  psk_core.return %0 {site = "B.apply/return"} : !psk_core.tensor<4>
}
psk_core.func @f(%p : !psk_core.params<stack{3}(B)>, %x : !psk_core.tensor<2, 4>) -> !psk_core.tensor<2, 4> attributes {arg_names = ["θ", "x"]} {
  %0 = psk_core.fold @B.apply(%p, %x) {count = 3, site = "f/%2"} : (!psk_core.params<stack{3}(B)>, !psk_core.tensor<2, 4>) -> !psk_core.tensor<2, 4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<2, 4>
}
// CHECK: f/%2: psk_core.fold: @B.apply returns ℝ[4], not the accumulator's type ℝ[2, 4]

// -----

psk_core.module @B {
  psk_core.param "w" : !psk_core.tensor<4>
}
psk_core.func @B.apply(%p : !psk_core.params<B>, %x : !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., 4> attributes {arg_names = ["θ", "x"]} {
  psk_core.return %x {site = "B.apply/return"} : !psk_core.tensor<..., 4>
}
psk_core.func @f(%p : !psk_core.params<B>, %x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["θ", "x"]} {
  %0 = psk_core.fold @B.apply(%p, %x) {count = 3, site = "f/%2"} : (!psk_core.params<B>, !psk_core.tensor<4>) -> !psk_core.tensor<4>
  psk_core.return %0 {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/%2: psk_core.fold: a fold runs over a stacked params type, not params B

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<..., 4> attributes {arg_names = ["x"]} {
  %0 = psk_core.neg %x {site = "f/%1"} : !psk_core.tensor<4>
  psk_core.return %x {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f/return: psk_core.return: ℝ[4] does not conform to the result ℝ[..., 4] of f

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x", "y"]} {
  psk_core.return %x {site = "f/return"} : !psk_core.tensor<4>
}
// CHECK: f: psk_core.func: arg_names ['x', 'y'] do not name 1 arguments

// -----

psk_core.func @f(%x : !psk_core.tensor<N>) -> !psk_core.tensor<N> attributes {arg_names = ["x"]} {
  psk_core.return %x {site = "f/return"} : !psk_core.tensor<N>
}
// CHECK: f: psk_core.func: ℝ[N] uses ['N'], which are not among the dims []

// -----

psk_core.func @f(%x : !psk_core.tensor<4>) -> !psk_core.tensor<4> attributes {arg_names = ["x"]} {
  %0 = psk_core.neg %x {site = "f/%1"} : !psk_core.tensor<4>
}
// CHECK: f/%1: psk_core.neg: Operation psk_core.neg terminates block in single-block region but is not a terminator

// -----

psk_core.module @M attributes {dims = ["D"]} {
  psk_core.param "w" : !psk_core.tensor<D>
  psk_core.use "w" : !psk_core.params<M{4}>
}
// CHECK: M: psk_core.module: a field repeats in ['w', 'w']

// -----

psk_core.module @M attributes {dims = ["D"]} {
  psk_core.param "w" : !psk_core.tensor<..., E>
}
// CHECK: M.w: psk_core.param: a parameter is a tensor without `...`, not ℝ[..., E]

// -----

psk_core.module @M {
  psk_core.param "γ" : !psk_core.tensor<E>
}
// CHECK: M: psk_core.module: field `γ` uses ['E'], not dims of the module
