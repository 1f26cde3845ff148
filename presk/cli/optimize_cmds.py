"""The e-graph optimizer on the command line: `--opt` (run, calibrate, solve, export,
train run it on the program first) and `presk dump --stage opt` (the optimized Core and
the rewrites it uses). The work is presk/pipeline/optimize.py's.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..pipeline import load_core, parse_dims
from .common import warn


def add_opt(p: Any) -> None:
    p.add_argument("--opt", action="store_true",
                   help="run the e-graph optimizer (psk-egraph-opt) on the program first: "
                   "its rewrites are listed on stderr (docs/egraph.md)")
    add_profile(p)


def add_profile(p: Any) -> None:
    if "--profile" not in p._option_string_actions:  # noqa: SLF001 — plan has its own
        p.add_argument("--profile", metavar="PROFILE",
                       help="with --opt: the machine profile (presk-profile/2) that prices "
                       "the optimizer's time term; absent: this machine's cached one, else "
                       "operations and bytes")


def optimized(module, args: argparse.Namespace, entry: str | None = None,
              quiet: bool = False):
    """`module` optimized in place when the command has --opt (the accuracy term measured
    on `entry`'s f64 run at the command's dims, seed, weights and inputs)."""
    if not getattr(args, "opt", False):
        return None
    from ..pipeline.optimize import optimize
    report = optimize(module, entry, parse_dims(getattr(args, "dim", None) or []),
                      getattr(args, "seed", 0) or 0, getattr(args, "weights", None),
                      getattr(args, "inputs", None), profile=getattr(args, "profile", None))
    if not quiet:
        rules = [f"{e.rule} at {e.site}" for _, e in report.rewrites]
        print(f"presk: --opt: {len(rules)} rewrite{'s' * (len(rules) != 1)}"
              + (": " + ", ".join(rules) if rules else ""), file=sys.stderr)
    return report


def load_core_opt(args: argparse.Namespace, entry: str | None = None):
    """load_core, then --opt's optimizer on the module (`entry` defaults to --entry)."""
    module, program = load_core(args.file, warn)
    optimized(module, args, entry if entry is not None else getattr(args, "entry", None))
    return module, program


def dump_opt(args: argparse.Namespace) -> int:
    """`presk dump --stage opt`: the optimized Core (the functions --entry reaches) and the
    optimizer's report."""
    from ..emit.core_listing import format_module
    from ..pipeline import reached
    from ..pipeline.optimize import optimize, report_text
    module, _ = load_core(args.file, warn)
    report = optimize(module, args.entry, parse_dims(args.dim), args.seed, None, None,
                      getattr(args, "budget", None), profile=getattr(args, "profile", None))
    names = reached(module, args.entry) if args.entry else None
    if args.format == "mlir":
        print(module)
    else:
        print(format_module(module, names).rstrip("\n"))
    print()
    print(report_text(report, names, not getattr(args, "no_times", False)))
    return 0
