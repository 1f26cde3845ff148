// Malformed psk_core types are parse errors that say what was expected.
// RUN: presk-opt %s --parsing-diagnostics --split-input-file | filecheck %s

"test.op"() : () -> !psk_core.tensor<model: D, ...>
// CHECK: Expected an axis: `...`, a size, or `name: size`

// -----

"test.op"() : () -> !psk_core.tensor<model: >
// CHECK: Expected a size: an integer or a dim symbol

// -----

"test.op"() : () -> !psk_core.tensor<... 4>
// CHECK: Expected '>' to close a tensor type (`...` comes first)

// -----

"test.op"() : () -> !psk_core.params<>
// CHECK: Expected a module name or `stack{n}(…)`

// -----

"test.op"() : () -> !psk_core.tensor<model: 2, model: 3>
// CHECK: an axis name repeats in the tensor type
