// The psk_core types in every form they take, printed back as written.
// RUN: presk-opt %s | presk-opt | filecheck %s

"test.op"() {axis = #psk_core.axis<model: D>, unnamed = #psk_core.axis<4>} : () -> (!psk_core.tensor<>, !psk_core.tensor<...>, !psk_core.tensor<..., 4>, !psk_core.tensor<..., model: D, 4>, !psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<"γ": D, "θ">, !psk_core.tensor<0>)
"test.op"() : () -> (!psk_core.params<Block>, !psk_core.params<Linear{In, Out}>, !psk_core.params<Linear{4, 4}>, !psk_core.params<stack{3}(Block)>, !psk_core.params<stack{L}(Linear{4, D})>, !psk_core.params<stack{2}(stack{3}(Block))>, !psk_core.params<stack>, !psk_core.params<stack{2}>, !psk_core.params<"Блок">)
"test.op"() : () -> (tuple<!psk_core.tensor<batch: B, model: 4>, f64>, f64, i64)

// CHECK:      "test.op"() {axis = #psk_core.axis<model: D>, unnamed = #psk_core.axis<4>} : () -> (!psk_core.tensor<>, !psk_core.tensor<...>, !psk_core.tensor<..., 4>, !psk_core.tensor<..., model: D, 4>, !psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<"γ": D, "θ">, !psk_core.tensor<0>)
// CHECK-NEXT: "test.op"() : () -> (!psk_core.params<Block>, !psk_core.params<Linear{In, Out}>, !psk_core.params<Linear{4, 4}>, !psk_core.params<stack{3}(Block)>, !psk_core.params<stack{L}(Linear{4, D})>, !psk_core.params<stack{2}(stack{3}(Block))>, !psk_core.params<stack>, !psk_core.params<stack{2}>, !psk_core.params<"Блок">)
// CHECK-NEXT: "test.op"() : () -> (tuple<!psk_core.tensor<batch: B, model: 4>, f64>, f64, i64)
