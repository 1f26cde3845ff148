// RUN: presk-opt %s -p convert-func-to-llvm --print-op-generic | filecheck %s
// convert-func-to-llvm: every function external (O2 would delete an internal one), the
// body kept, argument attributes carried, declarations kept, calls and returns lowered.

func.func private @ext(f64) -> f64

func.func @callee(%p: f64 {llvm.noalias}, %q: f64) -> f64 {
  %r = func.call @ext(%p) : (f64) -> f64
  func.return %r : f64
}

func.func @proc() {
  %c = arith.constant 2.0 : f64
  %r = func.call @callee(%c, %c) : (f64, f64) -> f64
  func.return
}

// CHECK:       "llvm.func"() <{sym_name = "ext", function_type = !llvm.func<f64 (f64)>, CConv = #llvm.cconv<ccc>, linkage = #llvm.linkage<"external">
// CHECK-SAME:  ({
// CHECK-NEXT:  }) : () -> ()
// CHECK:       "llvm.func"() <{sym_name = "callee", function_type = !llvm.func<f64 (f64, f64)>, CConv = #llvm.cconv<ccc>, linkage = #llvm.linkage<"external">
// CHECK-SAME:  arg_attrs = [{llvm.noalias}, {}]
// CHECK:         %r = "llvm.call"(%p) <{callee = @ext
// CHECK-NEXT:    "llvm.return"(%r) : (f64) -> ()
// CHECK:       "llvm.func"() <{sym_name = "proc", function_type = !llvm.func<void ()>, CConv = #llvm.cconv<ccc>, linkage = #llvm.linkage<"external">
// CHECK:         %r{{.*}} = "llvm.call"(%c, %c) <{callee = @callee
// CHECK-NEXT:    "llvm.return"() : () -> ()
// CHECK-NOT:   func.
