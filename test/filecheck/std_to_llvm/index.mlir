// RUN: presk-opt %s -p convert-index-to-llvm | filecheck %s
// convert-index-to-llvm: index → i64 in signatures, results, constants and block
// arguments; index_cast to i64 vanishes, to i32 is a trunci, from i32 an extsi.

func.func @count(%n: index, %k: i32) -> (index, i64, i32) {
  %c0 = arith.constant 0 : index
  %kk = arith.index_cast %k : i32 to index
  cf.br ^head(%c0 : index)
^head(%i: index):
  %lt = arith.cmpi slt, %i, %n : index
  %c1 = arith.constant 1 : index
  %j = arith.addi %i, %kk : index
  cf.cond_br %lt, ^head(%j : index), ^exit
^exit:
  %w = arith.index_cast %i : index to i64
  %t = arith.index_cast %i : index to i32
  func.return %i, %w, %t : index, i64, i32
}

// CHECK-LABEL: func.func @count(%n: i64, %k: i32) -> (i64, i64, i32) {
// CHECK-NEXT:    %c0 = arith.constant 0 : i64
// CHECK-NEXT:    %kk = arith.extsi %k : i32 to i64
// CHECK-NEXT:    cf.br ^head(%c0 : i64)
// CHECK-NEXT:  ^head(%i: i64):
// CHECK-NEXT:    %lt = arith.cmpi slt, %i, %n : i64
// CHECK-NEXT:    %j = arith.addi %i, %kk : i64
// CHECK-NEXT:    cf.cond_br %lt, ^head(%j : i64), ^exit
// CHECK-NEXT:  ^exit:
// CHECK-NEXT:    %t = arith.trunci %i : i64 to i32
// CHECK-NEXT:    func.return %i, %i, %t : i64, i64, i32
// CHECK-NOT:   index
