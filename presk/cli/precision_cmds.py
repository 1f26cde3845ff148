"""The precision subcommands: `presk calibrate` (the envelope, §6.1 of the reference).

`presk calibrate --precision FILE --entry E --dim B=4 --bits 128 [--samples N] [--seed S]
[--weights W] [--inputs I] [--sites N] --out envelope.json` runs the entry in MPFR, prints
three tables (the sites by max|x|, the worst condition numbers, the rounding errors) and
writes the envelope (`presk-envelope/1`, docs/artifacts.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from .optimize_cmds import add_opt
from . import box_cmds
from .common import ProgramError, UsageError, add_entry_arguments, output_file, reported, warn


def add_calibrate(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="run an entry exactly (MPFR) and record its "
                       "envelope: magnitudes, condition numbers, rounding errors per site")
    p.add_argument("--precision", dest="file", required=True, metavar="FILE",
                   help="the program: a .psk file or a PSK-Core .mlir file")
    add_entry_arguments(p, "run", required=True)
    p.add_argument("--bits", type=_bits, default=128, help="MPFR precision (default 128)")
    p.add_argument("--samples", type=_positive, default=1,
                   help="how many input samples (default 1): sample 0 from --inputs or the "
                   "seed, sample i > 0 from seed + i")
    p.add_argument("--seed", type=int, default=0, help="seed of initial weights and inputs")
    p.add_argument("--weights", help="a safetensors file of parameters keyed by path "
                   "(absent: the initial weights)")
    p.add_argument("--inputs", help="a safetensors file of sample 0's inputs keyed by "
                   "argument path (`batch.0`); absent ones are drawn from the seed")
    p.add_argument("--sites", type=_positive, default=10, metavar="N",
                   help="rows of the condition and rounding tables (default 10; the "
                   "magnitudes table shows half as many)")
    p.add_argument("--out", metavar="ENVELOPE", type=output_file,
                   help="write the envelope (JSON) here")
    box_cmds.add_range_flags(p)
    add_opt(p)
    p.set_defaults(run=cmd_calibrate)


@reported
def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..analysis.envelope import EnvelopeError, calibrate, save_envelope
    from ..analysis.interpret import InterpretError
    from ..analysis.weights import WeightsError
    from ..pipeline import load_core, parse_dims

    from .optimize_cmds import load_core_opt
    dims = parse_dims(args.dim)
    module, _ = load_core_opt(args)
    weights, inputs = args.weights, args.inputs
    if args.range or args.ranges:
        weights, inputs = box_cmds.box_midpoint(args, module, dims)
    try:
        envelope = calibrate(module, args.entry, dims, args.bits, args.samples, args.seed,
                             weights, inputs)
    except (WeightsError, EnvelopeError) as exc:
        raise UsageError(f"presk: {exc}") from None
    except (InterpretError, ZeroDivisionError) as exc:
        import sys
        print(f"presk calibrate: error: {exc}", file=sys.stderr)
        raise ProgramError() from None
    print(format_tables(envelope, args.sites))
    if args.out:
        try:
            save_envelope(envelope, args.out)
        except EnvelopeError as exc:
            raise UsageError(f"presk: {exc}") from None
        print(f"presk calibrate: the envelope written to {args.out}")
    return 0


def format_tables(envelope, rows: int = 10) -> str:
    """§6.1's three tables: the largest magnitudes, the worst condition numbers, the
    rounding errors (exact in bf16 first, then by bf16's error over u·max|x|)."""
    sites = envelope.sites
    lines = [f"presk calibrate: {len(sites)} sites over {envelope.samples} samples of "
             f"`{envelope.entry}` at {envelope.bits} bits"]
    by_size = sorted(sites, key=lambda s: (-_key(sites[s].max_abs), s))
    for s in by_size[:max(1, rows // 2)]:
        lines.append(f"  {s:<28} {sci(sites[s].max_abs):>8}")
    sums = envelope.sums()
    lines.append(f"presk calibrate: {len(sums)} sums and contractions, worst condition numbers "
                 "Σ|xᵢwᵢ| / |Σxᵢwᵢ|:")
    for s in sorted(sums, key=lambda s: (-_key(sums[s].condition), s))[:rows]:
        lines.append(f"  {s:<28} {sci(sums[s].condition):>8}")
    # A site whose values are all zero has no ratio (0 / 0): it is left out, as the
    # reference leaves out the zero bias `Linear.apply/%4`.
    rounded = {s: r for s, r in sites.items() if r.max_abs != 0}
    exact = sum(r.rounding["bf16"].exact for r in rounded.values())
    small = sum(r.rounding["bf16"].ratio < 0.1 for r in rounded.values())
    lines.append("presk calibrate: the largest rounding error of each site's values: "
                 f"{len(rounded)} sites, {exact} exact in bf16, {small} below a tenth of "
                 "u·max|x| there")
    lines.append(f"  {'site':<30}{'max|x|':>10}{'f32':>12}{'bf16':>12}{'bf16/u|x|':>10}")
    order = sorted(rounded, key=lambda s: (not sites[s].rounding["bf16"].exact,
                                           _key(sites[s].rounding["bf16"].ratio), s))
    for s in order[:rows]:
        r = sites[s]
        lines.append(f"  {s:<30}{sci(r.max_abs):>10}{sci(r.rounding['f32'].max_error):>12}"
                     f"{sci(r.rounding['bf16'].max_error):>12}"
                     f"{r.rounding['bf16'].ratio:>10.3f}")
    return "\n".join(lines)


def _key(x: float) -> float:
    """NaN sorts as the largest."""
    return float("inf") if x != x else x


def sci(x: float) -> str:
    """`7.4759e0`, `2.5248e-15`: four decimals, the exponent without sign padding."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    mantissa, exponent = f"{x:.4e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _bits(text: str) -> int:
    if not text.isdigit() or not 2 <= int(text) <= 1 << 20:
        raise argparse.ArgumentTypeError(f"{text!r} is not a precision in bits (2 or more)")
    return int(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)
