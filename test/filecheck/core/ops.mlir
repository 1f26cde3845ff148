// Every op and type of psk_core reads, verifies and prints back as it was written.
// RUN: presk-opt %s | presk-opt | filecheck %s

builtin.module {
  psk_core.module @Lin attributes {dims = ["I", "O"]} {
    psk_core.param "w" {init = "xavier_uniform"} : !psk_core.tensor<I, O>
  }
  psk_core.module @Net {
    psk_core.use "layers" : !psk_core.params<stack{2}(Lin{4, 4})>
    psk_core.param "scale" : !psk_core.tensor<"γ": 4>
  }
  psk_core.module @Deep attributes {dims = ["L"]} {
    psk_core.use "nets" : !psk_core.params<stack{L}(Net)>
  }
  psk_core.module @Empty {
  }

  psk_core.func @Lin.apply(%p : !psk_core.params<Lin{I, O}>, %x : !psk_core.tensor<..., I>) -> !psk_core.tensor<..., O> attributes {arg_names = ["θ", "x"], dims = ["I", "O"]} {
    %w = psk_core.field %p {field = "w", name = "w", site = "Lin.apply/%2"} : (!psk_core.params<Lin{I, O}>) -> !psk_core.tensor<I, O>
    %y = psk_core.dot %x, %w {site = "Lin.apply/%3"} : (!psk_core.tensor<..., I>, !psk_core.tensor<I, O>) -> !psk_core.tensor<..., O>
    psk_core.return %y {site = "Lin.apply/return"} : !psk_core.tensor<..., O>
  }

  psk_core.func @Net.apply(%p : !psk_core.params<Net>, %x : !psk_core.tensor<..., "γ": 4>) -> !psk_core.tensor<..., "γ": 4> attributes {arg_names = ["θ", "x"]} {
    %layers = psk_core.field %p {field = "layers", name = "layers", site = "Net.apply/%2"} : (!psk_core.params<Net>) -> !psk_core.params<stack{2}(Lin{4, 4})>
    %h = psk_core.fold @Lin.apply(%layers, %x) {count = 2, dims = {I = 4, O = 4}, site = "Net.apply/%3"} : (!psk_core.params<stack{2}(Lin{4, 4})>, !psk_core.tensor<..., "γ": 4>) -> !psk_core.tensor<..., "γ": 4>
    %s = psk_core.field %p {field = "scale", site = "Net.apply/%4"} : (!psk_core.params<Net>) -> !psk_core.tensor<"γ": 4>
    %r = psk_core.mul %h, %s {site = "Net.apply/%5"} : (!psk_core.tensor<..., "γ": 4>, !psk_core.tensor<"γ": 4>) -> !psk_core.tensor<..., "γ": 4>
    psk_core.return %r {site = "Net.apply/return"} : !psk_core.tensor<..., "γ": 4>
  }

  psk_core.func @Deep.apply(%p : !psk_core.params<Deep{L}>, %x : !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., 4> attributes {arg_names = ["θ", "x"], dims = ["L"]} {
    %nets = psk_core.field %p {field = "nets", name = "nets", site = "Deep.apply/%2"} : (!psk_core.params<Deep{L}>) -> !psk_core.params<stack{L}(Net)>
    %y = psk_core.fold @Net.apply(%nets, %x) {count = "L", site = "Deep.apply/%3"} : (!psk_core.params<stack{L}(Net)>, !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., 4>
    psk_core.return %y {site = "Deep.apply/return"} : !psk_core.tensor<..., 4>
  }

  psk_core.func @stacked(%p : !psk_core.params<stack{3}(Net)>) -> !psk_core.tensor<3, 2, 4, 4> attributes {arg_names = ["θ"]} {
    %s = psk_core.field %p {field = "scale", site = "stacked/%1"} : (!psk_core.params<stack{3}(Net)>) -> !psk_core.tensor<3, "γ": 4>
    %l = psk_core.field %p {field = "layers", site = "stacked/%2"} : (!psk_core.params<stack{3}(Net)>) -> !psk_core.params<stack{3}(stack{2}(Lin{4, 4}))>
    %w = psk_core.field %l {field = "w", site = "stacked/%3"} : (!psk_core.params<stack{3}(stack{2}(Lin{4, 4}))>) -> !psk_core.tensor<3, 2, 4, 4>
    psk_core.return %w {site = "stacked/return"} : !psk_core.tensor<3, 2, 4, 4>
  }

  psk_core.func @elementwise(%x : !psk_core.tensor<..., "γ": D>, %y : !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D> attributes {arg_names = ["x", "y"], dims = ["D"]} {
    %0 = psk_core.neg %x {site = "elementwise/%2"} : !psk_core.tensor<..., "γ": D>
    %1 = psk_core.sqrt %0 {site = "elementwise/%3"} : !psk_core.tensor<..., "γ": D>
    %2 = psk_core.exp %1 {site = "elementwise/%4"} : !psk_core.tensor<..., "γ": D>
    %3 = psk_core.log %2 {site = "elementwise/%5"} : !psk_core.tensor<..., "γ": D>
    %4 = psk_core.tanh %3 {site = "elementwise/%6"} : !psk_core.tensor<..., "γ": D>
    %5 = psk_core.sigmoid %4 {site = "elementwise/%7"} : !psk_core.tensor<..., "γ": D>
    %6 = psk_core.relu %5 {site = "elementwise/%8"} : !psk_core.tensor<..., "γ": D>
    %7 = psk_core.gelu %6 {site = "elementwise/%9"} : !psk_core.tensor<..., "γ": D>
    %8 = psk_core.softplus %7 {site = "elementwise/%10"} : !psk_core.tensor<..., "γ": D>
    %9 = psk_core.abs %8 {site = "elementwise/%11"} : !psk_core.tensor<..., "γ": D>
    %10 = psk_core.sin %9 {site = "elementwise/%12"} : !psk_core.tensor<..., "γ": D>
    %11 = psk_core.cos %10 {name = "c", site = "elementwise/%13"} : !psk_core.tensor<..., "γ": D>
    %12 = psk_core.add %11, %y {site = "elementwise/%14"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
    %13 = psk_core.sub %y, %12 {site = "elementwise/%15"} : (!psk_core.tensor<D>, !psk_core.tensor<..., "γ": D>) -> !psk_core.tensor<..., "γ": D>
    %14 = psk_core.mul %13, %13 {site = "elementwise/%16"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<..., "γ": D>) -> !psk_core.tensor<..., "γ": D>
    %15 = psk_core.div %14, %y {site = "elementwise/%17"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
    %16 = psk_core.minimum %15, %y {site = "elementwise/%18"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
    %17 = psk_core.maximum %16, %y {site = "elementwise/%19"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
    %18 = psk_core.pow %17, %y {site = "elementwise/%20"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
    %19 = psk_core.powi %18 {n = 3, site = "elementwise/%21"} : !psk_core.tensor<..., "γ": D>
    psk_core.return %19 {site = "elementwise/return"} : !psk_core.tensor<..., "γ": D>
  }

  psk_core.func @reductions(%x : !psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<> attributes {arg_names = ["x"], dims = ["B", "D"]} {
    %0 = psk_core.softmax %x {axis = "model", site = "reductions/%1"} : !psk_core.tensor<batch: B, model: D>
    %1 = psk_core.logsumexp %0 {axis = "model", site = "reductions/%2"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<batch: B>
    %2 = psk_core.max %0 {axis = "batch", site = "reductions/%3"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<model: D>
    %3 = psk_core.min %2 {site = "reductions/%4"} : (!psk_core.tensor<model: D>) -> !psk_core.tensor<>
    %4 = psk_core.sum %1 {site = "reductions/%5"} : (!psk_core.tensor<batch: B>) -> !psk_core.tensor<>
    %5 = psk_core.mean %4 {site = "reductions/%6"} : !psk_core.tensor<>
    %6 = psk_core.add %5, %3 {site = "reductions/%7"} : (!psk_core.tensor<>, !psk_core.tensor<>) -> !psk_core.tensor<>
    psk_core.return %6 {site = "reductions/return"} : !psk_core.tensor<>
  }

  psk_core.func @misc(%p : !psk_core.params<Lin{D, D}>, %x : !psk_core.tensor<batch: 2, D>, %h : f64, %k : i64) -> tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>> attributes {arg_names = ["θ", "x", "h", "k"], dims = ["D"]} {
    %0 = psk_core.call @Lin.apply(%p, %x) {dims = {I = "D", O = "D"}, site = "misc/%4"} : (!psk_core.params<Lin{D, D}>, !psk_core.tensor<batch: 2, D>) -> !psk_core.tensor<batch: 2, D>
    %1 = psk_core.real %h {site = "misc/%5"} : (f64) -> !psk_core.tensor<>
    %2 = psk_core.constant {site = "misc/%6", value = 2.5 : f64} : !psk_core.tensor<>
    %3 = psk_core.constant {site = "misc/%7", value = 0.1 : f64} : f64
    %4 = psk_core.broadcast %1 {site = "misc/%8"} : (!psk_core.tensor<>) -> !psk_core.tensor<...>
    %5 = psk_core.broadcast %2 {site = "misc/%9"} : (!psk_core.tensor<>) -> !psk_core.tensor<batch: 2, D>
    %6 = psk_core.tuple %0, %4 {name = "pair", site = "misc/%10"} : (!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>) -> tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>>
    %7 = psk_core.get %6 {index = 1, site = "misc/%11"} : (tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>>) -> !psk_core.tensor<...>
    psk_core.return %6 {site = "misc/return"} : tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>>
  }
}

// The whole printed module, line for line:
// CHECK:      builtin.module {
// CHECK-NEXT:   psk_core.module @Lin attributes {dims = ["I", "O"]} {
// CHECK-NEXT:     psk_core.param "w" {init = "xavier_uniform"} : !psk_core.tensor<I, O>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.module @Net {
// CHECK-NEXT:     psk_core.use "layers" : !psk_core.params<stack{2}(Lin{4, 4})>
// CHECK-NEXT:     psk_core.param "scale" : !psk_core.tensor<"γ": 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.module @Deep attributes {dims = ["L"]} {
// CHECK-NEXT:     psk_core.use "nets" : !psk_core.params<stack{L}(Net)>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.module @Empty {
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @Lin.apply(%p: !psk_core.params<Lin{I, O}>, %x: !psk_core.tensor<..., I>) -> !psk_core.tensor<..., O> attributes {arg_names = ["θ", "x"], dims = ["I", "O"]} {
// CHECK-NEXT:     %w = psk_core.field %p {field = "w", name = "w", site = "Lin.apply/%2"} : (!psk_core.params<Lin{I, O}>) -> !psk_core.tensor<I, O>
// CHECK-NEXT:     %y = psk_core.dot %x, %w {site = "Lin.apply/%3"} : (!psk_core.tensor<..., I>, !psk_core.tensor<I, O>) -> !psk_core.tensor<..., O>
// CHECK-NEXT:     psk_core.return %y {site = "Lin.apply/return"} : !psk_core.tensor<..., O>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @Net.apply(%p: !psk_core.params<Net>, %x: !psk_core.tensor<..., "γ": 4>) -> !psk_core.tensor<..., "γ": 4> attributes {arg_names = ["θ", "x"]} {
// CHECK-NEXT:     %layers = psk_core.field %p {field = "layers", name = "layers", site = "Net.apply/%2"} : (!psk_core.params<Net>) -> !psk_core.params<stack{2}(Lin{4, 4})>
// CHECK-NEXT:     %h = psk_core.fold @Lin.apply(%layers, %x) {count = 2 : i64, dims = {I = 4 : i64, O = 4 : i64}, site = "Net.apply/%3"} : (!psk_core.params<stack{2}(Lin{4, 4})>, !psk_core.tensor<..., "γ": 4>) -> !psk_core.tensor<..., "γ": 4>
// CHECK-NEXT:     %s = psk_core.field %p {field = "scale", site = "Net.apply/%4"} : (!psk_core.params<Net>) -> !psk_core.tensor<"γ": 4>
// CHECK-NEXT:     %r = psk_core.mul %h, %s {site = "Net.apply/%5"} : (!psk_core.tensor<..., "γ": 4>, !psk_core.tensor<"γ": 4>) -> !psk_core.tensor<..., "γ": 4>
// CHECK-NEXT:     psk_core.return %r {site = "Net.apply/return"} : !psk_core.tensor<..., "γ": 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @Deep.apply(%p: !psk_core.params<Deep{L}>, %x: !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., 4> attributes {arg_names = ["θ", "x"], dims = ["L"]} {
// CHECK-NEXT:     %nets = psk_core.field %p {field = "nets", name = "nets", site = "Deep.apply/%2"} : (!psk_core.params<Deep{L}>) -> !psk_core.params<stack{L}(Net)>
// CHECK-NEXT:     %y = psk_core.fold @Net.apply(%nets, %x) {count = "L", site = "Deep.apply/%3"} : (!psk_core.params<stack{L}(Net)>, !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., 4>
// CHECK-NEXT:     psk_core.return %y {site = "Deep.apply/return"} : !psk_core.tensor<..., 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @stacked(%p: !psk_core.params<stack{3}(Net)>) -> !psk_core.tensor<3, 2, 4, 4> attributes {arg_names = ["θ"]} {
// CHECK-NEXT:     %s = psk_core.field %p {field = "scale", site = "stacked/%1"} : (!psk_core.params<stack{3}(Net)>) -> !psk_core.tensor<3, "γ": 4>
// CHECK-NEXT:     %l = psk_core.field %p {field = "layers", site = "stacked/%2"} : (!psk_core.params<stack{3}(Net)>) -> !psk_core.params<stack{3}(stack{2}(Lin{4, 4}))>
// CHECK-NEXT:     %w = psk_core.field %l {field = "w", site = "stacked/%3"} : (!psk_core.params<stack{3}(stack{2}(Lin{4, 4}))>) -> !psk_core.tensor<3, 2, 4, 4>
// CHECK-NEXT:     psk_core.return %w {site = "stacked/return"} : !psk_core.tensor<3, 2, 4, 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @elementwise(%x: !psk_core.tensor<..., "γ": D>, %y: !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D> attributes {arg_names = ["x", "y"], dims = ["D"]} {
// CHECK-NEXT:     %0 = psk_core.neg %x {site = "elementwise/%2"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %1 = psk_core.sqrt %0 {site = "elementwise/%3"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %2 = psk_core.exp %1 {site = "elementwise/%4"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %3 = psk_core.log %2 {site = "elementwise/%5"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %4 = psk_core.tanh %3 {site = "elementwise/%6"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %5 = psk_core.sigmoid %4 {site = "elementwise/%7"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %6 = psk_core.relu %5 {site = "elementwise/%8"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %7 = psk_core.gelu %6 {site = "elementwise/%9"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %8 = psk_core.softplus %7 {site = "elementwise/%10"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %9 = psk_core.abs %8 {site = "elementwise/%11"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %10 = psk_core.sin %9 {site = "elementwise/%12"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %11 = psk_core.cos %10 {name = "c", site = "elementwise/%13"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %12 = psk_core.add %11, %y {site = "elementwise/%14"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %13 = psk_core.sub %y, %12 {site = "elementwise/%15"} : (!psk_core.tensor<D>, !psk_core.tensor<..., "γ": D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %14 = psk_core.mul %13, %13 {site = "elementwise/%16"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<..., "γ": D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %15 = psk_core.div %14, %y {site = "elementwise/%17"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %16 = psk_core.minimum %15, %y {site = "elementwise/%18"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %17 = psk_core.maximum %16, %y {site = "elementwise/%19"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %18 = psk_core.pow %17, %y {site = "elementwise/%20"} : (!psk_core.tensor<..., "γ": D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     %19 = psk_core.powi %18 {n = 3 : i64, site = "elementwise/%21"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:     psk_core.return %19 {site = "elementwise/return"} : !psk_core.tensor<..., "γ": D>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @reductions(%x: !psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<> attributes {arg_names = ["x"], dims = ["B", "D"]} {
// CHECK-NEXT:     %0 = psk_core.softmax %x {axis = "model", site = "reductions/%1"} : !psk_core.tensor<batch: B, model: D>
// CHECK-NEXT:     %1 = psk_core.logsumexp %0 {axis = "model", site = "reductions/%2"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<batch: B>
// CHECK-NEXT:     %2 = psk_core.max %0 {axis = "batch", site = "reductions/%3"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<model: D>
// CHECK-NEXT:     %3 = psk_core.min %2 {site = "reductions/%4"} : (!psk_core.tensor<model: D>) -> !psk_core.tensor<>
// CHECK-NEXT:     %4 = psk_core.sum %1 {site = "reductions/%5"} : (!psk_core.tensor<batch: B>) -> !psk_core.tensor<>
// CHECK-NEXT:     %5 = psk_core.mean %4 {site = "reductions/%6"} : !psk_core.tensor<>
// CHECK-NEXT:     %6 = psk_core.add %5, %3 {site = "reductions/%7"} : (!psk_core.tensor<>, !psk_core.tensor<>) -> !psk_core.tensor<>
// CHECK-NEXT:     psk_core.return %6 {site = "reductions/return"} : !psk_core.tensor<>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @misc(%p: !psk_core.params<Lin{D, D}>, %x: !psk_core.tensor<batch: 2, D>, %h: f64, %k: i64) -> tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>> attributes {arg_names = ["θ", "x", "h", "k"], dims = ["D"]} {
// CHECK-NEXT:     %0 = psk_core.call @Lin.apply(%p, %x) {dims = {I = "D", O = "D"}, site = "misc/%4"} : (!psk_core.params<Lin{D, D}>, !psk_core.tensor<batch: 2, D>) -> !psk_core.tensor<batch: 2, D>
// CHECK-NEXT:     %1 = psk_core.real %h {site = "misc/%5"} : (f64) -> !psk_core.tensor<>
// CHECK-NEXT:     %2 = psk_core.constant {site = "misc/%6", value = 2.500000e+00 : f64} : !psk_core.tensor<>
// CHECK-NEXT:     %3 = psk_core.constant {site = "misc/%7", value = 1.000000e-01 : f64} : f64
// CHECK-NEXT:     %4 = psk_core.broadcast %1 {site = "misc/%8"} : (!psk_core.tensor<>) -> !psk_core.tensor<...>
// CHECK-NEXT:     %5 = psk_core.broadcast %2 {site = "misc/%9"} : (!psk_core.tensor<>) -> !psk_core.tensor<batch: 2, D>
// CHECK-NEXT:     %6 = psk_core.tuple %0, %4 {name = "pair", site = "misc/%10"} : (!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>) -> tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>>
// CHECK-NEXT:     %7 = psk_core.get %6 {index = 1 : i64, site = "misc/%11"} : (tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>>) -> !psk_core.tensor<...>
// CHECK-NEXT:     psk_core.return %6 {site = "misc/return"} : tuple<!psk_core.tensor<batch: 2, D>, !psk_core.tensor<...>>
// CHECK-NEXT:   }
// CHECK-NEXT: }
