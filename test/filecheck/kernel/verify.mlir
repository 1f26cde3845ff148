// The verifiers of psk_kernel: each error names the site (a host op's `site`, else the
// kernel or host that holds the op).
// RUN: presk-opt %s --verify-diagnostics --split-input-file | filecheck %s

psk_kernel.kernel @k0(%0: !psk_kernel.buffer<bf16, 4>, %1: !psk_kernel.buffer<bf16, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "add"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<bf16, 4> -> f32
    %c = psk_kernel.constant {value = 1.0 : f64} : bf16
    psk_kernel.store %a, %1[%i] : !psk_kernel.buffer<bf16, 4>
    psk_kernel.yield
  }
}
// CHECK: k0: psk_kernel.constant: a constant is f32 or f64, not bf16

// -----

psk_kernel.kernel @k0(%0: !psk_kernel.buffer<bf16, 4>, %1: !psk_kernel.buffer<bf16, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<bf16, 4> -> bf16
    psk_kernel.yield
  }
}
// CHECK: k0: psk_kernel.load: a bf16 element loads as f32, not bf16

// -----

psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 4> -> f32
    %b = psk_kernel.neg %a : f32
    psk_kernel.store %b, %0[%i] : !psk_kernel.buffer<f32, 4>
    psk_kernel.yield
  }
}
// CHECK: k1: psk_kernel.kernel: a kernel stores only to its outputs

// -----

psk_kernel.kernel @k2(%0: !psk_kernel.buffer<f32, 4, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 4, 4> -> f32
    psk_kernel.store %a, %1[%i] : !psk_kernel.buffer<f32, 4>
    psk_kernel.yield
  }
}
// CHECK: k2: psk_kernel.load: f32[4, 4] takes 2 indices, given 1

// -----

psk_kernel.kernel @k3(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %1[%i] : !psk_kernel.buffer<f32, 4> -> f32
    psk_kernel.store %a, %1[%i] : !psk_kernel.buffer<f32, 4>
    psk_kernel.yield
  }
}
// CHECK: k3: psk_kernel.kernel: a kernel reads only its inputs

// -----

psk_kernel.kernel @k4(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">, outputs = 1 : i64, title = "neg"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 4> -> f32
    psk_kernel.store %a, %1[%i] : !psk_kernel.buffer<f32, 4>
    psk_kernel.yield
  }
}
// CHECK: k4: psk_kernel.kernel: only a contraction is tiled

// -----

psk_kernel.kernel @k5(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum"} {
  %z = psk_kernel.constant {value = 0.0 : f64} : f32
  %s = psk_kernel.for %i = 0 to 4 iter(%acc = %z) -> (f32) {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 4> -> f32
    %w = psk_kernel.cast %a : f32 -> f64
    psk_kernel.yield %w : f64
  }
  psk_kernel.store %s, %1[] : !psk_kernel.buffer<f32>
}
// CHECK: k5: psk_kernel.for: the yield gives the loop-carried values' types

// -----

psk_kernel.kernel @k6(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "erf"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 4> -> f32
    %b = psk_kernel.math "gamma" %a : f32
    psk_kernel.store %b, %1[%i] : !psk_kernel.buffer<f32, 4>
    psk_kernel.yield
  }
}
// CHECK: k6: psk_kernel.math: `gamma` is not a function of the math table

// -----

psk_kernel.kernel @k7(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "nothing"} {
}
// CHECK: k7: psk_kernel.kernel: output %1 is never stored

// -----

psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
  psk_kernel.for %i = 0 to 4 {
    %a = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 4> -> f32
    psk_kernel.store %a, %1[%i] : !psk_kernel.buffer<f32, 4>
    psk_kernel.yield
  }
}
psk_kernel.host @h(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 1 : i64} {
  psk_kernel.launch @k0(%0, %1) {site = "h/%2"} : (!psk_kernel.buffer<f64, 4>, !psk_kernel.buffer<f32, 4>)
}
// CHECK: h/%2: psk_kernel.launch: argument 0 of @k0 is f32[4], given f64[4]

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 1 : i64} {
  psk_kernel.launch @k9(%0, %1) {site = "h/%2"} : (!psk_kernel.buffer<f32, 4>, !psk_kernel.buffer<f32, 4>)
}
// CHECK: h/%2: psk_kernel.launch: no psk_kernel.kernel @k9

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 1 : i64} {
  psk_kernel.convert %0 to %1 {site = "h/%3"} : !psk_kernel.buffer<f32, 4> -> !psk_kernel.buffer<f32, 4>
}
// CHECK: h/%3: psk_kernel.convert: a conversion changes the element type: f32[4] -> f32[4]

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f64, 4>, %1: !psk_kernel.buffer<f32, 2, 2>) attributes {function = "h", outputs = 1 : i64} {
  psk_kernel.convert %0 to %1 {site = "h/%3"} : !psk_kernel.buffer<f64, 4> -> !psk_kernel.buffer<f32, 2, 2>
}
// CHECK: h/%3: psk_kernel.convert: a conversion keeps the shape: f64[4] -> f32[2, 2]

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f32, 3, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 1 : i64} {
  %v = psk_kernel.at %0[3] {site = "h/%2"} : !psk_kernel.buffer<f32, 3, 4> -> !psk_kernel.buffer<f32, 4>
}
// CHECK: h/%2: psk_kernel.at: index 3 is outside f32[3, 4]

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f32>, %1: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 1 : i64} {
  %a = psk_kernel.load %0[] : !psk_kernel.buffer<f32> -> f32
}
// CHECK: h: psk_kernel.host: psk_kernel.load stands in a kernel, not in the host

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f32, 4>, %1: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 1 : i64} {
  %s0 = psk_kernel.alloc : !psk_kernel.buffer<f32, 4>
  %s1 = psk_kernel.alloc : !psk_kernel.buffer<f32, 4>
  %r = psk_kernel.fold %l = 2 to 0, %acc = %0, %dst in (%s0, %s1) {site = "h/%3"} : !psk_kernel.buffer<f32, 4> {
  }
}
// CHECK: h/%3: psk_kernel.fold: the fold's bounds 2..0 decrease

// -----

psk_kernel.host @h(%0: !psk_kernel.buffer<f32, 4>) attributes {function = "h", outputs = 2 : i64} {
}
// CHECK: h: psk_kernel.host: 2 outputs of 1 arguments

// -----

psk_kernel.kernel @k9(%0: !psk_kernel.buffer<f32, 100>, %1: !psk_kernel.buffer<f32>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum"} {
  %z = psk_kernel.constant {value = 0.0 : f64} : f32
  %s = psk_kernel.for %i = 0 to 100 iter(%a = %z) -> (f32) attributes {partials = 32 : i64} {
    %x = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 100> -> f32
    %n = psk_kernel.add %a, %x : f32
    psk_kernel.yield %n : f32
  }
  psk_kernel.store %s, %1[] : !psk_kernel.buffer<f32>
}
// CHECK: k9: psk_kernel.for: a blocked sum of 100 terms has 64 partials, not 32

// -----

psk_kernel.kernel @k10(%0: !psk_kernel.buffer<f32, 3>, %1: !psk_kernel.buffer<f32>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum"} {
  %z = psk_kernel.constant {value = 1.0 : f64} : f32
  %s = psk_kernel.for %i = 0 to 3 iter(%a = %z) -> (f32) attributes {partials = 4 : i64} {
    %x = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 3> -> f32
    %n = psk_kernel.add %a, %x : f32
    psk_kernel.yield %n : f32
  }
  psk_kernel.store %s, %1[] : !psk_kernel.buffer<f32>
}
// CHECK: k10: psk_kernel.for: a blocked sum starts from the constant +0

// -----

psk_kernel.kernel @k11(%0: !psk_kernel.buffer<f32, 3>, %1: !psk_kernel.buffer<f32>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "sum"} {
  %z = psk_kernel.constant {value = 0.0 : f64} : f32
  %s = psk_kernel.for %i = 0 to 3 iter(%a = %z) -> (f32) attributes {partials = 4 : i64} {
    %x = psk_kernel.load %0[%i] : !psk_kernel.buffer<f32, 3> -> f32
    %m = psk_kernel.mul %a, %x : f32
    %n = psk_kernel.add %a, %m : f32
    psk_kernel.yield %n : f32
  }
  psk_kernel.store %s, %1[] : !psk_kernel.buffer<f32>
}
// CHECK: k11: psk_kernel.for: a blocked sum's body yields `add` of the carried partial and a term that does not read it
