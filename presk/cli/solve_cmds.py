"""`presk solve FILE --precision envelope.json --budget 1e-3 [--entry E] [--dim B=4]
[--sites N] [--seed S] [--weights W] [--inputs I] [--fma] [--grad] [--out realization.json]
[--certify --range NAME=[lo, hi]… | --ranges FILE]`: the cheapest
type for every stored value under the budget, measured against the exact reference
(§6.3 of the reference). The solver is presk/analysis/solver.py.

`add_solve(subparsers)` adds the subcommand; `cmd_solve(args)` runs it. A bad envelope or
budget is one line and exit 2; a budget that all-f64 already misses is reported. The
entry, its dims, the seed and the weights and inputs files default to the envelope's (what
`presk calibrate --out` ran), as `presk check --precision` does.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .optimize_cmds import add_opt
from . import box_cmds
from .common import (ProgramError, UsageError, add_dim_argument, output_file, relative_budget,
                    reported, warn)


def add_solve(sub: Any) -> None:
    p = sub.add_parser("solve", help="choose a float type for every stored value under a "
                       "budget relative to the output, and measure it")
    p.add_argument("file", help="the program: a .psk file or a PSK-Core .mlir file")
    p.add_argument("--entry", help="the function to solve for (default: the envelope's)")
    add_dim_argument(p, "a dim's value, e.g. --dim B=4 (repeatable; default: the envelope's)")
    p.add_argument("--precision", required=True, metavar="ENVELOPE",
                   help="the envelope (presk calibrate --out): a path, @path or inline JSON")
    p.add_argument("--budget", required=True, type=relative_budget,
                   help="the error allowed, relative to the output's magnitude, e.g. 1e-3")
    p.add_argument("--sites", type=int, default=30, metavar="N",
                   help="rows of the decisions table (default 30)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of initial weights and inputs (default: the envelope's)")
    p.add_argument("--weights", help="parameters (safetensors, by path; default: the "
                   "envelope's file, or the initializers)")
    p.add_argument("--inputs", help="inputs (safetensors, by argument path; default: the "
                   "envelope's file, or drawn from the seed)")
    p.add_argument("--bits", type=int, default=128, help="MPFR precision (default 128)")
    p.add_argument("--profile", metavar="PROFILE",
                   help="price a realization in seconds a call, as this machine profile's "
                   "cost model predicts it (launches at their planned layouts, the host's "
                   "conversions and copies included); absent: bytes moved")
    p.add_argument("--fma", action="store_true",
                   help="fuse the entry's contractions (the realization's `fma`: one rounding "
                   "per multiply-add, other bits; never a larger bound, up to 2x faster: "
                   "docs/precision.md); default: none fused")
    p.add_argument("--grad", action="store_true",
                   help="also type the gradient's reverse sweep: its sites at f32 (with "
                   "--fma its contractions fused) when the measured gradient stays within "
                   "the budget per parameter tensor, else f64 (docs/precision.md); "
                   "default: the reverse sweep f64")
    p.add_argument("--out", metavar="REALIZATION", type=output_file,
                   help="write the realization (JSON) here")
    p.add_argument("--certify", action="store_true",
                   help="then widen the proposal until its sound bound over the box "
                   "(--range/--ranges) is under the budget: every input of the box, not the "
                   "sample (presk/analysis/certify.py)")
    box_cmds.add_range_flags(p)
    add_opt(p)
    p.set_defaults(run=cmd_solve)


@reported
def cmd_solve(args: argparse.Namespace) -> int:
    import sys
    if args.certify:
        solution, (module, entry, params, values) = solved(args)
        print(report(solution, args.sites))
        return _certify(args, module, entry, solution, params, values)
    solution = solve_and_write(args)
    if not solution.inside:
        print(f"presk solve: the budget is missed: {_e(solution.measured)} measured against "
              f"{_e(solution.absolute)} allowed", file=sys.stderr)
        raise ProgramError()
    return 0


def solve_and_write(args: argparse.Namespace):
    """What `presk solve` does without --certify: solve, print §6.3's tables, write --out;
    the Solution (`presk explain` reads it; the command's exit status is its `inside`)."""
    solution, _ = solved(args)
    print(report(solution, args.sites))
    if args.out:
        from ..analysis.realization import RealizationError
        from ..analysis.solver import write_realization
        try:
            write_realization(solution, args.out)
        except (RealizationError, OSError) as exc:
            raise UsageError(f"presk: {exc}") from None
        print(f"\nwritten to {args.out}")
    return solution


def solved(args: argparse.Namespace):
    """The solution for the command line's entry, envelope and budget, and what it was
    solved on: (module, entry, params, values)."""
    from ..analysis import entry as E
    from ..analysis.envelope import EnvelopeError, load_envelope
    from ..analysis.sensitivity import SensitivityError
    from ..analysis.solver import SolveError, solve
    from ..analysis.weights import WeightsError
    from ..pipeline import load_core, parse_dims

    if args.bits < 2:
        raise UsageError(f"presk solve: --bits {args.bits}: a precision is 2 bits or more")
    resolved = 2.0 ** -(args.bits - 2)  # the relative error the exact reference resolves
    if args.budget < resolved:
        raise UsageError(f"presk solve: --budget {args.budget:g} is below what the "
                         f"{args.bits}-bit exact reference resolves ({resolved:.1e} "
                         "relative): raise --bits or the budget")
    try:
        envelope = load_envelope(args.precision)
    except EnvelopeError as exc:
        raise UsageError(f"presk: {exc}") from None
    args.entry = args.entry or envelope.entry
    dims = parse_dims(args.dim) if args.dim else {k: int(v) for k, v in envelope.dims.items()}
    if args.seed is None:
        args.seed = envelope.seed() or 0
    args.weights = args.weights or envelope.weights_file()
    args.inputs = args.inputs or envelope.inputs_file()
    if envelope.entry != args.entry:
        raise UsageError(f"presk: the envelope was measured on `{envelope.entry}`, not "
                         f"`{args.entry}`")
    if {k: int(v) for k, v in envelope.dims.items()} != dims:
        have = ", ".join(f"{k}={v}" for k, v in envelope.dims.items()) or "none"
        raise UsageError(f"presk: the envelope was measured at dims {have}, not "
                         + (", ".join(f"{k}={v}" for k, v in dims.items()) or "none"))
    from .optimize_cmds import optimized
    profile = None
    if args.profile:
        from ..pipeline.profile import profile_for
        profile, _ = profile_for(args.profile)
    module, _ = load_core(args.file, warn)
    optimized(module, args, args.entry)  # as calibrate --opt did, for the same sites
    try:
        entry = E.prepare(module, args.entry, dims)
        params = E.weights(entry, args.seed, args.weights)
        values = E.inputs(entry, args.seed, args.inputs)  # the envelope's (calibrate
        # --range's midpoint, the box's own sample, for --certify) unless given
        solution = solve(module, args.entry, dims, envelope, args.budget, params, values,
                         args.seed, args.bits, profile=profile, fma=args.fma,
                         grad=args.grad)
    except (WeightsError, SolveError, SensitivityError) as exc:
        raise UsageError(f"presk: {exc}") from None
    return solution, (module, entry, params, values)


def _certify(args, module, entry, solution, params, values) -> int:
    """--certify: the proposal widened until its box bound is under the budget."""
    import sys

    from ..analysis.box import BoxError
    from ..analysis.certify import CertifyError, certify
    from ..analysis.realization import RealizationError, save_realization
    spec = box_cmds.range_spec(args)
    if spec is None:
        raise UsageError("presk solve: --certify needs the box: --range NAME=[lo, hi] or "
                         "--ranges FILE")
    box = box_cmds.resolve_box(spec, entry, params, values)
    try:
        c = certify(module, args.entry, dict(entry.dims), solution, box, params, values)
    except (BoxError, CertifyError) as exc:
        print(f"presk solve --certify: {exc}", file=sys.stderr)
        raise ProgramError() from None
    print(box_cmds.certify_report(c, box))
    if args.out:
        try:
            save_realization(c.realization, args.out)
        except RealizationError as exc:
            raise UsageError(f"presk: {exc}") from None
        print(f"\nwritten to {args.out}")
    return 0


def _e(x: float, digits: int = 3) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    mantissa, exponent = f"{float(x):.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(header)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return out


def _reverse_lines(sol) -> list[str]:
    """--grad: what the reverse sweep runs in, and the gradient's measured error."""
    r = sol.reverse
    if r is None:
        return []
    worst = lambda errors: max(errors.items(), key=lambda kv: kv[1])  # noqa: E731
    if r.narrowed:
        key, value = worst(r.errors)
        fused = f", {len(r.fma)} contractions fused" if r.fma else ""
        return [f"  reverse     {len(r.sites)} sites of the gradient's sweep at f32{fused}: "
                f"its largest error {_e(value)} relative ({key}), inside the budget"]
    if not r.candidates:
        return ["  reverse     the gradient's sweep has no site to narrow"]
    key, value = worst(r.tried)
    f64_key, f64_value = worst(r.errors)
    return [f"  reverse     left f64: narrowed to f32 its {r.candidates} sites measured "
            f"{_e(value)} relative ({key}), over the budget; in f64 {_e(f64_value)} "
            f"({f64_key})"]


def report(sol, top: int = 30) -> str:
    """§6.3's tables."""
    sites = [d for d in sol.decisions if d.kind == "site"]
    params = [d for d in sol.decisions if d.kind == "param"]
    narrowable = [d for d in sites if d.offered]
    assigned = [d for d in sites if d.type != "f64"]
    p_away = [d for d in params if d.type != "f64"]
    rule1 = [d.key for d in sol.decisions if d.rule == 1]
    rule2 = [d.key for d in sol.decisions if d.rule == 2]
    by_type = {}
    for d in p_away:
        by_type[d.type] = by_type.get(d.type, 0) + 1
    rest_bytes = sum(d.elements * {"f64": 8, "f32": 4, "bf16": 2}[d.type] for d in params)
    f64_bytes = sum(d.elements * 8 for d in params)
    u = sol.unit
    lines = [f"presk solve: `{sol.entry}` under budget {sol.budget:.2e} relative "
             f"({_e(sol.absolute)} absolute, |output| {_e(sol.magnitude)})",
             f"  realization {sol.name}, " + ("at the plan the profile makes" if u == "s"
                                              else "the kernels at their default layouts"),
             f"  sites       {len(narrowable)} narrowable, {len(assigned)} assigned away from "
             f"f64 ({sol.stored} stored values, {sol.stored - len(narrowable)} not offered)",
             f"  parameters  {sum(1 for d in params if d.offered)} offered, {len(p_away)} "
             f"stored away from f64 ("
             + ", ".join(f"{n} {t}" for t, n in sorted(by_type.items())) + f"): "
             f"{_e(rest_bytes, 4)} bytes at rest against {_e(f64_bytes, 4)} in f64",
             f"  rules       {len(rule1)} of one element not offered (rule 1)"
             + (": " + ", ".join(rule1) if rule1 else ""),
             f"              {len(rule2)} saving under θ = 1.000e-3 of the all-f64 traffic "
             f"not offered (rule 2)" + (": " + ", ".join(rule2) if rule2 else ""),
             f"  cost        {_e(sol.cost, 4)} against {_e(sol.cost_f64, 4)} all-f64 "
             f"({sol.cost / sol.cost_f64:.2f}x, {u} per call), relaxation floor "
             f"{_e(sol.floor, 4)}",
             f"  proposal    {_e(sol.proposal, 4)} before measurement widened anything",
             f"  estimate    {_e(sol.estimate)} (sensitivity-weighted, first order: it ranks, "
             f"it does not guarantee)",
             f"  measured    {_e(sol.measured)} against the exact reference, after "
             f"{len(sol.widenings)} widening round(s) — "
             + ("inside the budget" if sol.inside else "OUTSIDE the budget"),
             f"  all-f64     {_e(sol.f64_measured)} measured"
             + ("" if sol.f64_measured <= sol.absolute else
                " — the budget is missed even in all-f64"),
             "  floor       every offered value at the narrowest type its own term allows under "
             "the whole budget, taken alone",
             *_reverse_lines(sol),
             ""]
    total = sol.estimate
    share = (lambda t: 100.0 * t / total) if total > 0 else (lambda t: 0.0)
    lines.append(f"The decisions, each with its term of the estimate (the terms below and "
                 f"the followers' sum to {_e(math.fsum(sol.terms().values()))}, the "
                 f"solver's {_e(total)}):")
    ranked = sorted(sol.decisions, key=lambda d: (-d.term(), d.kind != "site", d.key))
    rows = [[d.key, d.op, d.type, str(d.elements), _e(d.max_abs), _e(d.s), _e(d.term()),
             f"{share(d.term()):.3f} %"] for d in ranked[:top]]
    lines += _table(["site", "operation", "type", "elements", "|v|", "s", "term", "share"],
                    rows)
    lines += ["", "The moves, in order:"]
    for m in sol.moves:
        lines.append(f"  {m.number:>3}. {m.key}: {m.frm} → {m.to}, saves {_e(m.saved)} {u}, "
                     f"adds {_e(m.added)} to the estimate, then {_e(m.estimate)}")
    for key, frm, to in sol.widenings:
        lines.append(f"  widened {key}: {frm} → {to} (the largest share, the measurement "
                     "missed the budget)")
    for d in sol.decisions:
        if d.rule == 1:
            lines.append(f"  {d.key}: not offered: one element, no traffic to save (rule 1)")
        elif d.rule == 2:
            lines.append(f"  {d.key}: not offered: its first narrowing saves "
                         f"{_e(d.first_saving)} {u}, under θ·cost (rule 2)")
    lines += ["", "The values rounded elsewhere, or carried:"]
    rows = [[o.site, o.op, o.role, o.type, _e(o.max_abs), _e(o.s), _e(o.term),
             f"{share(o.term):.3f} %"] for o in sorted(
                 sol.others, key=lambda o: (o.role == "carried", -o.term, o.site))]
    lines += _table(["site", "operation", "role", "type", "|v|", "s", "term", "share"], rows)
    return "\n".join(lines)
