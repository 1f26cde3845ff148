// RUN: presk-opt %s -p convert-cf-to-llvm | filecheck %s
// convert-cf-to-llvm: branches keep their successors and operands.

func.func @loop(%n: i64, %x: f64) -> f64 {
  %c0 = arith.constant 0 : i64
  cf.br ^head(%c0, %x : i64, f64)
^head(%i: i64, %acc: f64):
  %lt = arith.cmpi slt, %i, %n : i64
  cf.cond_br %lt, ^body, ^exit(%acc : f64)
^body:
  %c1 = arith.constant 1 : i64
  %j = arith.addi %i, %c1 : i64
  %y = arith.mulf %acc, %x : f64
  cf.br ^head(%j, %y : i64, f64)
^exit(%r: f64):
  func.return %r : f64
}

// CHECK-LABEL: func.func @loop
// CHECK:         llvm.br ^head(%c0, %x : i64, f64)
// CHECK-NEXT:  ^head(%i: i64, %acc: f64):
// CHECK:         llvm.cond_br %lt, ^body, ^exit(%acc : f64)
// CHECK:         llvm.br ^head(%j, %y : i64, f64)
// CHECK-NEXT:  ^exit(%r: f64):
// CHECK-NEXT:    func.return %r : f64
// CHECK-NOT:   cf.
