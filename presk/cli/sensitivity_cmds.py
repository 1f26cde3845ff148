"""`presk dump FILE --stage sensitivity --entry E --dim B=4 [--bits 128] [--sites N]
[--weights W] [--inputs I] [--seed S] [--remat store|recompute]`: ‖∂L/∂v‖₁ at each site,
from one reverse sweep in MPFR, summed per function and ranked (§6.2 of the reference).

`add_to_dump(parser)` adds the options this stage reads to the `dump` subparser (those not
there already): `--dim NAME=N` (repeatable), `--bits N` (default 128), `--sites N` (default
30), `--weights PATH`, `--inputs PATH`, `--seed N` (default 0). `dump_sensitivity(args)`
reads `file`, `entry`, `dim`, and optionally `bits`, `sites`, `weights`, `inputs`, `seed`
and `remat` (default store; recompute gives the same figures).
"""

from __future__ import annotations

import argparse
import sys

from .common import (ProgramError, UsageError, add_dim_argument, positive_whole_number, reported,
                    warn)


def add_to_dump(parser: argparse.ArgumentParser) -> None:
    have = set(parser._option_string_actions)  # noqa: SLF001 — argparse has no public query
    if "--dim" not in have:
        add_dim_argument(parser)
    if "--bits" not in have:
        parser.add_argument("--bits", type=positive_whole_number, default=128, metavar="N",
                            help="with --stage sensitivity: MPFR precision (default 128)")
    if "--sites" not in have:
        parser.add_argument("--sites", type=positive_whole_number, default=30, metavar="N",
                            help="with --stage sensitivity: how many sites to list (default 30)")
    if "--weights" not in have:
        parser.add_argument("--weights", metavar="PATH",
                            help="with --stage sensitivity: parameters (safetensors, by path); "
                            "absent: the initial weights from --seed")
    if "--inputs" not in have:
        parser.add_argument("--inputs", metavar="PATH",
                            help="with --stage sensitivity: inputs (safetensors, by argument "
                            "path, `batch.0`); absent ones are drawn from --seed")
    if "--seed" not in have:
        parser.add_argument("--seed", type=int, default=0,
                            help="with --stage sensitivity: seed of initial weights and inputs")


@reported
def dump_sensitivity(args: argparse.Namespace) -> int:
    sensitivity_printed(args)
    return 0


def sensitivity_printed(args: argparse.Namespace):
    """§6.2's tables printed; the Sensitivities (`presk explain` reads them)."""
    from ..analysis import entry as E
    from ..analysis.sensitivity import SensitivityError, report, sensitivities
    from ..analysis.weights import WeightsError
    from ..transforms.differentiate import DifferentiationError
    from ..pipeline import load_core, parse_dims

    if not args.entry:
        raise UsageError("presk dump: --stage sensitivity needs --entry, e.g. --entry loss")
    bits = getattr(args, "bits", None) or 128
    if bits < 2:
        raise UsageError(f"presk: --bits {bits}: a precision is 2 bits or more")
    module, _ = load_core(args.file, warn)
    dims = parse_dims(getattr(args, "dim", None) or [])
    seed = getattr(args, "seed", 0) or 0
    try:
        entry = E.prepare(module, args.entry, dims)
        params = E.weights(entry, seed, getattr(args, "weights", None))
        values = E.inputs(entry, seed, getattr(args, "inputs", None))
        why = "sensitivities are derivatives at a finite point"
        E.require_finite(params, "the weight", why)
        E.require_finite(values, "the input", why)
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None
    try:
        result = sensitivities(module, args.entry, dims, params, values, bits,
                               getattr(args, "remat", None) or "store")
    except SensitivityError as exc:
        raise UsageError(f"presk: {exc}") from None
    except DifferentiationError as exc:
        print(f"presk: error: {exc}", file=sys.stderr)
        raise ProgramError() from None
    print(report(result, getattr(args, "sites", None) or 30))
    return result
