"""convert-math-to-llvm: the `math` dialect → the one math library and LLVM intrinsics.

xDSL lowers no `math` op to `llvm`. Presk computes every transcendental function with its
own math library (presk/emit/mathlib.py), so that native code, the interpreters and the C
export compute the same bits, never with the C library's or LLVM's:

| math op | llvm |
|---|---|
| the library rows of presk/ops that `math` has (exp, log, log1p, tanh, erf, sin, cos, powf, …) | `llvm.call @presk_<fn>_<f32\\|f64>` (declared here; `declare_all` of presk/emit/mathlib_llvm.py defines it) |
| sqrt, absf | `llvm.call_intrinsic "llvm.sqrt.<ty>"` / `"llvm.fabs.<ty>"` (exact; typed by name: xDSL's own fabs op translates unmangled) |

A fast-math flag on a math op is refused (the library's bits are fixed), as is a vector
operand (the library's functions are scalar: a vectorized loop gets them inlined).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import llvm, math
from xdsl.dialects.builtin import Float32Type, Float64Type, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriter,
    PatternRewriteWalker, RewritePattern)
from xdsl.utils.exceptions import DiagnosticException

from presk import ops
from presk.conversion.std_to_llvm.callees import declare_external_callees

# from the table of element-wise functions (presk/ops): a library row's `math` op is a
# call of its program, an exact row's its LLVM intrinsic
LIBRARY: dict[type[Operation], str] = {
    getattr(math, f.compute.math_op): f.name for f in ops.ROWS
    if isinstance(f.compute, ops.Library) and f.compute.math_op is not None}
INTRINSIC: dict[type[Operation], str] = {
    getattr(math, f.compute.math_op): f.compute.llvm for f in ops.ROWS
    if isinstance(f.compute, ops.Exact) and f.compute.llvm is not None}


def _type_name(op: Operation) -> str:
    t = op.results[0].type
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, Float32Type):
        return "f32"
    raise DiagnosticException(f"convert-math-to-llvm: {op.name} of {t}: the math library "
                              "takes f32 or f64 scalars")


class MathToLLVM(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if type(op) not in LIBRARY and type(op) not in INTRINSIC:
            return
        flags = getattr(op, "fastmath", None)
        if flags is not None and flags.data:
            raise DiagnosticException(f"convert-math-to-llvm: {op.name} with fast-math "
                                      "flags: the math library's bits are fixed")
        ty, t = _type_name(op), op.results[0].type
        if type(op) in INTRINSIC:
            new = llvm.CallIntrinsicOp(f"{INTRINSIC[type(op)]}.{ty}", list(op.operands), [t])
        else:
            new = llvm.CallOp(f"presk_{LIBRARY[type(op)]}_{ty}", *op.operands, return_type=t)
        rewriter.replace(op, new)


@dataclass(frozen=True)
class ConvertMathToLLVMPass(ModulePass):
    name = "convert-math-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([MathToLLVM()]),
                             apply_recursively=False).rewrite_module(op)
        declare_external_callees(op)
