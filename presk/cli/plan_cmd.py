"""`presk plan FILE --entry E --dim … [--realize @…] [--profile P] [--threads N] [--cost]
[--measure] --out plan.json`: the layout plan (presk/pipeline/plan.py), printed as the
reference's plan table and, per nest, its chosen point, two runners-up and the best split
point, each in the model's terms; written as `presk-plan/1`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import UsageError, add_recording_arguments, output_file
from .optimize_cmds import add_opt, optimized

_TERMS_HEAD = (f"{'':<3}{'predicted':>10}" + "".join(f"{t:>10}" for t in
               ("λ", "spawn", "work", "loads", "L2", "L3", "mem")) + "  bound by")


def _µs(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs"


def _operands(nest) -> str:
    return " ".join(str(list(o)) for o in nest.operands[:nest.inputs])


def plan_table(report) -> list[str]:
    u = report.profile.model.u
    lines = [f"{'nest':<28} {'operands':<28} {'space':>11} {'predicted':>13} "
             f"{'undecided':>18}  layout"]
    for n in report.nests:
        lines.append(f"{n.site:<28} {_operands(n):<28} {len(n.priced):>4} points "
                     f"{_µs(n.chosen.seconds):>13} {n.within(u):>4} within 1 + u  "
                     f"{n.chosen.point.text()}")
    lines.append(f"-- {len(report.nests)} nests, {report.points} points costed; "
                 f"u = {u:.3f}")
    if epilogues := [n.site for n in report.nests if n.epilogue]:
        adds = all(n.title.endswith("+add") for n in report.nests if n.epilogue)
        reader = "the `add`" if adds else "the element-wise op"
        lines.append(f"-- {len(epilogues)} product{'s' * (len(epilogues) > 1)} take"
                     f"{'s' * (len(epilogues) == 1)} {reader} that alone reads it as its "
                     f"epilogue: {', '.join(epilogues)} (one nest: its layout is the "
                     "product's)")
    return lines


def nest_details(report, every: bool) -> list[str]:
    u = report.profile.model.u
    lines = []
    for n in report.nests:
        lines.append("")
        lines.append(f"{n.site} {_operands(n)} — {len(n.priced)} points, {n.within(u)} "
                     f"within 1 + u, {n.launches} launch{'es' * (n.launches > 1)}")
        lines.append(_TERMS_HEAD)
        rows = list(enumerate(n.priced, 1)) if every else n.shown()
        for rank, p in rows:
            terms = "".join(f"{t * 1e6:>10.4f}" for t in p.terms)
            lines.append(f"{rank:<3}{p.seconds * 1e6:>10.4f}{terms}  {p.bound_by}")
            lines.append(f"     {p.point.text()}")
    return lines


def measured_lines(report) -> list[str]:
    from ..pipeline.plan import measured_errors
    lines = ["", "Measured (each nest's chosen point timed natively, the minimum of 5 "
             "samples; a shared machine's noise only adds time)",
             f"{'nest':<28} {'predicted':>12} {'measured':>12} {'ratio':>7}"]
    for n in report.nests:
        ratio = n.chosen.seconds / n.measured if n.measured else float("inf")
        lines.append(f"{n.site:<28} {_µs(n.chosen.seconds):>12} {_µs(n.measured or 0):>12} "
                     f"{ratio:>7.2f}")
    errs = measured_errors(report)
    if errs is not None:
        lines.append(f"-- over this program's {len(report.nests)} nests: u = {errs[0]:.3f} "
                     f"(median), {errs[1]:.3f} (90th percentile), ρ = {errs[2]:.3f}")
    return lines


def cmd_plan(args: argparse.Namespace) -> int:
    plan_printed(args)
    return 0


def plan_printed(args: argparse.Namespace):
    """The plan made, printed and written (--out); its PlanReport (`presk explain`)."""
    from ..analysis.artifact import write_atomic
    from ..pipeline import load_core, parse_dims
    from ..pipeline.plan import make_plan, measure_plan
    from ..pipeline.profile import profile_for
    if not args.entry:
        raise UsageError("presk plan: --entry is required")
    profile, name = profile_for(args.profile)
    core, _ = load_core(args.file)
    optimized(core, args, args.entry)  # --opt: plan the optimized program (docs/egraph.md)
    report = make_plan(core, args.entry, parse_dims(args.dim), profile, name, args.realize,
                       args.grad, args.remat, args.threads)
    plan = report.plan
    dims = ", ".join(f"{k} = {v}" for k, v in plan.dims.items())
    print(f"presk plan: `{plan.entry}`{' (value and gradient)' if plan.grad else ''}"
          f"{' at ' + dims if dims else ''} in {plan.realization}, priced by the profile "
          f"{name}, on {report.workers} worker{'s' * (report.workers > 1)} "
          f"({report.workers_from})")
    lines = plan_table(report) + nest_details(report, args.cost)
    if args.measure:
        measure_plan(report)
        lines += measured_lines(report)
    print("\n".join(lines))
    if args.out:
        write_atomic(args.out, json.dumps(plan.to_json(), indent=2, ensure_ascii=False)
                     + "\n")
        print(f"\n-- written to {args.out}")
    return report


def add_plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="choose each loop nest's layout by the machine profile's "
                       "cost model, and say why")
    p.add_argument("file", help="the program's main .psk file")
    add_recording_arguments(p, "plan")
    p.add_argument("--profile", metavar="PROFILE",
                   help="a presk-profile/2 file; absent: this machine's, from `presk "
                   "profile calibrate`")
    p.add_argument("--threads", type=int, metavar="N",
                   help="the workers a split may use (default: PRESK_THREADS, else the "
                   "profile's)")
    p.add_argument("--cost", action="store_true", help="list every point of every nest")
    p.add_argument("--measure", action="store_true",
                   help="time each nest's chosen point natively beside its prediction")
    p.add_argument("--out", type=output_file, help="write the plan (presk-plan/1) here")
    add_opt(p)
    p.set_defaults(run=cmd_plan)
