"""`presk check --precision ENVELOPE FILE [--entry E] [--dim B=4] [--realize SPEC]
[--model k|normwise|cond|rss|all] [--sites N] [--measure] [--seed S] [--bits N]`: each
rule's bound on the entry's output error under a realization, beside the gap measured
against the exact reference (§6.4 of the reference). The analysis is
presk/analysis/bounds.py; docs/precision.md states what each rule assumes.

`add_to_check(parser)` adds the options to `presk check`; `check_precision(args)` runs it
(main.py calls it when `--precision` is given). A bad envelope, realization or dims is one
line and exit 2. `--entry` and `--dim` default to the envelope's.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from . import box_cmds
from .common import UsageError, add_dim_argument, reported, warn

MODELS = ("k", "normwise", "cond", "rss")


def add_to_check(p: Any) -> None:
    p.add_argument("--precision", metavar="ENVELOPE",
                   help="bound the output's error under --realize (presk calibrate --out): a "
                   "path, @path or inline JSON")
    p.add_argument("--entry", help="with --precision: the entry (default: the envelope's)")
    add_dim_argument(p, "with --precision: a dim's value (default: the envelope's)")
    p.add_argument("--realize", metavar="SPEC",
                   help="with --precision: the realization (@path, path or inline JSON; "
                   "absent: all f64)")
    p.add_argument("--model", choices=[*MODELS, "box", "all"], default="all",
                   help="with --precision: the rule to print (default all)")
    p.add_argument("--sites", type=_nonneg, default=8, metavar="N",
                   help="with --precision: rows of the per-site table (default 8)")
    p.add_argument("--measure", action="store_true",
                   help="with --precision: measure the gap (the kernel interpreter under the "
                   "realization against MPFR)")
    p.add_argument("--seed", type=int, default=None,
                   help="with --precision: seed of the initial weights and inputs (default: "
                   "the envelope's)")
    p.add_argument("--bits", type=_bits, default=128,
                   help="with --precision: MPFR precision (default 128)")


    box_cmds.add_range_flags(p)


def _nonneg(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 0")
    return v


def _bits(text: str) -> int:
    v = _nonneg(text)
    if v < 53:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 53 bits")
    return v


@reported
def check_precision(args: argparse.Namespace) -> int:
    result = bounds_printed(args)
    return result if isinstance(result, int) else 0


def bounds_printed(args: argparse.Namespace):
    """Each rule's bound, printed; the Bounds (`presk explain` reads it), or the box rule's
    exit status with `--model box`."""
    from ..analysis.bounds import BoundsError, bounds
    from ..analysis.sensitivity import SensitivityError
    from ..analysis.envelope import EnvelopeError, load_envelope
    from ..analysis.realization import RealizationError, load_realization
    from ..analysis.weights import WeightsError
    from ..pipeline import load_core, parse_dims

    try:
        envelope = load_envelope(args.precision)
        realization = load_realization(args.realize)
    except (EnvelopeError, RealizationError) as exc:
        raise UsageError(f"presk: {exc}") from None
    entry = args.entry or envelope.entry
    dims = parse_dims(args.dim) if args.dim else {k: int(v) for k, v in envelope.dims.items()}
    module, _ = load_core(args.file, warn)
    seed = args.seed
    if seed is None:
        seed = envelope.seed() or 0
    if args.model == "box":  # a sound bound over the box (presk/analysis/box.py)
        return box_cmds.check_box(args, module, entry, dims, realization, seed,
                                  envelope.weights_file(), envelope.inputs_file())
    rules = MODELS if args.model == "all" else (args.model,)
    try:
        result = bounds(module, entry, dims, envelope, realization, seed=seed,
                        bits=args.bits, rules=rules, do_measure=args.measure)
    except (BoundsError, EnvelopeError, RealizationError, WeightsError,
            SensitivityError) as exc:
        raise UsageError(f"presk: {exc}") from None
    print(report(result, args.precision, args.sites))
    return result


def _e(x: float, digits: int = 4) -> str:
    if not math.isfinite(x):
        return str(x)
    mantissa, exponent = f"{float(x):.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _ratio(bound: float, measured: float | None) -> str:
    if measured is None:
        return ""
    if measured == 0:
        return "  the measured gap is 0"
    return f"  {_e(bound / measured, 2)}× the measured gap"


def report(b, envelope_name: str, top: int = 8) -> str:
    """§6.4's table: each rule's bound, the measurement, the envelope, the sites."""
    from ..analysis.bounds import SOUND
    lines = [f"presk check --precision: `{b.entry}` under {b.name}",
             f"  magnitude   {_e(b.magnitude)}"]
    for rule in MODELS:
        if rule not in b.bounds:
            continue
        kind = "bound   " if rule in SOUND else "estimate"
        v = b.bounds[rule]
        lines.append(f"  {kind} {rule:<9} {_e(v):>11}  ({_e(b.relative(rule), 2)} relative)"
                     + _ratio(v, b.measured))
    if b.measured is not None:
        rel = b.measured / b.magnitude if b.magnitude else math.inf
        lines.append(f"  measured           {_e(b.measured):>11}  ({_e(rel, 2)} relative)  "
                     "the kernel interpreter against the exact reference")
    lines.append(f"  envelope    {envelope_name} over {b.envelope_samples} samples, "
                 f"{b.envelope_sites} sites, {b.envelope_weights}")
    lines.append("  (k and normwise hold for the envelope's sampled inputs; cond is first "
                 "order at its first sample; rss ranks, it does not guarantee)")
    if b.components:
        lines += _components(b, top)
    header = f"{'site':<32}{'magnitude':>11}{'k':>13}{'relative':>13}{'condition':>13}"
    lines.append(header)
    for s in b.sites[:top]:
        rel = s.k / s.magnitude if s.magnitude else math.inf
        cond = "-" if s.condition is None else _e(s.condition, 3)
        lines.append(f"{s.site:<32}{_e(s.magnitude, 3):>11}{_e(s.k, 3):>13}"
                     f"{_e(rel, 3):>13}{cond:>13}")
    return "\n".join(lines)


def _components(b, top: int) -> list[str]:
    """A tensor result's elements, each with its own bounds (componentwise) and measured
    error, the `top` largest first by their first sound bound."""
    rules = [r for r in MODELS if r in b.bounds]
    key = next((r for r in ("cond", "normwise", "k") if r in rules), None)
    rows = sorted(b.components, key=lambda c: (-(c.bounds[key] if key else 0.0), c.index))
    lines = [f"  componentwise: each of the {len(b.components)} elements of the result "
             f"(shape {list(b.shape)}) with its own bounds on |L̂ⱼ − Lⱼ|"
             + (f", the {min(top, len(rows))} largest by {key}" if top < len(rows) else "")]
    head = f"{'element':<16}{'value':>12}" + "".join(f"{r:>12}" for r in rules) + \
        (f"{'measured':>12}" if b.measured is not None else "")
    lines.append(head)
    for c in rows[:top]:
        lines.append(f"{str(list(c.index)):<16}{_e(c.value, 3):>12}"
                     + "".join(f"{_e(c.bounds[r], 3):>12}" for r in rules)
                     + (f"{_e(c.measured, 3):>12}" if c.measured is not None else ""))
    return lines
