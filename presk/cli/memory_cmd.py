"""`presk memory FILE --entry E --dim … [--realize R] [--grad] [--plan P] [--symbolic | --step]`.

What one call of an entry needs in memory, counted from its recorded PSK-Kernel host
(presk/analysis/memory.py), never a process's resident size; `--symbolic` the same as
polynomials in the entry's dims (presk/analysis/memory_symbolic.py). Imported only when
the command runs.

The count itself is the library's (presk/pipeline/memory.py `memory_report`); this module
prints it. Python API: run(args) -> int
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import UsageError, add_plan_argument, add_recording_arguments, reported, warn

if TYPE_CHECKING:
    from ..pipeline.memory import MemoryReport


# ---- printing ----

def _dims_text(dims: dict[str, int]) -> str:
    return ", ".join(f"{k} = {v}" for k, v in dims.items())


def _times(n: int, d: int) -> str:
    return f"{n / d:.2f} times" if d else "—"


def format_count(entry: str, dims: dict[str, int], rep: MemoryReport) -> list[str]:
    c = rep.count
    trace = c.trace
    at = f" at {_dims_text(dims)}" if dims else ""
    planned = ", its kernels in the plan's layouts" if rep.planned else ""
    lines = [f"presk memory: `{entry}`{at} in {rep.realization_name}{planned}: "
             f"{len(trace.steps)} operations, {trace.launches} launches"]
    elems = sum(c.parameter_elements.values())
    per = ", ".join(f"{n} in {t}" for t, n in sorted(c.parameter_elements.items()))
    lines.append(f"  parameters  {c.parameters} bytes: {elems} elements" +
                 (f", {per}" if per else ""))
    lines.append(f"  inputs      {c.inputs} bytes" +
                 (", the parameters among them" if c.parameters else ""))
    s = c.peak_where
    where = f"`{s.site}` in {s.frame.label}"
    if s.frame.parent is not None:
        where += f" (`{s.frame.host.sym_name.data}`)"
    if s.iteration is not None:
        where += f", iteration {s.iteration}"
    lines.append(f"  peak        {c.peak} bytes live, at operation {c.peak_step + 1} of "
                 f"{len(trace.steps)}, {where}")
    lines.append(f"  outputs     {c.outputs} bytes")
    lines.append(f"  needs       {c.needs} bytes: the inputs and the peak")
    base = c.arena_live
    lines.append(f"  native      {rep.native_arena} bytes of arena beside the inputs, "
                 f"{_times(rep.native_arena, base)} the arena's live peak ({base})")
    lines.append(f"  C arena     {rep.c_arena} bytes (`presk export --target c`), "
                 f"{_times(rep.c_arena, base)} it")
    lines.append(f"  placed      {rep.placed} bytes beside the inputs: every buffer at an "
                 f"offset by its life, on a cache line from 64 bytes, a smaller one on the "
                 f"power of two ≥ its size ({_times(rep.placed, base)} the live peak; "
                 f"{rep.rounded_peak} with each buffer in its slot)")
    lines += _format_packing(c, rep)
    lines += _format_boxes(entry, c)
    return lines


def _format_packing(c, rep: MemoryReport) -> list[str]:
    """The launches' packed operands, when some launch packs or a plan is given."""
    p = rep.packing
    if not p.by_kernel:
        return ["  packed      0 bytes: no launch copies an operand beside the arena"] \
            if rep.planned else []
    s = c.trace.steps[p.peak_step]
    kernels = ", ".join(f"{k} {n}" for k, n in p.by_kernel.items())
    return [f"  packed      {p.most} bytes at most in one launch: tiled kernels copy an "
            f"operand j-last beside the arena ({kernels}); with them {p.peak} bytes live "
            f"at operation {p.peak_step + 1} (`{s.site}`), needs {c.inputs + p.peak}"]


def _format_boxes(entry: str, c) -> list[str]:
    rows: list[tuple[str, str, str]] = [(f"`{entry}` itself", str(c.itself), "")]

    def add(boxes, depth: int) -> None:
        for b in boxes:
            label = b.label + (f" ×{b.calls}" if b.calls > 1 else "")
            rows.append(("  " * depth + label, str(b.share), str(b.own_peak)))
            add(b.inner, depth + 1)

    add(c.boxes, 0)
    calls = sum(_calls(b) for b in c.boxes)
    width = max(len(r[0]) for r in rows) + 2
    out = [f"presk memory: {calls} call{'s' * (calls != 1)}, their shares of the peak and "
           "their own peaks",
           f"  {'call'.ljust(width)}{'share':>8}{'own peak':>12}"]
    for label, share, own in rows:
        out.append(f"  {label.ljust(width)}{share:>8}{own:>12}".rstrip())
    return out


def _calls(box) -> int:
    return box.calls + sum(_calls(b) for b in box.inner)


def format_symbolic(entry: str, sym, rep_dims: dict[str, int], counted) -> list[str]:
    names = ", ".join(sym.names)
    grid = "; ".join(f"{n} ∈ {{{', '.join(map(str, g))}}}" for n, g in zip(sym.names, sym.grid))
    lines = [f"presk memory --symbolic: `{entry}` in {counted.realization_name}, in "
             f"{names or 'no dims'}: each buffer's bytes interpolated on {grid}, checked at "
             f"{_dims_text(sym.check)}"]
    lines.append(f"  inputs      {sym.inputs}")
    lines.append(f"  outputs     {sym.outputs}")
    steps = sym.trace.steps
    if len(sym.peak) == 1:
        p = sym.peak[0]
        lines.append(f"  peak        {p.poly}, at operation {p.step + 1} "
                     f"(`{steps[p.step].site}`)")
    else:
        lines.append("  peak        not one operation for every value of the dims: the "
                     "largest of")
        for p in sym.peak:
            where = f" where {p.where}" if p.where else ""
            lines.append(f"    {p.poly}, at operation {p.step + 1} (`{steps[p.step].site}`)"
                         f"{where}")
    peak = sym.peak_at(rep_dims)
    inputs = sym.inputs(rep_dims)
    same = peak == counted.count.peak and inputs == counted.count.inputs
    lines.append(f"  at {_dims_text(rep_dims)}: the peak {peak}, the inputs {inputs}, "
                 + ("as counted" if same else
                    f"but counted {counted.count.peak} and {counted.count.inputs}"))
    return lines


def format_step(training, dims: dict[str, int], counts: list, realization: str) -> list[str]:
    """The step's table, the policies side by side, then where each one's peak is."""
    from ..train.native_step import STEPS_PER_CALL
    first = counts[0]
    name = first.count.trace.entry.sym_name.data
    h = first.holdings
    at = f" at {_dims_text(dims)}" if dims else ""
    head = (f"presk memory --step: the training run `{training.name}`'s step{at} in "
            f"{realization}, as presk train makes it: `{name}`, then the schedule's "
            f"`lr_at`, then the {training.optimizer.kind} update (native, per dtype group)")
    moments = " and ".join(h.moment_names)
    rows: list[tuple[str, list[int]]] = [
        ("parameters, the objective's (its types)", [c.holdings.objective_params for c in counts]),
        ("parameters, the loop's f64 copies", [c.holdings.master for c in counts]),
        ("parameters, the group's p (f64)", [c.holdings.group_p for c in counts]),
        (f"moments, {moments}", [c.holdings.moments for c in counts]),
        ("the gradient, the objective's outputs", [c.holdings.gradient for c in counts]),
        ("the gradient, the group's g (f64)", [c.holdings.group_g for c in counts]),
        ("the update's tmp and tmp2, its scalars",
         [c.holdings.scratch + c.holdings.scalars for c in counts]),
        ("the batch and the seed", [c.holdings.batch_and_seed for c in counts]),
        ("kept for the backward", [c.kept for c in counts]),
    ]
    if h.step_buffers:
        rows.insert(-1, ("the native step's ctl, hyper, losses, lrs",
                         [c.holdings.step_buffers for c in counts]))
    for i, call in enumerate(first.calls):
        rows.append((f"`{call.name}`: its peak", [c.calls[i].peak for c in counts]))
        rows.append((f"`{call.name}`: with what the loop holds",
                     [c.calls[i].with_loop for c in counts]))
    rows.append(("the step's peak", [c.peak.with_loop for c in counts]))
    width = max(len(r[0]) for r in rows) + 2
    lines = [head, "  " + " " * width + "".join(f"{c.remat:>12}" for c in counts)]
    lines += ["  " + label.ljust(width) + "".join(f"{v:>12}" for v in vals)
              for label, vals in rows]
    if h.laid_out:
        lines.append("presk memory --step: laid out (every parameter and gradient buffer is "
                     "f64): the objective reads the group's p and writes the gradient into "
                     "its g; its own θ and gradient buffers stay allocated, idle; the steps "
                     f"run in native calls of up to {STEPS_PER_CALL} (presk train's default; "
                     "the batches gathered from the file's memory map, not counted: the "
                     "page cache's, not the process's)")
    if h.narrowed:
        lines.append(f"presk memory --step: native code takes the batch and the seed in "
                     f"{h.batch_and_seed_native} bytes, not {h.batch_and_seed}: "
                     f"{', '.join(h.narrowed)} read only in f32, passed in f32 (rounded "
                     "once by the caller, psk-kernel-hoist-input-converts): what the loop "
                     f"holds counts {h.batch_and_seed_native}")
    for c in counts:
        lines.append(_step_peak_line(c))
    return lines


def _step_peak_line(c) -> str:
    p, h = c.peak, c.holdings
    head = f"presk memory --step: under {c.remat}, the peak is `{p.name}`'s"
    if p.name != c.count.trace.entry.sym_name.data:
        return head + f": {p.with_loop} bytes"
    s = c.count.peak_where
    rest = c.count.peak - c.kept_at_peak - c.grad_at_peak
    return (head + f", at its operation {c.count.peak_step + 1} (`{s.site}`): parameters "
            f"{h.objective_params} (the objective's) + {h.master + h.group_p} (f64, the "
            f"loop's), moments {h.moments}, the group's g, tmp, tmp2 and scalars "
            f"{h.group_g + h.scratch + h.scalars}"
            + (f", the native step's buffers {h.step_buffers}" if h.step_buffers else "")
            + f", the batch and the seed "
            f"{h.batch_and_seed_native}, kept for the backward {c.kept_at_peak}, the gradient made "
            f"so far {c.grad_at_peak}, the rest {rest}")


def _run_step(args: argparse.Namespace, module, program) -> int:
    from ..pipeline import parse_dims, prepare
    from ..pipeline.memory import memory_report
    from ..train.step_memory import step_count
    runs = program.main.trainings if program is not None else {}
    if not runs:
        raise UsageError(f"presk memory --step: {args.file} has no `training` run")
    training = next(iter(runs.values()))
    entry = args.entry or training.objective.name
    dims = dict(training.dims, **parse_dims(args.dim))
    dims = prepare(module, entry, dims).dims
    counts = []
    name = ""
    for remat in ("store", "recompute"):
        rep = memory_report(module, entry, dims, args.realize, True, remat)
        counts.append(step_count(rep.count, remat, training.optimizer.kind))
        name = rep.realization_name
    print("\n".join(format_step(training, dims, counts, name)))
    return 0


# ---- the command ----

@reported
def run(args: argparse.Namespace) -> int:
    from ..pipeline import load_core, parse_dims, prepare
    from ..pipeline.memory import memory_report, memory_trace
    if args.step and (args.symbolic or args.grad):
        raise UsageError("presk memory: --step counts the value and gradient under both "
                         "--remat policies itself; it takes no --symbolic or --grad")
    if args.plan and (args.symbolic or args.step):
        raise UsageError("presk memory: --plan is made for one recording (its entry, dims "
                         "and realization): it goes with a call's count, not with "
                         f"--{'symbolic' if args.symbolic else 'step'}")
    if not args.entry and not args.step:
        raise UsageError("presk memory: --entry is needed, e.g. --entry loss")
    module, program = load_core(args.file, warn)
    if args.step:
        return _run_step(args, module, program)
    dims = prepare(module, args.entry, parse_dims(args.dim)).dims
    rep = memory_report(module, args.entry, dims, args.realize, args.grad, args.remat,
                        args.plan)
    if not args.symbolic:
        print("\n".join(format_count(args.entry, dims, rep)))
        return 0
    from ..analysis.memory_symbolic import SymbolicError, symbolic
    try:
        sym = symbolic(dims, lambda d: memory_trace(module, args.entry, d, args.realize,
                                                    args.grad, args.remat)[0])
    except SymbolicError as exc:
        raise UsageError(f"presk memory --symbolic: {exc}") from None
    print("\n".join(format_symbolic(args.entry, sym, dims, rep)))
    return 0


def add_memory(sub: Any) -> None:
    p = sub.add_parser("memory", help="what one call of an entry needs "
                       "in memory, counted from the recorded program")
    p.add_argument("file", help="the program's main .psk file (or a PSK-Core .mlir file)")
    add_recording_arguments(p, "count")
    add_plan_argument(p)
    p.add_argument("--symbolic", action="store_true",
                   help="the same as polynomials in the entry's dims")
    p.add_argument("--step", action="store_true",
                   help="the training run's step as `presk train` makes it, under both "
                   "--remat policies (--entry: the run's objective)")
    p.set_defaults(run=run)
