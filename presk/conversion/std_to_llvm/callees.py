"""Declarations of what a module calls and does not define: a `llvm.call` must name a
symbol of the module (xDSL verifies it), and LLVM resolves a declared one at link time —
the math library's functions (`declare_all` of presk/emit/mathlib_llvm.py then replaces
their declarations by definitions), the C library's `malloc`/`free`, `pthread_*`."""

from __future__ import annotations

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import ModuleOp


def declare_external_callees(module: ModuleOp) -> list[str]:
    """Append an external `llvm.func` declaration for every callee of a `llvm.call` that
    the module neither defines nor declares; the names declared."""
    have = {f.sym_name.data for f in module.ops if isinstance(f, (func.FuncOp, llvm.FuncOp))}
    calls: dict[str, llvm.LLVMFunctionType] = {}
    for c in module.walk():
        if isinstance(c, llvm.CallOp) and c.callee is not None:
            out = c.returned.type if c.returned is not None else llvm.LLVMVoidType()
            calls[c.callee.string_value()] = llvm.LLVMFunctionType([a.type for a in c.args],
                                                                   out)
    names = sorted(set(calls) - have)
    for name in names:
        module.body.block.add_op(llvm.FuncOp(name, calls[name],
                                             linkage=llvm.LinkageAttr("external")))
    return names
