// The tutorial's loss at B = 4, all f64, fused: 9 kernels (k0 pow 2 … k8 mean, k5 the dot+add with its register-tiled layout), one host per instance, the fold a loop over iterations 0..2.
// RUN: presk dump %tutorial/07_train.psk --stage core --format mlir | presk-opt -p 'convert-psk-core-to-realize{entry=loss dims="B=4"},psk-fuse,convert-psk-realize-to-kernel,psk-kernel-dedup' | filecheck %s

// CHECK: builtin.module {
// CHECK-NEXT: psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "pow 2"} {
// CHECK-NEXT: psk_kernel.for %2 = 0 to 4 {
// CHECK-NEXT: psk_kernel.for %3 = 0 to 4 {
// CHECK-NEXT: %4 = psk_kernel.load %0[%2, %3] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %5 = psk_kernel.mul %4, %4 : f64
// CHECK-NEXT: psk_kernel.store %5, %1[%2, %3] : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64, batch: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "mean axis model"} {
// CHECK-NEXT: psk_kernel.for %2 = 0 to 4 {
// CHECK-NEXT: %3 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
// CHECK-NEXT: %4 = psk_kernel.for %5 = 0 to 4 iter(%6 = %3) -> (f64) attributes {partials = 4 : i64} {
// CHECK-NEXT: %7 = psk_kernel.load %0[%2, %5] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %8 = psk_kernel.add %6, %7 : f64
// CHECK-NEXT: psk_kernel.yield %8 : f64
// CHECK-NEXT: }
// CHECK-NEXT: %9 = psk_kernel.constant {value = 4.000000e+00 : f64} : f64
// CHECK-NEXT: %10 = psk_kernel.div %4, %9 : f64
// CHECK-NEXT: psk_kernel.store %10, %1[%2] : !psk_kernel.buffer<f64, batch: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k2(%0: !psk_kernel.buffer<f64, batch: 4>, %1: !psk_kernel.buffer<f64>, %2: !psk_kernel.buffer<f64, batch: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "fused 2 steps"} {
// CHECK-NEXT: psk_kernel.for %3 = 0 to 4 {
// CHECK-NEXT: %4 = psk_kernel.load %0[%3] : !psk_kernel.buffer<f64, batch: 4> -> f64
// CHECK-NEXT: %5 = psk_kernel.load %1[] : !psk_kernel.buffer<f64> -> f64
// CHECK-NEXT: %6 = psk_kernel.add %4, %5 : f64
// CHECK-NEXT: %7 = psk_kernel.math "sqrt" %6 : f64
// CHECK-NEXT: psk_kernel.store %7, %2[%3] : !psk_kernel.buffer<f64, batch: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k3(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64, batch: 4>, %2: !psk_kernel.buffer<f64, 4>, %3: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "fused 2 steps"} {
// CHECK-NEXT: psk_kernel.for %4 = 0 to 4 {
// CHECK-NEXT: psk_kernel.for %5 = 0 to 4 {
// CHECK-NEXT: %6 = psk_kernel.load %0[%4, %5] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %7 = psk_kernel.load %1[%4] : !psk_kernel.buffer<f64, batch: 4> -> f64
// CHECK-NEXT: %8 = psk_kernel.div %6, %7 : f64
// CHECK-NEXT: %9 = psk_kernel.load %2[%5] : !psk_kernel.buffer<f64, 4> -> f64
// CHECK-NEXT: %10 = psk_kernel.mul %8, %9 : f64
// CHECK-NEXT: psk_kernel.store %10, %3[%4, %5] : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k4(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "gelu"} {
// CHECK-NEXT: psk_kernel.for %2 = 0 to 4 {
// CHECK-NEXT: psk_kernel.for %3 = 0 to 4 {
// CHECK-NEXT: %4 = psk_kernel.load %0[%2, %3] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %5 = psk_kernel.constant {value = 1.000000e+00 : f64} : f64
// CHECK-NEXT: %6 = psk_kernel.constant {value = 1.4142135623730951 : f64} : f64
// CHECK-NEXT: %7 = psk_kernel.div %4, %6 : f64
// CHECK-NEXT: %8 = psk_kernel.math "erf" %7 : f64
// CHECK-NEXT: %9 = psk_kernel.add %5, %8 : f64
// CHECK-NEXT: %10 = psk_kernel.constant {value = 2.000000e+00 : f64} : f64
// CHECK-NEXT: %11 = psk_kernel.div %9, %10 : f64
// CHECK-NEXT: %12 = psk_kernel.mul %4, %11 : f64
// CHECK-NEXT: psk_kernel.store %12, %1[%2, %3] : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k5(%0: !psk_kernel.buffer<f64, batch: 4, 4>, %1: !psk_kernel.buffer<f64, 4, 4>, %2: !psk_kernel.buffer<f64, 4>, %3: !psk_kernel.buffer<f64, batch: 4, 4>) attributes {layout = #psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">, outputs = 1 : i64, title = "dot+add"} {
// CHECK-NEXT: psk_kernel.for %4 = 0 to 4 {
// CHECK-NEXT: psk_kernel.for %5 = 0 to 4 {
// CHECK-NEXT: %6 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
// CHECK-NEXT: %7 = psk_kernel.for %8 = 0 to 4 iter(%9 = %6) -> (f64) {
// CHECK-NEXT: %10 = psk_kernel.load %0[%4, %8] : !psk_kernel.buffer<f64, batch: 4, 4> -> f64
// CHECK-NEXT: %11 = psk_kernel.load %1[%8, %5] : !psk_kernel.buffer<f64, 4, 4> -> f64
// CHECK-NEXT: %12 = psk_kernel.mul %10, %11 : f64
// CHECK-NEXT: %13 = psk_kernel.add %9, %12 : f64
// CHECK-NEXT: psk_kernel.yield %13 : f64
// CHECK-NEXT: }
// CHECK-NEXT: %14 = psk_kernel.load %2[%5] : !psk_kernel.buffer<f64, 4> -> f64
// CHECK-NEXT: %15 = psk_kernel.add %7, %14 : f64
// CHECK-NEXT: psk_kernel.store %15, %3[%4, %5] : !psk_kernel.buffer<f64, batch: 4, 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k6(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64, batch: 4, 4>, %2: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "add"} {
// CHECK-NEXT: psk_kernel.for %3 = 0 to 4 {
// CHECK-NEXT: psk_kernel.for %4 = 0 to 4 {
// CHECK-NEXT: %5 = psk_kernel.load %0[%3, %4] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %6 = psk_kernel.load %1[%3, %4] : !psk_kernel.buffer<f64, batch: 4, 4> -> f64
// CHECK-NEXT: %7 = psk_kernel.add %5, %6 : f64
// CHECK-NEXT: psk_kernel.store %7, %2[%3, %4] : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k7(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64, batch: 4, model: 4>, %2: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "fused 2 steps"} {
// CHECK-NEXT: psk_kernel.for %3 = 0 to 4 {
// CHECK-NEXT: psk_kernel.for %4 = 0 to 4 {
// CHECK-NEXT: %5 = psk_kernel.load %0[%3, %4] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %6 = psk_kernel.load %1[%3, %4] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %7 = psk_kernel.sub %5, %6 : f64
// CHECK-NEXT: %8 = psk_kernel.mul %7, %7 : f64
// CHECK-NEXT: psk_kernel.store %8, %2[%3, %4] : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.yield
// CHECK-NEXT: }
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.kernel @k8(%0: !psk_kernel.buffer<f64, batch: 4, model: 4>, %1: !psk_kernel.buffer<f64>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "mean"} {
// CHECK-NEXT: %2 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
// CHECK-NEXT: %3 = psk_kernel.for %4 = 0 to 4 iter(%5 = %2) -> (f64) attributes {partials = 4 : i64} {
// CHECK-NEXT: %6 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
// CHECK-NEXT: %7 = psk_kernel.for %8 = 0 to 4 iter(%9 = %6) -> (f64) attributes {partials = 4 : i64} {
// CHECK-NEXT: %10 = psk_kernel.load %0[%4, %8] : !psk_kernel.buffer<f64, batch: 4, model: 4> -> f64
// CHECK-NEXT: %11 = psk_kernel.add %9, %10 : f64
// CHECK-NEXT: psk_kernel.yield %11 : f64
// CHECK-NEXT: }
// CHECK-NEXT: %12 = psk_kernel.add %5, %7 : f64
// CHECK-NEXT: psk_kernel.yield %12 : f64
// CHECK-NEXT: }
// CHECK-NEXT: %13 = psk_kernel.constant {value = 1.600000e+01 : f64} : f64
// CHECK-NEXT: %14 = psk_kernel.div %3, %13 : f64
// CHECK-NEXT: psk_kernel.store %14, %1[] : !psk_kernel.buffer<f64>
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.host @RMSNorm.apply(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f64, batch: 4, model: 4>, %2: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {arg_names = ["θ.γ", "x", "out"], function = "RMSNorm.apply", outputs = 1 : i64} {
// CHECK-NEXT: %3 = psk_kernel.mark
// CHECK-NEXT: %4 = psk_kernel.alloc {site = "RMSNorm.apply/%3"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.launch @k0(%1, %4) {site = "RMSNorm.apply/%3", sites = ["RMSNorm.apply/%3"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: %5 = psk_kernel.alloc {name = "ms", site = "RMSNorm.apply/%4"} : !psk_kernel.buffer<f64, batch: 4>
// CHECK-NEXT: psk_kernel.launch @k1(%4, %5) {name = "ms", site = "RMSNorm.apply/%4", sites = ["RMSNorm.apply/%4"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4>)
// CHECK-NEXT: %6 = psk_kernel.alloc {site = "RMSNorm.apply/%5"} : !psk_kernel.buffer<f64>
// CHECK-NEXT: psk_kernel.fill %6 {site = "RMSNorm.apply/%5", value = 1.000000e-06 : f64} : !psk_kernel.buffer<f64>
// CHECK-NEXT: %7 = psk_kernel.alloc {site = "RMSNorm.apply/%7"} : !psk_kernel.buffer<f64, batch: 4>
// CHECK-NEXT: psk_kernel.launch @k2(%5, %6, %7) {fused, site = "RMSNorm.apply/%7", sites = ["RMSNorm.apply/%6", "RMSNorm.apply/%7"]} : (!psk_kernel.buffer<f64, batch: 4>, !psk_kernel.buffer<f64>, !psk_kernel.buffer<f64, batch: 4>)
// CHECK-NEXT: psk_kernel.launch @k3(%1, %7, %0, %2) {fused, site = "RMSNorm.apply/%10", sites = ["RMSNorm.apply/%8", "RMSNorm.apply/%10"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4>, !psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: psk_kernel.release %3
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.host @Linear.apply(%0: !psk_kernel.buffer<f64, 4, 4>, %1: !psk_kernel.buffer<f64, 4>, %2: !psk_kernel.buffer<f64, batch: 4, 4>, %3: !psk_kernel.buffer<f64, batch: 4, 4>) attributes {arg_names = ["θ.w", "θ.b", "x", "out"], function = "Linear.apply", outputs = 1 : i64} {
// CHECK-NEXT: psk_kernel.launch @k5(%2, %0, %1, %3) {site = "Linear.apply/%5", sites = ["Linear.apply/%3", "Linear.apply/%5"]} : (!psk_kernel.buffer<f64, batch: 4, 4>, !psk_kernel.buffer<f64, 4, 4>, !psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, 4>)
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.host @Block.apply(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f64, 4, 4>, %2: !psk_kernel.buffer<f64, 4>, %3: !psk_kernel.buffer<f64, batch: 4, model: 4>, %4: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {arg_names = ["θ.norm.γ", "θ.proj.w", "θ.proj.b", "x", "out"], function = "Block.apply", outputs = 1 : i64} {
// CHECK-NEXT: %5 = psk_kernel.mark
// CHECK-NEXT: %6 = psk_kernel.alloc {site = "Block.apply/%4"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.call @RMSNorm.apply(%0, %3, %6) {site = "Block.apply/%4"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: %7 = psk_kernel.alloc {site = "Block.apply/%5"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.launch @k4(%6, %7) {site = "Block.apply/%5", sites = ["Block.apply/%5"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: %8 = psk_kernel.alloc {site = "Block.apply/%7"} : !psk_kernel.buffer<f64, batch: 4, 4>
// CHECK-NEXT: psk_kernel.call @Linear.apply(%1, %2, %7, %8) {site = "Block.apply/%7"} : (!psk_kernel.buffer<f64, 4, 4>, !psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, 4>)
// CHECK-NEXT: psk_kernel.launch @k6(%3, %8, %4) {site = "Block.apply/%8", sites = ["Block.apply/%8"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: psk_kernel.release %5
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.host @Tower.apply(%0: !psk_kernel.buffer<f64, 3, 4>, %1: !psk_kernel.buffer<f64, 3, 4, 4>, %2: !psk_kernel.buffer<f64, 3, 4>, %3: !psk_kernel.buffer<f64, 4>, %4: !psk_kernel.buffer<f64, batch: 4, model: 4>, %5: !psk_kernel.buffer<f64, batch: 4, model: 4>) attributes {arg_names = ["θ.blocks.norm.γ", "θ.blocks.proj.w", "θ.blocks.proj.b", "θ.final.γ", "x", "out"], function = "Tower.apply", outputs = 1 : i64} {
// CHECK-NEXT: %6 = psk_kernel.mark
// CHECK-NEXT: %7 = psk_kernel.alloc {site = "Tower.apply/%3"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: %8 = psk_kernel.alloc {site = "Tower.apply/%3"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: %9 = psk_kernel.fold %10 = 0 to 3, %11 = %4, %12 in (%7, %8) {site = "Tower.apply/%3"} : !psk_kernel.buffer<f64, batch: 4, model: 4> {
// CHECK-NEXT: %13 = psk_kernel.at %0[%10] : !psk_kernel.buffer<f64, 3, 4> -> !psk_kernel.buffer<f64, 4>
// CHECK-NEXT: %14 = psk_kernel.at %1[%10] : !psk_kernel.buffer<f64, 3, 4, 4> -> !psk_kernel.buffer<f64, 4, 4>
// CHECK-NEXT: %15 = psk_kernel.at %2[%10] : !psk_kernel.buffer<f64, 3, 4> -> !psk_kernel.buffer<f64, 4>
// CHECK-NEXT: psk_kernel.call @Block.apply(%13, %14, %15, %11, %12) {site = "Tower.apply/%3"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, 4, 4>, !psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.call @RMSNorm.apply(%3, %9, %5) {site = "Tower.apply/%6"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: psk_kernel.release %6
// CHECK-NEXT: }
// CHECK-NEXT: psk_kernel.host @loss(%0: !psk_kernel.buffer<f64, 3, 4>, %1: !psk_kernel.buffer<f64, 3, 4, 4>, %2: !psk_kernel.buffer<f64, 3, 4>, %3: !psk_kernel.buffer<f64, 4>, %4: !psk_kernel.buffer<f64, batch: 4, model: 4>, %5: !psk_kernel.buffer<f64, batch: 4, model: 4>, %6: !psk_kernel.buffer<f64>) attributes {arg_names = ["θ.blocks.norm.γ", "θ.blocks.proj.w", "θ.blocks.proj.b", "θ.final.γ", "batch.0", "batch.1", "out"], entry, function = "loss", outputs = 1 : i64} {
// CHECK-NEXT: %7 = psk_kernel.mark
// CHECK-NEXT: %8 = psk_kernel.alloc {site = "loss/%4"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.call @Tower.apply(%0, %1, %2, %3, %4, %8) {site = "loss/%4"} : (!psk_kernel.buffer<f64, 3, 4>, !psk_kernel.buffer<f64, 3, 4, 4>, !psk_kernel.buffer<f64, 3, 4>, !psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: %9 = psk_kernel.alloc {site = "loss/%6"} : !psk_kernel.buffer<f64, batch: 4, model: 4>
// CHECK-NEXT: psk_kernel.launch @k7(%8, %5, %9) {fused, site = "loss/%6", sites = ["loss/%5", "loss/%6"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64, batch: 4, model: 4>)
// CHECK-NEXT: psk_kernel.launch @k8(%9, %6) {site = "loss/%7", sites = ["loss/%7"]} : (!psk_kernel.buffer<f64, batch: 4, model: 4>, !psk_kernel.buffer<f64>)
// CHECK-NEXT: psk_kernel.release %7
// CHECK-NEXT: }
// CHECK-NEXT: }
