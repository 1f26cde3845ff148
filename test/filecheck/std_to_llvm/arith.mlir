// RUN: presk-opt %s -p convert-arith-to-llvm | filecheck %s
// convert-arith-to-llvm: one llvm op per arith op; fast-math flags kept; cmpf/cmpi keep
// their predicate; fptosi is the saturating intrinsic (xDSL's llvm dialect has no fptosi).

func.func @float(%a: f64, %b: f64, %h: f32, %i: i64) -> (f64, i1, f32, f64, i32) {
  %c = arith.constant 1.5 : f64
  %0 = arith.addf %a, %c fastmath<contract> : f64
  %1 = arith.subf %0, %b : f64
  %2 = arith.mulf %1, %b : f64
  %3 = arith.divf %2, %a : f64
  %4 = arith.negf %3 : f64
  %5 = arith.cmpf ult, %4, %a : f64
  %6 = arith.select %5, %4, %a : f64
  %7 = arith.truncf %6 : f64 to f32
  %8 = arith.extf %h : f32 to f64
  %9 = arith.sitofp %i : i64 to f64
  %10 = arith.fptosi %8 : f64 to i32
  %11 = arith.maxnumf %8, %9 : f64
  func.return %6, %5, %7, %11, %10 : f64, i1, f32, f64, i32
}

// CHECK-LABEL: func.func @float
// CHECK-NEXT:    %c = llvm.mlir.constant(1.500000e+00 : f64) : f64
// CHECK-NEXT:    %0 = llvm.fadd %a, %c {fastmathFlags = #llvm.fastmath<contract>} : f64
// CHECK-NEXT:    %1 = llvm.fsub %0, %b : f64
// CHECK-NEXT:    %2 = llvm.fmul %1, %b : f64
// CHECK-NEXT:    %3 = llvm.fdiv %2, %a : f64
// CHECK-NEXT:    %4 = llvm.fneg %3 : f64
// CHECK-NEXT:    %5 = llvm.fcmp "ult" %4, %a : f64
// CHECK-NEXT:    %6 = llvm.select %5, %4, %a : i1, f64
// CHECK-NEXT:    %7 = llvm.fptrunc %6 : f64 to f32
// CHECK-NEXT:    %8 = llvm.fpext %h : f32 to f64
// CHECK-NEXT:    %9 = llvm.sitofp %i : i64 to f64
// CHECK-NEXT:    %10 = llvm.call_intrinsic "llvm.fptosi.sat.i32.f64"(%8) : (f64) -> i32
// CHECK-NEXT:    %11 = llvm.intr.maxnum(%8, %9) : (f64, f64) -> f64
// CHECK-NEXT:    func.return %6, %5, %7, %11, %10 : f64, i1, f32, f64, i32

func.func @int(%a: i64, %b: i64) -> (i1, i64, i32) {
  %c = arith.constant 3 : i64
  %0 = arith.addi %a, %c : i64
  %1 = arith.subi %0, %b : i64
  %2 = arith.muli %1, %b : i64
  %3 = arith.divsi %2, %c : i64
  %4 = arith.remsi %3, %c : i64
  %5 = arith.andi %4, %a : i64
  %6 = arith.shli %5, %c : i64
  %7 = arith.cmpi sle, %6, %a : i64
  %8 = arith.trunci %6 : i64 to i32
  func.return %7, %6, %8 : i1, i64, i32
}

// CHECK-LABEL: func.func @int
// CHECK-NEXT:    %c = llvm.mlir.constant(3) : i64
// CHECK-NEXT:    %0 = llvm.add %a, %c : i64
// CHECK-NEXT:    %1 = llvm.sub %0, %b : i64
// CHECK-NEXT:    %2 = llvm.mul %1, %b : i64
// CHECK-NEXT:    %3 = llvm.sdiv %2, %c : i64
// CHECK-NEXT:    %4 = llvm.srem %3, %c : i64
// CHECK-NEXT:    %5 = llvm.and %4, %a : i64
// CHECK-NEXT:    %6 = llvm.shl %5, %c : i64
// CHECK-NEXT:    %7 = llvm.icmp "sle" %6, %a : i64
// CHECK-NEXT:    %8 = llvm.trunc %6 : i64 to i32
// CHECK-NEXT:    func.return %7, %6, %8 : i1, i64, i32
