"""`presk explain FILE --entry E [--dim N=V…] [--budget B] [--bits N] [--profile P]
[--threads N] [--remat store|recompute] [--opt] [--weights W] [--target native,c,pytorch]
[--measure] [--pdf] [--no-train] [--solve-price bytes|time] -o DIR`: one document of what
the compiler does to the entry, every section's listing the output of the commands it names
(presk/cli/explain/document.py; docs/explain.md).

A bad flag, or a DIR that exists and is not a previous explain output: one line, exit 2. A
mistake in the program: its diagnostic, exit 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import (UsageError, add_entry_arguments, positive_whole_number, relative_budget,
                    reported)


def _targets(text: str) -> tuple[str, ...]:
    from .explain.context import TARGETS
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [t for t in names if t not in TARGETS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: the targets are a comma-separated list "
                                          f"of {', '.join(TARGETS)}")
    return tuple(t for t in TARGETS if t in names)


def _bits(text: str) -> int:
    if not text.isdigit() or int(text) < 53:
        raise argparse.ArgumentTypeError(f"{text!r}: the exact reference needs 53 bits or more")
    return int(text)


def _budget(text: str) -> tuple[float, str]:
    """A relative budget, and its text as written (`1e-3`) for the commands shown."""
    return relative_budget(text), text


def add_explain(sub: Any) -> None:
    p = sub.add_parser("explain", help="write one document of what the compiler does to an "
                       "entry, stage by stage, with its artifacts and the commands behind it")
    p.add_argument("file", help="the program's main .psk file")
    add_entry_arguments(p, "explain", required=True)
    p.add_argument("--budget", type=_budget, metavar="B",
                   help="solve a realization under this error relative to the output "
                   "(absent: all f64)")
    p.add_argument("--solve-price", choices=["bytes", "time"], default="bytes",
                   help="what the solver minimizes: bytes moved a call (default) or, with "
                   "--profile, the seconds the profile's cost model predicts")
    p.add_argument("--bits", type=_bits, default=128, help="MPFR precision of the exact "
                   "reference (default 128)")
    p.add_argument("--profile", metavar="PROFILE",
                   help="a presk-profile/1 file: plan every nest's layout by its cost model")
    p.add_argument("--threads", type=positive_whole_number, metavar="N",
                   help="the workers a split may use in the plan (default: the profile's)")
    p.add_argument("--remat", choices=["store", "recompute"], default="store",
                   help="what a reverse sweep keeps (default store)")
    p.add_argument("--opt", action="store_true", help="run the e-graph optimizer first")
    p.add_argument("--weights", help="a safetensors file of parameters keyed by path "
                   "(absent: the initialization, seed 0)")
    p.add_argument("--target", type=_targets, default=None, metavar="T,…",
                   help="native, c, pytorch, comma-separated (default all three)")
    p.add_argument("--measure", action="store_true",
                   help="add §11: the native call and each nest timed (not deterministic)")
    p.add_argument("--pdf", action="store_true", help="also DIR/explain.pdf (typst)")
    p.add_argument("--no-train", dest="train", action="store_false",
                   help="do not make the training run whose objective is the entry (§10 "
                   "draws its loss curve otherwise)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="the directory to write (replaced only if a previous explain output)")
    p.set_defaults(run=cmd_explain)


@reported
def cmd_explain(args: argparse.Namespace) -> int:
    from .explain.context import TARGETS, Options
    from .explain.document import ExplainError, write
    from ..pipeline import parse_dims
    parse_dims(args.dim)  # a malformed --dim is one line before any work
    if args.solve_price == "time" and not args.profile:
        raise UsageError("presk explain: --solve-price time prices by --profile: give one")
    options = Options(
        file=args.file, entry=args.entry, dims=tuple(args.dim), out=args.output,
        budget=args.budget[0] if args.budget else None,
        budget_text=args.budget[1] if args.budget else None, bits=args.bits,
        profile=args.profile, threads=args.threads, remat=args.remat, opt=args.opt,
        weights=args.weights, targets=args.target or TARGETS, measure=args.measure,
        pdf=args.pdf, solve_price=args.solve_price, train=args.train)
    try:
        write(options, args.parse_presk)
    except ExplainError as exc:
        raise UsageError(str(exc)) from None
    print(f"presk explain: `{args.entry}` of {args.file} into {args.output}/explain.md")
    return 0
