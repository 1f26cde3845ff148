"""convert-arith-to-llvm: arith → llvm, one op for one op (xDSL ships no such pass).

* float: addf/subf/mulf/divf → llvm.fadd/fsub/fmul/fdiv, negf → llvm.fneg (their fast-math
  flags carried over), cmpf → llvm.fcmp (same predicate numbers), extf → llvm.fpext,
  truncf → llvm.fptrunc, maxnumf/minnumf → llvm.intr.maxnum/minnum;
* integer (loop indices, after convert-index-to-llvm): addi/subi/muli, divsi/divui,
  remsi/remui, andi/ori/xori, shli/shrsi/shrui → the llvm op of the same meaning; cmpi →
  llvm.icmp; extsi/extui/trunci → llvm.sext/zext/trunc;
* sitofp → llvm.sitofp; fptosi → `llvm.call_intrinsic "llvm.fptosi.sat.iN.fM"`, since xDSL's
  llvm dialect has no fptosi (saturating: defined where plain fptosi is poison);
* select → llvm.select; constant (integer, float, dense) → llvm.mlir.constant.

Not converted (left in place, so the translation names them): maximumf/minimumf (NaN
propagating, no xDSL llvm op), uitofp/fptoui, bitcast, floordivsi/ceildiv*, min/max on
integers, the *_extended ops. Overflow flags (nsw/nuw) are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, llvm
from xdsl.dialects.builtin import (AnyFloat, DenseIntOrFPElementsAttr, FloatAttr,
    IntegerAttr, IntegerType, ModuleOp, i64)
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriter,
    PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern)


def _fastmath(op: Operation) -> llvm.FastMathAttr:
    fm = op.properties.get("fastmath")
    return llvm.FastMathAttr(list(fm.data) if isinstance(fm, arith.FastMathFlagsAttr) else None)


_FLOAT_BINARY: dict[type[Operation], type[llvm.AbstractFloatArithOp]] = {
    arith.AddfOp: llvm.FAddOp,
    arith.SubfOp: llvm.FSubOp,
    arith.MulfOp: llvm.FMulOp,
    arith.DivfOp: llvm.FDivOp,
}

_INT_BINARY: dict[type[Operation], type[Operation]] = {
    arith.AddiOp: llvm.AddOp,
    arith.SubiOp: llvm.SubOp,
    arith.MuliOp: llvm.MulOp,
    arith.DivSIOp: llvm.SDivOp,
    arith.DivUIOp: llvm.UDivOp,
    arith.RemSIOp: llvm.SRemOp,
    arith.RemUIOp: llvm.URemOp,
    arith.AndIOp: llvm.AndOp,
    arith.OrIOp: llvm.OrOp,
    arith.XOrIOp: llvm.XOrOp,
    arith.ShLIOp: llvm.ShlOp,
    arith.ShRSIOp: llvm.AShrOp,
    arith.ShRUIOp: llvm.LShrOp,
}

_INTRINSIC_BINARY: dict[type[Operation], type[Operation]] = {
    arith.MaxnumfOp: llvm.VectorFMaxOp,
    arith.MinnumfOp: llvm.VectorFMinOp,
}

_CASTS: dict[type[Operation], type[Operation]] = {
    arith.ExtSIOp: llvm.SExtOp,
    arith.ExtUIOp: llvm.ZExtOp,
    arith.TruncIOp: llvm.TruncOp,
    arith.ExtFOp: llvm.FPExtOp,
    arith.TruncFOp: llvm.FPTruncOp,
    arith.BitcastOp: llvm.BitcastOp,
    arith.SIToFPOp: llvm.SIToFPOp,
}
"""The casts: one llvm op of the value and the result type each."""


class BinaryToLLVM(RewritePattern):
    """The binary arithmetic ops and the casts, by the tables above."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        t = type(op)
        if t in _FLOAT_BINARY:
            new = _FLOAT_BINARY[t](op.operands[0], op.operands[1], _fastmath(op))
        elif t in _INT_BINARY:
            new = _INT_BINARY[t](op.operands[0], op.operands[1])
        elif t in _INTRINSIC_BINARY:
            new = _INTRINSIC_BINARY[t](op.operands[0], op.operands[1])
        elif t in _CASTS:
            new = _CASTS[t](op.operands[0], op.results[0].type)
        else:
            return
        rewriter.replace(op, new)


class NegfToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.NegfOp, rewriter: PatternRewriter, /):
        rewriter.replace(op, llvm.FNegOp(op.operand, _fastmath(op)))


class CmpfToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpfOp, rewriter: PatternRewriter, /):
        pred = IntegerAttr(op.predicate.value.data, i64)
        rewriter.replace(op, llvm.FCmpOp(op.lhs, op.rhs, pred))


class CmpiToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.CmpiOp, rewriter: PatternRewriter, /):
        pred = IntegerAttr(op.predicate.value.data, i64)
        rewriter.replace(op, llvm.ICmpOp(op.lhs, op.rhs, pred))


class SelectToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter, /):
        rewriter.replace(op, llvm.SelectOp(op.cond, op.lhs, op.rhs))


class ConstantToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter, /):
        if isinstance(op.value, IntegerAttr | FloatAttr | DenseIntOrFPElementsAttr):
            rewriter.replace(op, llvm.ConstantOp(op.value, op.result.type))


class FPToSIToLLVM(RewritePattern):
    """No llvm.fptosi in xDSL: the saturating intrinsic `llvm.fptosi.sat.<int>.<float>`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.FPToSIOp, rewriter: PatternRewriter, /):
        src, dst = op.input.type, op.result.type
        if not (isinstance(src, AnyFloat) and isinstance(dst, IntegerType)):
            return  # vectors: not yet
        name = f"llvm.fptosi.sat.i{dst.width.data}.f{src.bitwidth}"
        rewriter.replace(op, llvm.CallIntrinsicOp(name, [op.input], [dst]))


ARITH_TO_LLVM_PATTERNS = (
    BinaryToLLVM,
    NegfToLLVM,
    CmpfToLLVM,
    CmpiToLLVM,
    SelectToLLVM,
    ConstantToLLVM,
    FPToSIToLLVM,
)


@dataclass(frozen=True)
class ConvertArithToLLVMPass(ModulePass):
    name = "convert-arith-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([p() for p in ARITH_TO_LLVM_PATTERNS]),
            apply_recursively=False,
        ).rewrite_module(op)
