"""psk-realize-drop-unread: what no one reads leaves a recorded gradient.

A fold's forward sweep recorded as a loop (convert-psk-core-to-realize's `fold_fwd`)
stacks every result of the step's `.fwd`, its accumulator too, and hands the stacks to
the reverse loop through the instances' results and arguments; the step's `.bwd` reads
some of them only (never the accumulator). Kept, such a stack is written each iteration
and never read: memory the placed arena must hold (test_memory's arena = peak claims).

Over the instances of a PSK-Realize module, to a fixed point, for the values that are a
fold's stacks (its stacked results and what carries them between instances, calls'
results and instances' arguments and results: `_stack_values`):

* an instance's argument nothing in it reads, where a caller passes a stack, goes, with
  the operand every caller passes there (a fold's accumulator stays);
* an instance's result no caller reads, where a caller takes it as a stack, goes (for a
  fold caller: the fold stacks it no more);
* the op making a value dropped so is erased when nothing else reads it, and so on up.

The other unread values of a recording (a `.bwd`'s residual 0, which is the value) stay
as they are, so a recording without a fold's loop is left unchanged.
The entry instance keeps its signature (its arguments and results are the caller's).
No value that is read changes, so no bit changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, FunctionType, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from presk.dialects import realize as R

Caller = R.CallOp | R.FoldOp


def drop_unread(module: ModuleOp) -> None:
    """Drop the unread stacks of the module's instances, in place."""
    changed = True
    while changed:
        changed = False
        stacks = _stack_values(module, _callers(module))
        for func in R.funcs(module):
            # the callers afresh: a drop rebuilds some, and may erase others
            callers = _callers(module).get(func.func_name)
            if func.entry is None and callers:
                changed |= _drop_arguments(func, callers, stacks)
                callers = _callers(module)[func.func_name]
                changed |= _drop_results(func, callers, stacks)
        for fold in [op for c in _callers(module).values() for op in c
                     if isinstance(op, R.FoldOp)]:
            changed |= _drop_accumulator_stack(fold)


def _drop_accumulator_stack(fold: R.FoldOp) -> bool:
    """A fold's stack of its accumulator (a copy of each iteration's) nothing reads."""
    k = fold.acc_index
    if k not in fold.stack_list or fold.res[1 + fold.stack_list.index(k)].uses:
        return False
    _without_stack(fold, k)
    return True


def _callers(module: ModuleOp) -> dict[str, list[Caller]]:
    out: dict[str, list[Caller]] = {}
    for func in R.funcs(module):
        for op in func.body.block.ops:
            if isinstance(op, (R.CallOp, R.FoldOp)):
                out.setdefault(op.callee_name, []).append(op)
    return out


def _stack_values(module: ModuleOp, callers: dict[str, list[Caller]]) -> set[SSAValue]:
    """The values that are a fold's stacks or come from one: its stacked results, and
    what carries them (an instance's result returning one, the callers' result there; an
    instance's argument a caller passes one). Only where one of these takes part is
    anything dropped: a recording without a fold's loop is left as it is."""
    funcs = {f.func_name: f for f in R.funcs(module)}
    out: set[SSAValue] = {r for f in funcs.values() for op in f.body.block.ops
                          if isinstance(op, R.FoldOp) for r in list(op.res)[1:]}
    changed = True
    while changed:
        size = len(out)
        for name, f in funcs.items():
            ret = f.body.block.last_op
            assert isinstance(ret, R.ReturnOp)
            for c in callers.get(name, []):
                if isinstance(c, R.CallOp):
                    out.update(r for v, r in zip(ret.values, c.res) if v in out)
            if callers.get(name):
                out.update(a for j, a in enumerate(f.args)
                           if any(c.operands[j] in out for c in callers[name]))
        changed = len(out) != size
    return out


def _drop_arguments(func: R.FuncOp, callers: list[Caller], stacks: set[SSAValue]) -> bool:
    """The stack arguments nothing reads, and what the callers pass there."""
    changed = False
    for j in reversed(range(len(func.args))):
        if func.args[j] not in stacks or func.args[j].uses or not all(
                isinstance(c, R.CallOp) or j < len(c.operands) - 1 for c in callers):
            continue
        for c in callers:
            passed = c.operands[j]
            c.operands = [v for i, v in enumerate(c.operands) if i != j]
            _erase_if_unread(passed)
        func.body.block.erase_arg(func.args[j])
        names = [n for i, n in enumerate(func.arg_name_list) if i != j]
        func.attributes["arg_names"] = ArrayAttr([StringAttr(n) for n in names])
        _retype(func)
        changed = True
    return changed


def _unread(caller: Caller, k: int) -> bool:
    """Whether nothing reads the caller's value of the callee's result k."""
    if isinstance(caller, R.CallOp):
        return not caller.res[k].uses
    if k == caller.acc_index or k not in caller.stack_list:
        return False
    return not caller.res[1 + caller.stack_list.index(k)].uses


def _as_stack(caller: Caller, k: int, stacks: set[SSAValue]) -> bool:
    """Whether the caller takes the callee's result k as a stack (or what carries one)."""
    if isinstance(caller, R.CallOp):
        return caller.res[k] in stacks
    return k in caller.stack_list


def _drop_results(func: R.FuncOp, callers: list[Caller], stacks: set[SSAValue]) -> bool:
    """The results every caller takes as a stack nothing reads, from the instance and
    from its callers."""
    ret = func.body.block.last_op
    assert isinstance(ret, R.ReturnOp)
    changed = False
    for k in reversed(range(len(ret.values))):
        if not all(_unread(c, k) for c in callers) or \
                not any(_as_stack(c, k, stacks) for c in callers):
            continue
        returned = ret.operands[k]
        ret.operands = [v for i, v in enumerate(ret.operands) if i != k]
        _erase_if_unread(returned)
        _retype(func)
        callers = [_without_result(c, k) for c in callers]
        changed = True
    return changed


def _erase_if_unread(value: SSAValue) -> None:
    """The op making `value` erased when nothing reads it any more, and so on up (every
    PSK-Realize op is pure; an instance is a pure function, so a call or fold is too)."""
    work = [value.owner]
    while work:
        op = work.pop()
        if isinstance(op, Operation) and not isinstance(op, R.ReturnOp) and op.results and \
                not any(r.uses for r in op.results) and op.parent_block() is not None:
            operands = list(op.operands)
            op.parent_block().erase_op(op)
            work += [v.owner for v in operands]


def _without_result(caller: Caller, k: int) -> Caller:
    """The caller rebuilt for a callee without its result k (not read)."""
    if isinstance(caller, R.CallOp):
        keep = [r for i, r in enumerate(caller.res) if i != k]
    else:
        stacks = caller.stack_list
        p = stacks.index(k)
        keep = [r for i, r in enumerate(caller.res) if i != 1 + p]
    attrs = dict(caller.attributes)
    if isinstance(caller, R.FoldOp):
        stacks = [i - (i > k) for i in caller.stack_list if i != k]
        attrs["stacks"] = ArrayAttr([IntegerAttr(i, i64) for i in stacks])
        attrs["acc"] = IntegerAttr(caller.acc_index - (caller.acc_index > k), i64)
    return _rebuilt(caller, keep, attrs)


def _without_stack(fold: R.FoldOp, k: int) -> R.FoldOp:
    """The fold stacking the callee's result k no more (the callee keeps it)."""
    p = fold.stack_list.index(k)
    keep = [r for i, r in enumerate(fold.res) if i != 1 + p]
    attrs = dict(fold.attributes)
    attrs["stacks"] = ArrayAttr([IntegerAttr(i, i64) for i in fold.stack_list if i != k])
    new = _rebuilt(fold, keep, attrs)
    assert isinstance(new, R.FoldOp)
    return new


def _rebuilt(caller: Caller, keep: list[SSAValue], attrs: dict) -> Caller:
    """A copy of the caller with only the results `keep`, which take their uses."""
    new = type(caller).create(operands=list(caller.operands),
                              result_types=[r.type for r in keep], attributes=attrs)
    block = caller.parent_block()
    assert block is not None
    block.insert_op_before(new, caller)
    for old, r in zip(keep, new.results):
        old.replace_all_uses_with(r)
    block.erase_op(caller)
    return new


def _retype(func: R.FuncOp) -> None:
    ret = func.body.block.last_op
    assert isinstance(ret, R.ReturnOp)
    func.attributes["function_type"] = FunctionType.from_lists(
        [a.type for a in func.args], [v.type for v in ret.values])


@dataclass(frozen=True)
class DropUnreadPass(ModulePass):
    """psk-realize-drop-unread: the instances' arguments, results and ops nothing reads
    dropped (see the module's docstring)."""

    name = "psk-realize-drop-unread"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        drop_unread(op)
