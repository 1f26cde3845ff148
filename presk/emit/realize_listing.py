"""The PSK-Realize listing and the fusion report: what `presk dump --stage realize` prints
(§7 of the reference).

(a) The instances, like the Core listing but with concrete types and the float type of
    every value (`f32[batch: 4, model: 4]`), every `convert` and every group visible:

    fn RMSNorm.apply_2 = RMSNorm.apply{D = 4}(θ.γ : bf16[4], x : f64[batch: 4, model: 4]) -> f32[batch: 4, model: 4] {
      x_f32 : f32[batch: 4, model: 4] = convert x
      %3 : f32[batch: 4, model: 4] = pow 2 x_f32
      …
      %7 : f32[batch: 4] = group(ms, %5_f32) {
        %6 : f32[batch: 4] = add i0, i1
        %7 : f32[batch: 4] = sqrt %6
      }

    A value is named as in the Core listing (its source name, else `%n` of its site); a
    conversion is its operand's name and its type (`x_f32`), a slice its operand's and
    iteration (`θ.blocks.norm.γ[0]`), a group's inputs `i0, i1, …`. A fold prints the
    iterations it runs, both ends included: `fold 1..2 Block.apply(…)`.
(b) The groups of each Core function (`fn RMSNorm.apply — 8 lets, 2 groups, 2 launches
    saved`, `%7 = add(i0,i1);sqrt(s0) [2 inputs, 2 steps]`) and the launch count of one
    call with and without fusion.
(c) Why each element-wise value reaches memory, in the Core listing's words.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from presk.dialects import realize as R
from presk.dialects.realize import rtype_text
from presk.emit.core_listing import format_float


# --------------------------------------------------------------------------------------
# Names
# --------------------------------------------------------------------------------------


def _site_number(op: Operation) -> str:
    site = op.attributes.get("site")
    return site.data.rsplit("/", 1)[-1] if site is not None else "%?"  # type: ignore[attr-defined]


class Names:
    """The listing's name of every value of one instance, unique within it."""

    def __init__(self, func: R.FuncOp):
        self.names: dict[SSAValue, str] = {}
        self.taken: set[str] = set()
        for name, arg in zip(func.arg_name_list, func.args):
            self._give(arg, name)
        self._block(func.body.block)

    def _give(self, value: SSAValue, base: str) -> None:
        name, k = base, 2
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        self.names[value] = name

    def _block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, R.FusedOp):
                for i, arg in enumerate(op.body.block.args):
                    self.names[arg] = f"i{i}"
                # The steps are named by their sites; the group takes its root's name.
                for step in op.steps:
                    self.names[step.results[0]] = self._base(step)
            for k, r in enumerate(op.results):
                base = self._base(op)
                self._give(r, base if len(op.results) == 1 else f"{base}.{k}")

    def _base(self, op: Operation) -> str:
        if isinstance(op, R.ConvertOp):
            return f"{self.names.get(op.operand, '?')}_{R.element_name(op.result.type)}"
        if isinstance(op, R.SliceOp):
            return f"{self.names.get(op.operand, '?')}[{op.position}]"
        name = op.attributes.get("name")
        if name is not None:
            return name.data  # type: ignore[attr-defined]
        return _site_number(op)

    def __getitem__(self, value: SSAValue) -> str:
        return self.names.get(value, "?")


# --------------------------------------------------------------------------------------
# (a) the instances
# --------------------------------------------------------------------------------------


def _mnemonic(op: Operation) -> str:
    return op.name.split(".", 1)[1]


def _fused(op: Operation) -> str:
    """A contraction the realization fuses (its `fma`): ` (fma)`."""
    return " (fma)" if "fma" in op.attributes else ""


def _rhs(op: Operation, n: Names) -> str:
    if isinstance(op, R.PowIOp):
        return f"pow {op.exponent} {n[op.operand]}"
    if isinstance(op, R.HeavisideOp):
        return f"heaviside(at 0 = {format_float(op.at_zero_value)}) {n[op.operand]}"
    if isinstance(op, (R.UnaryOp, R.ConvertOp)):
        return f"{_mnemonic(op)} {n[op.operand]}"
    if isinstance(op, (R.BinaryOp, R.DotOp)):
        return f"{_mnemonic(op)} {n[op.lhs]}, {n[op.rhs]}{_fused(op)}"
    if isinstance(op, (R.ReduceOp, R.SoftmaxOp)):
        axis = op.axis_name.data if op.axis_name is not None else \
            (f"{op.axis_index}" if op.axis_index is not None else None)
        over = f" axis {axis}" if axis is not None else ""
        return f"{_mnemonic(op)}{over} {n[op.operand]}"
    if isinstance(op, R.ContractOp):
        lhs, rhs, perm = op.axes
        extra = f", perm {perm}" if perm is not None else ""
        return f"contract {n[op.lhs]} {lhs}, {n[op.rhs]} {rhs}{extra}{_fused(op)}"
    if isinstance(op, R.SumToOp):
        return f"sum_to {n[op.operand]} keeping {op.kept}"
    if isinstance(op, R.SpreadOp):
        mean = " mean" if op.mean is not None else ""
        return f"spread{mean} {n[op.operand]} like {n[op.like]} at {op.place_list}"
    if isinstance(op, R.BroadcastOp):
        return f"broadcast {n[op.operand]} at {op.place_list}"
    if isinstance(op, R.ConstantOp):
        return format_float(op.number)
    if isinstance(op, R.SliceOp):
        return f"slice {n[op.operand]} at {op.position}"
    if isinstance(op, R.CallOp):
        return f"call {op.callee_name}(" + ", ".join(n[a] for a in op.arguments) + ")"
    if isinstance(op, R.FoldOp):
        start, stop = op.bounds
        stacked = ", ".join(n[s] for s in op.stacked)
        span = f"{stop - 1} down to {start}" if op.reverse is not None else f"{start}..{stop - 1}"
        kept = f", stacking results {op.stack_list}" if op.stacks is not None else ""
        acc = f" as result {op.acc_index}" if op.acc_result is not None else ""
        return f"fold {span} {op.callee_name}(stacked {stacked}; acc {n[op.acc]}{acc}{kept})"
    if isinstance(op, R.FusedOp):
        return f"{_mnemonic(op)}(" + ", ".join(n[v] for v in op.inputs) + ")"
    return op.name


def _lines(block: Block, n: Names, indent: str) -> list[str]:
    out = []
    for op in block.ops:
        if isinstance(op, R.ReturnOp):
            out.append(indent + "return " + ", ".join(n[v] for v in op.values))
            continue
        if isinstance(op, R.YieldOp):
            continue
        names = ", ".join(n[r] for r in op.results)
        types = ", ".join(rtype_text(r.type) for r in op.results)
        line = f"{indent}{names} : {types} = {_rhs(op, n)}"
        if isinstance(op, R.FusedOp):
            out.append(line + " {")
            out += _lines(op.body.block, n, indent + "  ")
            out.append(indent + "}")
        else:
            out.append(line)
    return out


def _dims_text(dims: dict[str, int]) -> str:
    return "{" + ", ".join(f"{k} = {v}" for k, v in dims.items()) + "}" if dims else ""


def format_instance(func: R.FuncOp, runs: int | None = None) -> str:
    n = Names(func)
    args = ", ".join(f"{name} : {rtype_text(a.type)}"
                     for name, a in zip(func.arg_name_list, func.args))
    results = ", ".join(rtype_text(t) for t in func.output_types)
    head = f"fn {func.func_name} = {func.source_func}{_dims_text(func.dim_values)}({args}) " \
        f"-> {results} {{"
    lines = []
    if runs is not None:
        lines.append(f"-- {runs} call{'s' * (runs != 1)} of this recording per call of the "
                     "entry" + (" (the entry)" if func.entry is not None else ""))
    lines.append(head)
    lines += _lines(func.body.block, n, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def format_instances(module: ModuleOp) -> str:
    runs = R.instance_runs(module)
    return "\n".join(format_instance(f, runs[f.func_name]) for f in R.funcs(module))


# --------------------------------------------------------------------------------------
# (b) the groups and the launch counts
# --------------------------------------------------------------------------------------


def launches(module: ModuleOp) -> tuple[int, int]:
    """(without fusion, with it): the compute ops one call of the entry executes, a group
    counting its steps without fusion and once with it."""
    runs = R.instance_runs(module)
    without = with_ = 0
    for f in R.funcs(module):
        for op in f.body.block.ops:
            if R.is_compute(op):
                with_ += runs[f.func_name]
                steps = len(op.steps) if isinstance(op, R.FusedOp) else 1
                without += runs[f.func_name] * steps
    return without, with_


def group_text(group: R.FusedOp, n: Names) -> str:
    """`%7 = add(i0,i1);sqrt(s0) [2 inputs, 2 steps]`"""
    local: dict[SSAValue, str] = {a: f"i{i}" for i, a in enumerate(group.body.block.args)}
    parts = []
    for k, step in enumerate(group.steps):
        operands = [o for o in step.operands
                    if not (isinstance(step, R.SpreadOp) and o is step.like)]
        mn = f"pow {step.exponent}" if isinstance(step, R.PowIOp) else _mnemonic(step)
        parts.append(f"{mn}(" + ",".join(local.get(o, "?") for o in operands) + ")")
        local[step.results[0]] = f"s{k}"
    k = len(group.inputs)
    s = len(group.steps)
    return (f"{n[group.results[0]]} = " + ";".join(parts) +
            f" [{k} input{'s' * (k != 1)}, {s} step{'s' * (s != 1)}]")


def _primary(module: ModuleOp) -> list[R.FuncOp]:
    """One instance per Core function, the one that runs most (the plain name)."""
    seen: dict[str, R.FuncOp] = {}
    runs = R.instance_runs(module)
    for f in R.funcs(module):
        best = seen.get(f.source_func)
        if best is None or runs[f.func_name] > runs[best.func_name]:
            seen[f.source_func] = f
    return list(seen.values())


def _plural(k: int, word: str) -> str:
    if k == 1:
        return f"{k} {word}"
    return f"{k} {word}es" if word.endswith(("s", "sh", "ch", "x")) else f"{k} {word}s"


def format_groups(module: ModuleOp, core: ModuleOp | None = None,
                  order: Iterable[str] | None = None) -> str:
    """(b): per Core function, its groups; then the launches of one call."""
    funcs = _ordered(_primary(module), order)
    core_funcs = _core_funcs(core)
    blocks = []
    total_groups = total_fused = 0
    for f in funcs:
        groups = [op for op in f.body.block.ops if isinstance(op, R.FusedOp)]
        if not groups:
            continue
        n = Names(f)
        saved = sum(len(g.steps) - 1 for g in groups)
        total_groups += len(groups)
        total_fused += saved
        cf = core_funcs.get(f.source_func)
        lets = (f"{_plural(sum(1 for o in cf.body.block.ops if o.results), 'let')}, "
                if cf is not None else "")
        lines = [f"fn {f.source_func} — {lets}{_plural(len(groups), 'group')}, "
                 f"{_plural(saved, 'launch')} saved"]
        lines += ["  " + group_text(g, n) for g in groups]
        blocks.append("\n".join(lines))
    head = (f"In the functions {R.entry_func(module).source_func} reaches, "
            f"{_plural(total_groups, 'group')}, {total_fused} let"
            f"{'s' * (total_fused != 1)} fused away:")
    without, with_ = launches(module)
    products = R.epilogue_count(module)
    adds = all(isinstance(R.epilogue_of(op), R.AddOp) for f in R.funcs(module)
               for op in f.body.block.ops if R.epilogue_of(op) is not None)
    reader = "the `add`" if adds else "the element-wise op or group"
    tail = f"Over one call, fusion takes {without} launches to {with_ - products}" + (
        f" ({_plural(products, 'product')} launched with {reader} that alone reads "
        f"{'it' if products == 1 else 'them'} as {'its' if products == 1 else 'their'} "
        "epilogue)." if products else ".")
    return "\n".join([head, "", *blocks, "", tail]) + "\n"


def _ordered(funcs: list[R.FuncOp], order: Iterable[str] | None) -> list[R.FuncOp]:
    if order is None:
        return funcs
    rank = {name: i for i, name in enumerate(order)}
    return sorted(funcs, key=lambda f: rank.get(f.source_func, len(rank)))


def _core_funcs(core: ModuleOp | None) -> dict:
    if core is None:
        return {}
    from presk.dialects import core as C
    return {op.sym_name.data: op for op in core.ops if isinstance(op, C.FuncOp)}


# --------------------------------------------------------------------------------------
# (c) why each element-wise value reaches memory
# --------------------------------------------------------------------------------------


def _core_line(core_funcs: dict, site: str) -> str | None:
    fn = site.rsplit("/", 1)[0]
    cf = core_funcs.get(fn)
    if cf is None:
        return None
    from presk.emit.core_listing import format_op
    for op in cf.body.block.ops:
        s = op.attributes.get("site")
        if s is not None and s.data == site and op.results:
            return format_op(op)
    return None


def _reading_site(reader: Operation, value: SSAValue) -> str | None:
    """The site of the op that reads `value`: inside a group, the step reading the input."""
    if isinstance(reader, R.FusedOp):
        for i, v in enumerate(reader.inputs):
            if v is value or (isinstance(v.owner, R.ConvertOp) and v.owner.operand is value):
                arg = reader.body.block.args[i]
                for step in reader.steps:
                    if arg in step.operands:
                        return step.attributes["site"].data  # type: ignore[attr-defined]
    site = reader.attributes.get("site")
    return site.data if site is not None else None  # type: ignore[attr-defined]


def memory_rows(module: ModuleOp, core: ModuleOp | None = None,
                order: Iterable[str] | None = None, limit: int = 8) -> list[tuple[str, str, str, str]]:
    """(value's site, its Core line, alone / ends a group of N, why), one row per site."""
    from presk.transforms.fuse import fusion_notes
    core_funcs = _core_funcs(core)
    funcs = _ordered(_primary(module), order)
    wanted = {f.func_name for f in funcs}
    rank = {f.func_name: i for i, f in enumerate(funcs)}
    rows: list[tuple[int, int, tuple[str, str, str, str]]] = []
    seen: set[str] = set()
    for note in fusion_notes(module, limit):
        if note.instance not in wanted or note.site in seen:
            continue
        seen.add(note.site)
        why = note.reason
        if note.reader is not None:
            reading = _reading_site(note.reader, note.op.results[0])
            line = _core_line(core_funcs, reading) if reading else None
            who = line if line is not None else (reading or note.reader.name)
            sep = ", " if why.startswith(("of another", "in another")) else ": "
            why = f"read by {who}{sep}{why}"
        line = _core_line(core_funcs, note.site) or ""
        number = int(note.site.rsplit("%", 1)[-1]) if note.site.rsplit("%", 1)[-1].isdigit() else 0
        rows.append((rank[note.instance], number, (note.site, line, note.status, why)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [r[2] for r in rows]


def format_memory_table(module: ModuleOp, core: ModuleOp | None = None,
                        order: Iterable[str] | None = None, limit: int = 8) -> str:
    rows = [("Value", "Line", "", "Reaches memory because"),
            *memory_rows(module, core, order, limit)]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    out = []
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + "  " + r[3])
    return "\n".join(line.rstrip() for line in out) + "\n"


def format_report(module: ModuleOp, core: ModuleOp | None = None,
                  order: Iterable[str] | None = None, limit: int = 8) -> str:
    """(a), (b) and (c), as `presk dump --stage realize` prints them."""
    return "\n".join([
        format_instances(module),
        format_groups(module, core, order),
        "Where each group ends, and why each element-wise value outside a group is alone: "
        "what reads it.\n",
        format_memory_table(module, core, order, limit),
    ])
