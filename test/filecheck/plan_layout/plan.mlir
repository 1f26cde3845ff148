// psk-plan-layout: each nest of the plan (inputs/plan.json) names a kernel, the site of
// its first launch, its title and its buffers' sizes; the pass sets that kernel's layout
// to the plan's point (k0 split over 2 workers, the contraction k1 in tiles of [4, 4],
// lanes = C) and leaves the nest itself as it was. Without a plan it changes nothing. A
// plan whose nest is not one of the module's kernels is refused (the last RUN line).
// RUN: presk-opt %s -p 'psk-plan-layout{plan="@%S/inputs/plan.json"}' | filecheck %s
// RUN: presk-opt %s -p 'psk-plan-layout{plan="@%S/inputs/plan.json"}' | presk-opt | filecheck %s
// RUN: presk-opt %s -p psk-plan-layout | filecheck %s --check-prefix=NONE
// RUN: sed 's/"neg"/"abs"/' %S/inputs/plan.json > %t.json
// RUN: not presk-opt %s -p 'psk-plan-layout{plan="@%t.json"}' 2>&1 | filecheck %s --check-prefix=BAD

builtin.module {
  psk_kernel.kernel @k0(%0: !psk_kernel.buffer<f64, 8>, %1: !psk_kernel.buffer<f64, 8>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 8 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f64, 8> -> f64
      %4 = psk_kernel.neg %3 : f64
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f64, 8>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @k1(%0: !psk_kernel.buffer<f64, 8, 4>, %1: !psk_kernel.buffer<f64, 4, 8>, %2: !psk_kernel.buffer<f64, 8, 8>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "dot"} {
    psk_kernel.for %3 = 0 to 8 {
      psk_kernel.for %4 = 0 to 8 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : f64
        %6 = psk_kernel.for %7 = 0 to 4 iter(%8 = %5) -> (f64) {
          %9 = psk_kernel.load %0[%3, %7] : !psk_kernel.buffer<f64, 8, 4> -> f64
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<f64, 4, 8> -> f64
          %11 = psk_kernel.mul %9, %10 : f64
          %12 = psk_kernel.add %8, %11 : f64
          psk_kernel.yield %12 : f64
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<f64, 8, 8>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
  psk_kernel.host @f(%0: !psk_kernel.buffer<f64, 8>, %1: !psk_kernel.buffer<f64, 8, 4>, %2: !psk_kernel.buffer<f64, 4, 8>, %3: !psk_kernel.buffer<f64, 8>, %4: !psk_kernel.buffer<f64, 8, 8>) attributes {entry, function = "f", outputs = 2 : i64} {
    psk_kernel.launch @k0(%0, %3) {site = "f/%2"} : (!psk_kernel.buffer<f64, 8>, !psk_kernel.buffer<f64, 8>)
    psk_kernel.launch @k1(%1, %2, %4) {site = "f/%3"} : (!psk_kernel.buffer<f64, 8, 4>, !psk_kernel.buffer<f64, 4, 8>, !psk_kernel.buffer<f64, 8, 8>)
  }
}

// CHECK:      psk_kernel.kernel @k0({{.*}}) attributes {layout = #psk_kernel.layout<default, split = [0, 2]>, outputs = 1 : i64, title = "neg"}
// CHECK-NEXT:   psk_kernel.for %2 = 0 to 8 {
// CHECK:      psk_kernel.kernel @k1({{.*}}) attributes {layout = #psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">, outputs = 1 : i64, title = "dot"}
// CHECK-NEXT:   psk_kernel.for %3 = 0 to 8 {

// NONE: psk_kernel.kernel @k0({{.*}}) attributes {layout = #psk_kernel.layout<default>,
// NONE: psk_kernel.kernel @k1({{.*}}) attributes {layout = #psk_kernel.layout<default>,

// BAD: nest f/%2 (k0, abs) is not a kernel of this recording
