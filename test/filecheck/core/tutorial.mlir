// The tutorial's program as PSK-Core (§3 of the reference): the five functions `loss`
// reaches and the modules they read. It verifies and prints back what it reads.
// RUN: presk-opt %s | presk-opt | filecheck %s

builtin.module {
  psk_core.module @Linear attributes {dims = ["In", "Out"]} {
    psk_core.param "w" {init = "xavier_uniform"} : !psk_core.tensor<In, Out>
    psk_core.param "b" {init = "zeros"} : !psk_core.tensor<Out>
  }
  psk_core.module @RMSNorm attributes {dims = ["D"]} {
    psk_core.param "γ" {init = "ones"} : !psk_core.tensor<D>
  }
  psk_core.module @Block {
    psk_core.use "norm" : !psk_core.params<RMSNorm{4}>
    psk_core.use "proj" : !psk_core.params<Linear{4, 4}>
  }
  psk_core.module @Tower {
    psk_core.use "blocks" : !psk_core.params<stack{3}(Block)>
    psk_core.use "final" : !psk_core.params<RMSNorm{4}>
  }

  psk_core.func @Linear.apply(%theta : !psk_core.params<Linear{In, Out}>, %x : !psk_core.tensor<..., In>) -> !psk_core.tensor<..., Out> attributes {arg_names = ["θ", "x"], dims = ["In", "Out"]} {
    %w = psk_core.field %theta {field = "w", name = "w", site = "Linear.apply/%2"} : (!psk_core.params<Linear{In, Out}>) -> !psk_core.tensor<In, Out>
    %0 = psk_core.dot %x, %w {site = "Linear.apply/%3"} : (!psk_core.tensor<..., In>, !psk_core.tensor<In, Out>) -> !psk_core.tensor<..., Out>
    %b = psk_core.field %theta {field = "b", name = "b", site = "Linear.apply/%4"} : (!psk_core.params<Linear{In, Out}>) -> !psk_core.tensor<Out>
    %1 = psk_core.add %0, %b {site = "Linear.apply/%5"} : (!psk_core.tensor<..., Out>, !psk_core.tensor<Out>) -> !psk_core.tensor<..., Out>
    psk_core.return %1 {site = "Linear.apply/return"} : !psk_core.tensor<..., Out>
  }

  psk_core.func @RMSNorm.apply(%theta : !psk_core.params<RMSNorm{D}>, %x : !psk_core.tensor<..., model: D>, %eps : f64) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["θ", "x", "eps"], dims = ["D"]} {
    %0 = psk_core.powi %x {n = 2, site = "RMSNorm.apply/%3"} : !psk_core.tensor<..., model: D>
    %ms = psk_core.mean %0 {axis = "model", name = "ms", site = "RMSNorm.apply/%4"} : (!psk_core.tensor<..., model: D>) -> !psk_core.tensor<...>
    %1 = psk_core.real %eps {site = "RMSNorm.apply/%5"} : (f64) -> !psk_core.tensor<>
    %2 = psk_core.add %ms, %1 {site = "RMSNorm.apply/%6"} : (!psk_core.tensor<...>, !psk_core.tensor<>) -> !psk_core.tensor<...>
    %3 = psk_core.sqrt %2 {site = "RMSNorm.apply/%7"} : !psk_core.tensor<...>
    %4 = psk_core.div %x, %3 {site = "RMSNorm.apply/%8"} : (!psk_core.tensor<..., model: D>, !psk_core.tensor<...>) -> !psk_core.tensor<..., model: D>
    %g = psk_core.field %theta {field = "γ", name = "γ", site = "RMSNorm.apply/%9"} : (!psk_core.params<RMSNorm{D}>) -> !psk_core.tensor<D>
    %5 = psk_core.mul %4, %g {site = "RMSNorm.apply/%10"} : (!psk_core.tensor<..., model: D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., model: D>
    psk_core.return %5 {site = "RMSNorm.apply/return"} : !psk_core.tensor<..., model: D>
  }

  psk_core.func @Block.apply(%theta : !psk_core.params<Block>, %x : !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., model: 4> attributes {arg_names = ["θ", "x"]} {
    %norm = psk_core.field %theta {field = "norm", name = "norm", site = "Block.apply/%2"} : (!psk_core.params<Block>) -> !psk_core.params<RMSNorm{4}>
    %0 = psk_core.constant {site = "Block.apply/%3", value = 1.0e-06 : f64} : f64
    %1 = psk_core.call @RMSNorm.apply(%norm, %x, %0) {dims = {D = 4}, site = "Block.apply/%4"} : (!psk_core.params<RMSNorm{4}>, !psk_core.tensor<..., model: 4>, f64) -> !psk_core.tensor<..., model: 4>
    %2 = psk_core.gelu %1 {site = "Block.apply/%5"} : !psk_core.tensor<..., model: 4>
    %proj = psk_core.field %theta {field = "proj", name = "proj", site = "Block.apply/%6"} : (!psk_core.params<Block>) -> !psk_core.params<Linear{4, 4}>
    %3 = psk_core.call @Linear.apply(%proj, %2) {dims = {In = 4, Out = 4}, site = "Block.apply/%7"} : (!psk_core.params<Linear{4, 4}>, !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., 4>
    %4 = psk_core.add %x, %3 {site = "Block.apply/%8"} : (!psk_core.tensor<..., model: 4>, !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., model: 4>
    psk_core.return %4 {site = "Block.apply/return"} : !psk_core.tensor<..., model: 4>
  }

  psk_core.func @Tower.apply(%theta : !psk_core.params<Tower>, %x : !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., model: 4> attributes {arg_names = ["θ", "x"]} {
    %blocks = psk_core.field %theta {field = "blocks", name = "blocks", site = "Tower.apply/%2"} : (!psk_core.params<Tower>) -> !psk_core.params<stack{3}(Block)>
    %0 = psk_core.fold @Block.apply(%blocks, %x) {count = 3, site = "Tower.apply/%3"} : (!psk_core.params<stack{3}(Block)>, !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., model: 4>
    %final = psk_core.field %theta {field = "final", name = "final", site = "Tower.apply/%4"} : (!psk_core.params<Tower>) -> !psk_core.params<RMSNorm{4}>
    %1 = psk_core.constant {site = "Tower.apply/%5", value = 1.0e-06 : f64} : f64
    %2 = psk_core.call @RMSNorm.apply(%final, %0, %1) {dims = {D = 4}, site = "Tower.apply/%6"} : (!psk_core.params<RMSNorm{4}>, !psk_core.tensor<..., model: 4>, f64) -> !psk_core.tensor<..., model: 4>
    psk_core.return %2 {site = "Tower.apply/return"} : !psk_core.tensor<..., model: 4>
  }

  psk_core.func @loss(%theta : !psk_core.params<Tower>, %batch : tuple<!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>>) -> !psk_core.tensor<> attributes {arg_names = ["θ", "batch"], dims = ["B"]} {
    %x = psk_core.get %batch {index = 0, name = "x", site = "loss/%2"} : (tuple<!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>>) -> !psk_core.tensor<batch: B, model: 4>
    %y = psk_core.get %batch {index = 1, name = "y", site = "loss/%3"} : (tuple<!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>>) -> !psk_core.tensor<batch: B, model: 4>
    %0 = psk_core.call @Tower.apply(%theta, %x) {site = "loss/%4"} : (!psk_core.params<Tower>, !psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B, model: 4>
    %1 = psk_core.sub %0, %y {site = "loss/%5"} : (!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B, model: 4>
    %2 = psk_core.powi %1 {n = 2, site = "loss/%6"} : !psk_core.tensor<batch: B, model: 4>
    %3 = psk_core.mean %2 {site = "loss/%7"} : (!psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<>
    psk_core.return %3 {site = "loss/return"} : !psk_core.tensor<>
  }
}

// The whole printed module, line for line:
// CHECK:      builtin.module {
// CHECK-NEXT:   psk_core.module @Linear attributes {dims = ["In", "Out"]} {
// CHECK-NEXT:     psk_core.param "w" {init = "xavier_uniform"} : !psk_core.tensor<In, Out>
// CHECK-NEXT:     psk_core.param "b" {init = "zeros"} : !psk_core.tensor<Out>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.module @RMSNorm attributes {dims = ["D"]} {
// CHECK-NEXT:     psk_core.param "γ" {init = "ones"} : !psk_core.tensor<D>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.module @Block {
// CHECK-NEXT:     psk_core.use "norm" : !psk_core.params<RMSNorm{4}>
// CHECK-NEXT:     psk_core.use "proj" : !psk_core.params<Linear{4, 4}>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.module @Tower {
// CHECK-NEXT:     psk_core.use "blocks" : !psk_core.params<stack{3}(Block)>
// CHECK-NEXT:     psk_core.use "final" : !psk_core.params<RMSNorm{4}>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @Linear.apply(%theta: !psk_core.params<Linear{In, Out}>, %x: !psk_core.tensor<..., In>) -> !psk_core.tensor<..., Out> attributes {arg_names = ["θ", "x"], dims = ["In", "Out"]} {
// CHECK-NEXT:     %w = psk_core.field %theta {field = "w", name = "w", site = "Linear.apply/%2"} : (!psk_core.params<Linear{In, Out}>) -> !psk_core.tensor<In, Out>
// CHECK-NEXT:     %0 = psk_core.dot %x, %w {site = "Linear.apply/%3"} : (!psk_core.tensor<..., In>, !psk_core.tensor<In, Out>) -> !psk_core.tensor<..., Out>
// CHECK-NEXT:     %b = psk_core.field %theta {field = "b", name = "b", site = "Linear.apply/%4"} : (!psk_core.params<Linear{In, Out}>) -> !psk_core.tensor<Out>
// CHECK-NEXT:     %1 = psk_core.add %0, %b {site = "Linear.apply/%5"} : (!psk_core.tensor<..., Out>, !psk_core.tensor<Out>) -> !psk_core.tensor<..., Out>
// CHECK-NEXT:     psk_core.return %1 {site = "Linear.apply/return"} : !psk_core.tensor<..., Out>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @RMSNorm.apply(%theta: !psk_core.params<RMSNorm{D}>, %x: !psk_core.tensor<..., model: D>, %eps: f64) -> !psk_core.tensor<..., model: D> attributes {arg_names = ["θ", "x", "eps"], dims = ["D"]} {
// CHECK-NEXT:     %0 = psk_core.powi %x {n = 2 : i64, site = "RMSNorm.apply/%3"} : !psk_core.tensor<..., model: D>
// CHECK-NEXT:     %ms = psk_core.mean %0 {axis = "model", name = "ms", site = "RMSNorm.apply/%4"} : (!psk_core.tensor<..., model: D>) -> !psk_core.tensor<...>
// CHECK-NEXT:     %1 = psk_core.real %eps {site = "RMSNorm.apply/%5"} : (f64) -> !psk_core.tensor<>
// CHECK-NEXT:     %2 = psk_core.add %ms, %1 {site = "RMSNorm.apply/%6"} : (!psk_core.tensor<...>, !psk_core.tensor<>) -> !psk_core.tensor<...>
// CHECK-NEXT:     %3 = psk_core.sqrt %2 {site = "RMSNorm.apply/%7"} : !psk_core.tensor<...>
// CHECK-NEXT:     %4 = psk_core.div %x, %3 {site = "RMSNorm.apply/%8"} : (!psk_core.tensor<..., model: D>, !psk_core.tensor<...>) -> !psk_core.tensor<..., model: D>
// CHECK-NEXT:     %g = psk_core.field %theta {field = "γ", name = "γ", site = "RMSNorm.apply/%9"} : (!psk_core.params<RMSNorm{D}>) -> !psk_core.tensor<D>
// CHECK-NEXT:     %5 = psk_core.mul %4, %g {site = "RMSNorm.apply/%10"} : (!psk_core.tensor<..., model: D>, !psk_core.tensor<D>) -> !psk_core.tensor<..., model: D>
// CHECK-NEXT:     psk_core.return %5 {site = "RMSNorm.apply/return"} : !psk_core.tensor<..., model: D>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @Block.apply(%theta: !psk_core.params<Block>, %x: !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., model: 4> attributes {arg_names = ["θ", "x"]} {
// CHECK-NEXT:     %norm = psk_core.field %theta {field = "norm", name = "norm", site = "Block.apply/%2"} : (!psk_core.params<Block>) -> !psk_core.params<RMSNorm{4}>
// CHECK-NEXT:     %0 = psk_core.constant {site = "Block.apply/%3", value = 1.000000e-06 : f64} : f64
// CHECK-NEXT:     %1 = psk_core.call @RMSNorm.apply(%norm, %x, %0) {dims = {D = 4 : i64}, site = "Block.apply/%4"} : (!psk_core.params<RMSNorm{4}>, !psk_core.tensor<..., model: 4>, f64) -> !psk_core.tensor<..., model: 4>
// CHECK-NEXT:     %2 = psk_core.gelu %1 {site = "Block.apply/%5"} : !psk_core.tensor<..., model: 4>
// CHECK-NEXT:     %proj = psk_core.field %theta {field = "proj", name = "proj", site = "Block.apply/%6"} : (!psk_core.params<Block>) -> !psk_core.params<Linear{4, 4}>
// CHECK-NEXT:     %3 = psk_core.call @Linear.apply(%proj, %2) {dims = {In = 4 : i64, Out = 4 : i64}, site = "Block.apply/%7"} : (!psk_core.params<Linear{4, 4}>, !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., 4>
// CHECK-NEXT:     %4 = psk_core.add %x, %3 {site = "Block.apply/%8"} : (!psk_core.tensor<..., model: 4>, !psk_core.tensor<..., 4>) -> !psk_core.tensor<..., model: 4>
// CHECK-NEXT:     psk_core.return %4 {site = "Block.apply/return"} : !psk_core.tensor<..., model: 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @Tower.apply(%theta: !psk_core.params<Tower>, %x: !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., model: 4> attributes {arg_names = ["θ", "x"]} {
// CHECK-NEXT:     %blocks = psk_core.field %theta {field = "blocks", name = "blocks", site = "Tower.apply/%2"} : (!psk_core.params<Tower>) -> !psk_core.params<stack{3}(Block)>
// CHECK-NEXT:     %0 = psk_core.fold @Block.apply(%blocks, %x) {count = 3 : i64, site = "Tower.apply/%3"} : (!psk_core.params<stack{3}(Block)>, !psk_core.tensor<..., model: 4>) -> !psk_core.tensor<..., model: 4>
// CHECK-NEXT:     %final = psk_core.field %theta {field = "final", name = "final", site = "Tower.apply/%4"} : (!psk_core.params<Tower>) -> !psk_core.params<RMSNorm{4}>
// CHECK-NEXT:     %1 = psk_core.constant {site = "Tower.apply/%5", value = 1.000000e-06 : f64} : f64
// CHECK-NEXT:     %2 = psk_core.call @RMSNorm.apply(%final, %0, %1) {dims = {D = 4 : i64}, site = "Tower.apply/%6"} : (!psk_core.params<RMSNorm{4}>, !psk_core.tensor<..., model: 4>, f64) -> !psk_core.tensor<..., model: 4>
// CHECK-NEXT:     psk_core.return %2 {site = "Tower.apply/return"} : !psk_core.tensor<..., model: 4>
// CHECK-NEXT:   }
// CHECK-NEXT:   psk_core.func @loss(%theta: !psk_core.params<Tower>, %batch: tuple<!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>>) -> !psk_core.tensor<> attributes {arg_names = ["θ", "batch"], dims = ["B"]} {
// CHECK-NEXT:     %x = psk_core.get %batch {index = 0 : i64, name = "x", site = "loss/%2"} : (tuple<!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>>) -> !psk_core.tensor<batch: B, model: 4>
// CHECK-NEXT:     %y = psk_core.get %batch {index = 1 : i64, name = "y", site = "loss/%3"} : (tuple<!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>>) -> !psk_core.tensor<batch: B, model: 4>
// CHECK-NEXT:     %0 = psk_core.call @Tower.apply(%theta, %x) {site = "loss/%4"} : (!psk_core.params<Tower>, !psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B, model: 4>
// CHECK-NEXT:     %1 = psk_core.sub %0, %y {site = "loss/%5"} : (!psk_core.tensor<batch: B, model: 4>, !psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B, model: 4>
// CHECK-NEXT:     %2 = psk_core.powi %1 {n = 2 : i64, site = "loss/%6"} : !psk_core.tensor<batch: B, model: 4>
// CHECK-NEXT:     %3 = psk_core.mean %2 {site = "loss/%7"} : (!psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<>
// CHECK-NEXT:     psk_core.return %3 {site = "loss/return"} : !psk_core.tensor<>
// CHECK-NEXT:   }
// CHECK-NEXT: }
