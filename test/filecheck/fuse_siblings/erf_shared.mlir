// psk-kernel-fuse-siblings: @phi and @slope both call erf on x/√2 of the same buffer %0:
// one kernel (k0, "phi + slope") runs both bodies in one loop, loads x once, divides and
// calls erf once, and stores both outputs; the launch stands where @slope's stood, its
// stores naming each output's site. @neg reads %0 too but shares no math call: it keeps
// its own kernel and launch. Running the pass again changes nothing.
// RUN: presk-opt %s -p psk-kernel-fuse-siblings | filecheck %s
// RUN: presk-opt %s -p psk-kernel-fuse-siblings,psk-kernel-fuse-siblings | filecheck %s

builtin.module {
  psk_kernel.kernel @phi(%0: !psk_kernel.buffer<f64, 8>, %1: !psk_kernel.buffer<f64, 8>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "phi"} {
    psk_kernel.for %2 = 0 to 8 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f64, 8> -> f64
      %4 = psk_kernel.constant {value = 1.4142135623730951 : f64} : f64
      %5 = psk_kernel.div %3, %4 : f64
      %6 = psk_kernel.math "erf" %5 : f64
      psk_kernel.store %6, %1[%2] : !psk_kernel.buffer<f64, 8>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @slope(%0: !psk_kernel.buffer<f64, 8>, %1: !psk_kernel.buffer<f64, 8>, %2: !psk_kernel.buffer<f64, 8>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "slope"} {
    psk_kernel.for %3 = 0 to 8 {
      %4 = psk_kernel.load %0[%3] : !psk_kernel.buffer<f64, 8> -> f64
      %5 = psk_kernel.constant {value = 1.4142135623730951 : f64} : f64
      %6 = psk_kernel.div %4, %5 : f64
      %7 = psk_kernel.math "erf" %6 : f64
      %8 = psk_kernel.load %1[%3] : !psk_kernel.buffer<f64, 8> -> f64
      %9 = psk_kernel.mul %7, %8 : f64
      psk_kernel.store %9, %2[%3] : !psk_kernel.buffer<f64, 8>
      psk_kernel.yield
    }
  }
  psk_kernel.kernel @neg(%0: !psk_kernel.buffer<f64, 8>, %1: !psk_kernel.buffer<f64, 8>) attributes {layout = #psk_kernel.layout<default>, outputs = 1 : i64, title = "neg"} {
    psk_kernel.for %2 = 0 to 8 {
      %3 = psk_kernel.load %0[%2] : !psk_kernel.buffer<f64, 8> -> f64
      %4 = psk_kernel.neg %3 : f64
      psk_kernel.store %4, %1[%2] : !psk_kernel.buffer<f64, 8>
      psk_kernel.yield
    }
  }
  psk_kernel.host @f(%0: !psk_kernel.buffer<f64, 8>, %1: !psk_kernel.buffer<f64, 8>, %2: !psk_kernel.buffer<f64, 8>, %3: !psk_kernel.buffer<f64, 8>, %4: !psk_kernel.buffer<f64, 8>) attributes {arg_names = ["x", "g", "p", "s", "n"], entry, function = "f", outputs = 3 : i64} {
    psk_kernel.launch @phi(%0, %2) {site = "f/%2"} : (!psk_kernel.buffer<f64, 8>, !psk_kernel.buffer<f64, 8>)
    psk_kernel.launch @slope(%0, %1, %3) {site = "f/%3"} : (!psk_kernel.buffer<f64, 8>, !psk_kernel.buffer<f64, 8>, !psk_kernel.buffer<f64, 8>)
    psk_kernel.launch @neg(%0, %4) {site = "f/%4"} : (!psk_kernel.buffer<f64, 8>, !psk_kernel.buffer<f64, 8>)
  }
}

// CHECK:      psk_kernel.kernel @k0(%0: {{.*}}, %1: {{.*}}, %2: {{.*}}, %3: {{.*}}) attributes {layout = #psk_kernel.layout<default>, outputs = 2 : i64, title = "phi + slope"}
// CHECK-NEXT:   psk_kernel.for %4 = 0 to 8 {
// CHECK-NEXT:     %5 = psk_kernel.load %0[%4]
// CHECK-NEXT:     %6 = psk_kernel.constant {value = 1.4142135623730951 : f64} : f64
// CHECK-NEXT:     %7 = psk_kernel.div %5, %6 : f64
// CHECK-NEXT:     %8 = psk_kernel.math "erf" %7 : f64
// CHECK-NEXT:     psk_kernel.store %8, %2[%4]
// CHECK-NEXT:     %9 = psk_kernel.load %1[%4]
// CHECK-NEXT:     %10 = psk_kernel.mul %8, %9 : f64
// CHECK-NEXT:     psk_kernel.store %10, %3[%4]
// CHECK-NEXT:     psk_kernel.yield
// CHECK:      psk_kernel.kernel @k1({{.*}}) attributes {{{.*}}outputs = 1 : i64, title = "neg"}
// CHECK-NOT:  psk_kernel.kernel
// CHECK:      psk_kernel.host @f
// CHECK-NEXT:   psk_kernel.launch @k0(%0, %1, %2, %3) {site = "f/%2", sites = ["f/%2", "f/%3"], stores = ["f/%2", "f/%3"]}
// CHECK-NEXT:   psk_kernel.launch @k1(%0, %4) {site = "f/%4"}
