// RUN: not presk-opt %s -p convert-math-to-llvm 2>&1 | filecheck %s
// A math op with fast-math flags is refused: the math library's bits are fixed.

func.func @g(%x: f32) -> f32 {
  %a = math.exp %x fastmath<fast> : f32
  func.return %a : f32
}

// CHECK: convert-math-to-llvm: math.exp with fast-math flags: the math library's bits are fixed
