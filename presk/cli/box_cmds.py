"""The box: `--range NAME=[lo, hi]` / `--range NAME=±P%` and `--ranges FILE` for
`presk calibrate`, `presk check --precision … --model box` and `presk solve --certify`
(presk/analysis/box.py; docs/precision.md, "Sound bounds over a box").
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from .common import UsageError


def add_range_flags(p: Any) -> None:
    p.add_argument("--range", action="append", default=[], metavar="NAME=[lo, hi]",
                   help="an input's (or a parameter's) range, every element in [lo, hi], or "
                   "NAME=±P%% around its value (repeatable)")
    p.add_argument("--ranges", metavar="FILE",
                   help="ranges (presk-ranges/1): a path, @path or inline JSON; --range "
                   "flags add to it")


def range_spec(args: argparse.Namespace):
    from ..analysis.ranges import RangesError, from_flags
    try:
        return from_flags(args.range, args.ranges)
    except RangesError as exc:
        raise UsageError(f"presk: {exc}") from None


def resolve_box(spec, prepared, params, values):
    from ..analysis.ranges import RangesError, resolve
    try:
        return resolve(spec, prepared.inputs, params, values)
    except RangesError as exc:
        raise UsageError(f"presk: {exc}") from None


def _e(x: float, digits: int = 4) -> str:
    if not math.isfinite(x):
        return str(x)
    mantissa, exponent = f"{float(x):.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def box_report(res, box, magnitude: float | None, top: int = 8) -> str:
    from ..analysis.ranges import describe
    lines = [f"presk check --precision: `{res.entry}` under {res.name}, over the box",
             f"  box         {describe(box)}",
             f"  output      in [{_e(res.lo)}, {_e(res.hi)}] over the box (exact values)",
             f"  bound    box         {_e(res.bound):>11}  for every input of the box"
             + (f"  ({_e(res.bound / magnitude, 2)} relative to |L| = {_e(magnitude)} at "
                "the given inputs)" if magnitude else ""),
             f"  analysis    {res.leaves} sub-box(es), {res.seconds:.2f} s",
             "  (sound: no sample; library functions within the op table's ulps, "
             "docs/mathlib.md)"]
    for p in res.problems[:top]:
        lines.append(f"  problem     {p}")
    for site, bad in sorted(res.excluded.items())[:top]:
        lines.append(f"  range       {site}: cannot be {', '.join(bad)} over the box")
    lines.append(f"{'site':<32}{'type':>6}{'lo':>13}{'hi':>13}{'share of bound':>16}")
    for s in sorted(res.sites, key=lambda s: (-s.error, s.site))[:top]:
        lines.append(f"{s.site:<32}{s.type:>6}{_e(s.lo, 3):>13}{_e(s.hi, 3):>13}"
                     f"{_e(s.error, 3):>16}")
    return "\n".join(lines)


def check_box(args: argparse.Namespace, module, entry: str, dims: dict, realization,
              seed: int, weights: str | None, inputs: str | None) -> int:
    """`presk check --precision … --model box`."""
    from ..analysis import box as B
    from ..analysis import entry as E
    from ..analysis.weights import WeightsError
    spec = range_spec(args)
    if spec is None:
        raise UsageError("presk: --model box needs the box: --range NAME=[lo, hi] or "
                         "--ranges FILE")
    try:
        prepared = E.prepare(module, entry, dict(dims))
        params = E.weights(prepared, seed, weights)
        values = E.inputs(prepared, seed, inputs)
        box = resolve_box(spec, prepared, params, values)
        res = B.analyze(module, entry, dict(prepared.dims), realization, box, params, values)
    except (B.BoxError, WeightsError) as exc:
        raise UsageError(f"presk: {exc}") from None
    print(box_report(res, box, None, args.sites))
    return 0


def certify_report(c, box) -> str:
    from ..analysis.ranges import describe
    lines = ["", f"presk solve --certify: over the box {describe(box)}",
             f"  certified   box bound {_e(c.bound)} ≤ {_e(c.absolute)} allowed, for every "
             f"input of the box ({c.analyses} box analyses)",
             f"  realization {c.realization.summary()}"]
    for key, frm, to, why in c.widened:
        lines.append(f"  widened {key}: {frm} → {to} ({why})")
    if not c.widened:
        lines.append("  the sampled proposal holds over the box as it is")
    return "\n".join(lines)


def box_midpoint(args: argparse.Namespace, module, dims: dict) -> tuple[str | None, str]:
    """`presk calibrate --range …`: the envelope's sample 0 at the box's midpoint (for
    `±P%` ranges, the value itself), written beside the envelope as
    `<stem>.inputs.safetensors` (and `<stem>.weights.safetensors` when parameters have
    ranges) so that check and solve, reading the envelope, start from the same point."""
    import os

    import numpy as np

    from ..analysis import entry as E
    from ..analysis.weights import WeightsError, save_tensors
    if not args.out:
        raise UsageError("presk calibrate: --range needs --out (the box's midpoint inputs are "
                         "written beside the envelope)")
    spec = range_spec(args)
    try:
        prepared = E.prepare(module, args.entry, dict(dims))
        params = E.weights(prepared, args.seed, args.weights)
        values = E.inputs(prepared, args.seed, args.inputs)
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None
    box = resolve_box(spec, prepared, params, values)
    mid = lambda lo, hi: lo + (hi - lo) / 2  # noqa: E731
    stem = os.path.splitext(args.out)[0]
    try:
        inputs = f"{stem}.inputs.safetensors"
        save_tensors({k: (mid(*box.inputs[k]) if k in box.inputs else v).astype(np.float64)
                      for k, v in values.items()}, inputs)
        weights = args.weights
        if box.params:
            weights = f"{stem}.weights.safetensors"
            save_tensors({k: (mid(*box.params[k]) if k in box.params else v).astype(
                np.float64) for k, v in params.items()}, weights)
    except (OSError, WeightsError) as exc:
        raise UsageError(f"presk calibrate: cannot write beside {args.out} ({exc})") from None
    return weights, inputs
