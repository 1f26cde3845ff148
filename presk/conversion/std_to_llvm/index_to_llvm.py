"""convert-index-to-llvm: the `index` type → `i64` everywhere (the host is 64-bit).

`convert_module` has no translation of `index`, so every occurrence goes: op results,
block arguments (loop counters that became phis), the signatures of `func.func` and
`llvm.func`, the values of `arith.constant`/`llvm.mlir.constant`, vectors of index.
`arith.index_cast` then casts i64 to an integer type: to i64 it vanishes, to a narrower
one it is `arith.trunci`, to a wider one `arith.extsi` (lowered by convert-arith-to-llvm, so this pass runs first). Types are mapped by
`isinstance`, not `TypeConversionPattern` (slow, see docs/llvm.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import (FunctionType, IndexType, IntegerAttr, IntegerType,
    ModuleOp, VectorType, i64)
from xdsl.ir import Attribute, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriter,
    PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern)


def lower_type(t: Attribute) -> Attribute:
    """`index` → `i64`, a vector of index → a vector of i64; any other type unchanged."""
    if isinstance(t, IndexType):
        return i64
    if isinstance(t, VectorType) and isinstance(t.element_type, IndexType):
        return VectorType(i64, t.get_shape())
    return t


def _lower_types(ts) -> list[Attribute]:
    return [lower_type(t) for t in ts]


class IndexTypesToI64(RewritePattern):
    """Any op: its result types, its regions' block argument types, its signature."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        for res in list(op.results):
            if (t := lower_type(res.type)) is not res.type:
                rewriter.replace_value_with_new_type(res, t)
        for region in op.regions:
            for block in region.blocks:
                for arg in list(block.args):
                    if (t := lower_type(arg.type)) is not arg.type:
                        rewriter.replace_value_with_new_type(arg, t)
        if isinstance(op, func.FuncOp):
            ft = op.function_type
            new = FunctionType.from_lists(_lower_types(ft.inputs), _lower_types(ft.outputs))
            if new != ft:
                op.function_type = new
                rewriter.notify_op_modified(op)
        elif isinstance(op, llvm.FuncOp):
            ft = op.function_type
            new = llvm.LLVMFunctionType(
                _lower_types(ft.inputs), lower_type(ft.output), ft.is_variadic
            )
            if new != ft:
                op.function_type = new
                rewriter.notify_op_modified(op)
        elif isinstance(op, (arith.ConstantOp, llvm.ConstantOp)):
            v = op.value
            if isinstance(v, IntegerAttr) and isinstance(v.type, IndexType):
                op.value = IntegerAttr(v.value.data, i64)
                rewriter.notify_op_modified(op)


class IndexCastToInteger(RewritePattern):
    """After the types are i64: a cast to the same width vanishes, else trunc/ext."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.IndexCastOp, rewriter: PatternRewriter, /):
        _cast(op, op.input, op.result, rewriter=rewriter)


def _cast(op, inp, res, *, rewriter: PatternRewriter) -> None:
    src, dst = lower_type(inp.type), lower_type(res.type)
    if not (isinstance(src, IntegerType) and isinstance(dst, IntegerType)):
        return  # vectors, or the types not lowered yet: the walker comes back
    if src.width.data == dst.width.data:
        rewriter.replace(op, [], [inp])
    elif src.width.data > dst.width.data:
        rewriter.replace(op, arith.TruncIOp(inp, dst))
    else:
        rewriter.replace(op, arith.ExtSIOp(inp, dst))


@dataclass(frozen=True)
class ConvertIndexToLLVMPass(ModulePass):
    name = "convert-index-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier(
                [IndexCastToInteger(), IndexTypesToI64()]
            ),
        ).rewrite_module(op)
