// RUN: presk-opt %s -p convert-math-to-llvm | filecheck %s
// convert-math-to-llvm: each transcendental function a call of the one math library
// (presk_<fn>_<ty>, declared), sqrt and absf exact intrinsics typed by name.

func.func @f(%x: f32, %y: f64) -> f64 {
  %a = math.exp %x : f32
  %b = math.erf %a : f32
  %c = math.sqrt %b : f32
  %w = arith.extf %c : f32 to f64
  %d = math.absf %w : f64
  %e = math.powf %d, %y : f64
  %f = math.log1p %e : f64
  func.return %f : f64
}

// CHECK:      %[[A:.*]] = llvm.call @presk_exp_f32(%x) : (f32) -> f32
// CHECK-NEXT: %[[B:.*]] = llvm.call @presk_erf_f32(%[[A]]) : (f32) -> f32
// CHECK-NEXT: %[[C:.*]] = llvm.call_intrinsic "llvm.sqrt.f32"(%[[B]]) : (f32) -> f32
// CHECK-NEXT: %[[W:.*]] = arith.extf %[[C]] : f32 to f64
// CHECK-NEXT: %[[D:.*]] = llvm.call_intrinsic "llvm.fabs.f64"(%[[W]]) : (f64) -> f64
// CHECK-NEXT: %[[E:.*]] = llvm.call @presk_pow_f64(%[[D]], %y) : (f64, f64) -> f64
// CHECK-NEXT: %[[F:.*]] = llvm.call @presk_log1p_f64(%[[E]]) : (f64) -> f64
// CHECK:      llvm.func @presk_erf_f32(f32) -> f32
// CHECK-NEXT: llvm.func @presk_exp_f32(f32) -> f32
// CHECK-NEXT: llvm.func @presk_log1p_f64(f64) -> f64
// CHECK-NEXT: llvm.func @presk_pow_f64(f64, f64) -> f64
