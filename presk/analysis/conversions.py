"""The narrowing conversions of a recorded entry: which value is read in a narrower type
than it is stored in, by which op (docs/precision.md, rules `cond` and the solver's
estimate).

convert-psk-core-to-realize makes every change of type an explicit `psk_realize.convert`
under the site of the op that reads it (or, for a bf16 value's own store, under that
value's site). A convert that narrows rounds: the value it reads carries a rounding
error of up to u(type)·|value| into its reader. This pass walks the recording and names,
for each such convert, the reader and the value read — traced back through the
instances' arguments to a site of the caller (a call's operand, a fold's accumulator or
the value its body returns), a parameter path, or an input of the entry — so that each
rule charges it where it happens, whatever carried the value there (a call's result, a
fold's accumulator, a function's argument).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block, BlockArgument, Operation, SSAValue

from ..dialects import realize as R


@dataclass(frozen=True)
class ConvertedRead:
    """`reader` reads `value` (a site, a parameter path or an input's path, by `kind`)
    converted from `source` to `to` (narrower: a rounding; wider: exact)."""

    reader: str
    value: str
    kind: str  # "site", "param", "input" or "" (not traced)
    source: str
    to: str
    narrows: bool  # the convert's direction (psk_realize.convert's `widening`, negated)


def element(t) -> str:
    from .kernel_interpret import element_name
    return element_name(t.element)


def narrowing_reads(module, param_paths: set[str]) -> list[ConvertedRead]:
    """Every narrowing convert of the recording that is a read (not a bf16 value's own
    store), once per (reader, value, type), in the module's order. `param_paths`: the
    entry's parameter paths (`blocks.proj.w`), to tell its parameter leaves from its
    inputs."""
    return [r for r in converted_reads(module, param_paths) if r.narrows]


def converted_reads(module, param_paths: set[str],
                    results: bool = False) -> list[ConvertedRead]:
    """Every convert of the recording that is a read, narrowing or widening (a narrowed
    parameter widened for an f64 reader), once per (reader, value, type, direction), in
    the module's order: what the solver's joint moves pair (a value with the readers its
    narrowing makes convert it). `results`: a call's or fold's result traced on to what
    its callee returns (the stored value it carries), not left at the call's site."""
    tracer = _Tracer(module, param_paths, results)
    out: dict[tuple[str, str, str, bool], ConvertedRead] = {}
    for func in R.funcs(module):
        for op in func.walk():
            if not isinstance(op, R.ConvertOp):
                continue
            reader = op.site.data  # type: ignore[attr-defined]
            for kind, value in tracer.origins(op.operand):
                if kind == "site" and value == reader:
                    continue  # a bf16 value's own store: the value's rounding, not a read
                read = ConvertedRead(reader, value, kind, element(op.operand.type),
                                     element(op.result.type), not op.widening)
                out.setdefault((reader, value, read.to, read.narrows), read)
    return list(out.values())


class _Tracer:
    """Where a value of the recording comes from: the site that computed it, or — for an
    instance's argument — what every call and fold passes there."""

    def __init__(self, module, param_paths: set[str], results: bool = False) -> None:
        self.param_paths, self.results = param_paths, results
        self.funcs = {f.func_name: f for f in R.funcs(module)}
        self.entry = R.entry_func(module)
        self.callers: dict[str, list[Operation]] = {}
        for f in self.funcs.values():
            for op in f.walk():
                if isinstance(op, (R.CallOp, R.FoldOp)):
                    self.callers.setdefault(op.callee_name, []).append(op)

    def origins(self, value: SSAValue, seen: frozenset = frozenset()) -> set[tuple[str, str]]:
        if isinstance(value, BlockArgument):
            return self._argument(value, seen)
        owner = value.owner
        if isinstance(owner, R.SliceOp):  # one iteration's slice of a stacked parameter
            return self.origins(owner.operands[0], seen)
        if isinstance(owner, R.ConvertOp):
            return self.origins(owner.operand, seen)
        if self.results and isinstance(owner, (R.CallOp, R.FoldOp)):
            return self._result(value, owner, seen)
        if "site" in owner.attributes:
            return {("site", owner.attributes["site"].data)}  # type: ignore[attr-defined]
        return {("", "")}

    def _result(self, value: SSAValue, call: Operation,
                seen: frozenset) -> set[tuple[str, str]]:
        """What the callee returns as this result of `call` (a fold's accumulator, or one
        of its stacked results)."""
        func = self.funcs.get(call.callee_name)  # type: ignore[attr-defined]
        index = value.index  # type: ignore[attr-defined]
        if isinstance(call, R.FoldOp):
            index = call.acc_index if index == 0 else call.stack_list[index - 1]
        key = ("result", call.callee_name, index)  # type: ignore[attr-defined]
        if func is None or key in seen:
            return {("", "")}
        ret = func.body.block.last_op
        return self.origins(ret.operands[index], seen | {key})

    def _argument(self, arg: BlockArgument, seen: frozenset) -> set[tuple[str, str]]:
        block = arg.owner
        func = block.parent_op() if isinstance(block, Block) else None
        if not isinstance(func, R.FuncOp):  # a group's input: what the group reads
            group = func
            return self.origins(group.operands[arg.index], seen) if group is not None \
                else {("", "")}
        name = func.arg_name_list[arg.index]
        if func is self.entry:
            path = name.partition(".")[2]
            return {("param", path)} if path in self.param_paths else {("input", name)}
        key = (func.func_name, arg.index)
        if key in seen:
            return set()
        seen = seen | {key}
        out: set[tuple[str, str]] = set()
        for call in self.callers.get(func.func_name, []):
            operands = list(call.operands)
            out |= self.origins(operands[arg.index], seen)
            if isinstance(call, R.FoldOp) and arg.index == len(operands) - 1:
                # the accumulator: the first iteration's is the fold's, the others' what
                # the body returned
                ret = func.body.block.last_op
                out |= self.origins(ret.operands[0], seen)
        return out or {("", "")}


def input_sites(core_module, entry: str) -> dict[str, str]:
    """The entry's inputs by path (`batch.0`) → the site of the Core op that unpacks it
    (`loss/%2`, `x = batch.0`): where the envelope and the sensitivities know the value."""
    from ..dialects import core as C
    func = next(op for op in core_module.ops
                if isinstance(op, C.FuncOp) and op.sym_name.data == entry)
    names = {arg: name for arg, name in zip(func.body.block.args, func.arg_name_list)}
    out: dict[str, str] = {}
    for op in func.body.block.ops:
        if isinstance(op, C.GetOp) and op.operand in names:
            path = f"{names[op.operand]}.{op.index.value.data}"
            names[op.result] = path
            out[path] = op.site.data
    return out
