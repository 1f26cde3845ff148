"""convert-func-to-llvm: `func.func` → `llvm.func`, `func.return` → `llvm.return`,
`func.call` → `llvm.call`.

Every function gets EXTERNAL linkage: `llvm.FuncOp` defaults to internal, and O2 deletes an
internal function nobody calls — the entry points we call through ctypes. The body region is
moved as it is; argument attributes (`llvm.noalias`, …) are carried over, since
`convert_module` reads them from `arg_attrs`. A function without body becomes a
declaration. LLVM functions return at most one value: a function or call with two or more
results is refused (a `DiagnosticException` naming it).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Attribute, Region
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriter,
    PatternRewriteWalker, RewritePattern, op_type_rewrite_pattern)
from xdsl.utils.exceptions import DiagnosticException


def _result_type(outputs: tuple[Attribute, ...] | list[Attribute], what: str) -> Attribute:
    if len(outputs) > 1:
        raise DiagnosticException(
            f"convert-func-to-llvm: {what} returns {len(outputs)} values; LLVM allows one"
        )
    return outputs[0] if outputs else llvm.LLVMVoidType()


def llvm_function_type(ft: FunctionType, what: str) -> llvm.LLVMFunctionType:
    return llvm.LLVMFunctionType(ft.inputs.data, _result_type(ft.outputs.data, what))


class FuncToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.FuncOp, rewriter: PatternRewriter, /):
        name = op.sym_name.data
        body = Region()
        op.body.move_blocks(body)
        new = llvm.FuncOp(
            name,
            llvm_function_type(op.function_type, f"@{name}"),
            linkage=llvm.LinkageAttr("external"),
            body=body,
        )
        if op.arg_attrs is not None:
            new.arg_attrs = op.arg_attrs
        if op.res_attrs is not None:
            new.res_attrs = op.res_attrs
        rewriter.replace(op, new)


class ReturnToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.ReturnOp, rewriter: PatternRewriter, /):
        if len(op.arguments) > 1:
            raise DiagnosticException("convert-func-to-llvm: func.return of several values")
        rewriter.replace(op, llvm.ReturnOp(op.arguments[0] if op.arguments else None))


class CallToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: func.CallOp, rewriter: PatternRewriter, /):
        name = op.callee.string_value()
        types = op.result_types
        _result_type(types, f"call of @{name}")
        call = llvm.CallOp(name, *op.arguments, return_type=types[0] if types else None)
        rewriter.replace(op, call, [call.returned] if types else [])


@dataclass(frozen=True)
class ConvertFuncToLLVMPass(ModulePass):
    name = "convert-func-to-llvm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([FuncToLLVM(), ReturnToLLVM(), CallToLLVM()]),
            apply_recursively=False,
        ).rewrite_module(op)
