"""psk-inline: every `call` of an instance replaced by the callee's body.

Runs before psk-fuse (with --fuse-reductions). Each `psk_realize.call` in an instance is
replaced by a copy of its callee's ops (the callee's arguments mapped to the call's, its
`return` values to the call's results), callees first, so a call inside an inlined body
is inlined too; a `fold`'s callee stays an instance (its iterations run it, the host
keeps its loop), and its own calls are inlined into it. Then the instances no call or
fold of the entry reaches any more are removed.

Why: fusion works within an instance. Across a call the Tower's Block keeps RMSNorm's
scaled row, the gelu reading it, the product x·w + b and the residual add each in
memory; inlined, the gelu joins the RMSNorm reduce_group and the bias and residual adds
become the product's epilogue. Every op keeps its site and its type, and an inlined op
computes what it computed in its callee: the bits do not change.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from presk.dialects import realize as R


def inline_call(call: R.CallOp, callee: R.FuncOp) -> None:
    """Replace `call` by a copy of `callee`'s body."""
    block = callee.body.block
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, call.arguments))
    parent = call.parent_block()
    assert parent is not None
    for op in block.ops:
        if isinstance(op, R.ReturnOp):
            results = [mapping.get(v, v) for v in op.values]
            break
        clone = op.clone(value_mapper=mapping)
        parent.insert_op_before(clone, call)
        for old, new in zip(op.results, clone.results):
            mapping[old] = new
    for old, new in zip(call.res, results):
        old.replace_all_uses_with(new)
    call.detach()
    call.erase()


def reachable(module: ModuleOp) -> set[str]:
    """The instances the entry reaches through calls and folds (the entry's name too)."""
    by_name = {f.func_name: f for f in R.funcs(module)}
    seen: set[str] = set()
    todo = [R.entry_func(module).func_name]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for op in by_name[name].body.block.ops:
            if isinstance(op, (R.CallOp, R.FoldOp)):
                todo.append(op.callee_name)
    return seen


def inline_calls(module: ModuleOp) -> int:
    """psk-inline on `module`; the number of calls inlined."""
    funcs = R.funcs(module)
    by_name = {f.func_name: f for f in funcs}
    count = 0
    for func in funcs:  # callees before callers: a callee's calls are inlined already
        for op in list(func.body.block.ops):
            if isinstance(op, R.CallOp):
                inline_call(op, by_name[op.callee_name])
                count += 1
    keep = reachable(module)
    for func in funcs:
        if func.func_name not in keep:
            func.detach()
            func.erase()
    return count


@dataclass(frozen=True)
class InlinePass(ModulePass):
    """`psk-inline`"""

    name = "psk-inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inline_calls(op)
