"""convert-cf-to-llvm: `cf.br` → `llvm.br`, `cf.cond_br` → `llvm.cond_br`.

Successors and their operands are kept as they are (block arguments become phis when
`convert_module` translates them). `cf.switch` and `cf.assert` are not converted: xDSL's
llvm dialect has no `llvm.switch`.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import cf, llvm
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriter,
    PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern)


class BranchToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.BranchOp, rewriter: PatternRewriter, /):
        rewriter.replace(op, llvm.BrOp(op.successor, *op.arguments))


class CondBranchToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.ConditionalBranchOp, rewriter: PatternRewriter, /):
        rewriter.replace(
            op,
            llvm.CondBrOp(
                op.cond, op.then_block, op.then_arguments, op.else_block, op.else_arguments
            ),
        )


@dataclass(frozen=True)
class ConvertCfToLLVMPass(ModulePass):
    name = "convert-cf-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([BranchToLLVM(), CondBranchToLLVM()]),
            apply_recursively=False,
        ).rewrite_module(op)
