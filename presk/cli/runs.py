"""What the commands that run an entry share (`presk run` on every engine, `presk export
--target c`): the entry and its arguments from the flags, the lines that print a result,
and `--out`."""

from __future__ import annotations

import argparse
from typing import Any

from ..pipeline import draw_arguments, parse_dims, prepare, record_call
from .common import UsageError


def prepare_run(args: argparse.Namespace):
    """The Core module, the prepared entry, its parameters and inputs, and the entry
    recorded down to PSK-Kernel, for `presk run --engine native|kernel` and `presk export
    --target c`; with --grad, the cotangent seed in `args.seed_value`
    (presk.analysis.entry.cotangent). The recording comes first: a call whose buffers,
    arena and arguments do not fit is refused before an argument is drawn."""
    from ..analysis.entry import argument_bytes
    from .optimize_cmds import load_core_opt
    module, _ = load_core_opt(args)
    entry = prepare(module, args.entry, parse_dims(args.dim))
    grad = getattr(args, "grad", False)
    pipe = record_call(module, args.entry, entry.dims, getattr(args, "realize", None), True,
                       grad, getattr(args, "remat", "store"), getattr(args, "plan", None),
                       held=argument_bytes(entry),
                       fuse_reductions=getattr(args, "fuse_reductions", False))
    params, values = draw_arguments(entry, args.seed, getattr(args, "weights", None),
                                    getattr(args, "inputs", None))
    args.seed_value = cotangent_seed(entry, args) if grad else None
    return module, entry, params, values, pipe


def cotangent_seed(entry, args: argparse.Namespace):
    """What multiplies the result in `presk run --grad`: 1 for ℝ[], else --cotangent."""
    from ..analysis import entry as E
    from ..analysis.weights import WeightsError
    try:
        return E.cotangent(entry, getattr(args, "cotangent", None))
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None


def differentiated(spec: str) -> str:
    """What `presk run --grad --cotangent` differentiates, in one line."""
    try:
        float(spec)
        given = f"{spec} in every element"
    except ValueError:
        given = f"`result` of {spec}"
    return f"grad: the gradient of ⟨c, result⟩ = Σ c·result, the cotangent c {given}"


def print_header(args: argparse.Namespace, dims: dict[str, int], where: str) -> None:
    """`loss at B = 4 in <where>:`, and with --cotangent what the gradient is of."""
    text = ", ".join(f"{k} = {v}" for k, v in dims.items())
    print(f"{args.entry}{' at ' + text if text else ''} in {where}:")
    if getattr(args, "grad", False) and getattr(args, "cotangent", None) is not None:
        print(f"  {differentiated(args.cotangent)}")


def save(tensors, path: str) -> None:
    """Write a safetensors file; a path that cannot be written is one line, exit code 2."""
    from ..analysis.weights import WeightsError, save_tensors
    try:
        save_tensors(tensors, path)
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None


def show(value: Any) -> str:
    import numpy as np
    array = np.asarray(value)
    if array.shape == ():
        return str(array.item())
    if array.dtype == object:  # MPFR: every digit, as a scalar result prints
        return np.array2string(array, separator=", ", formatter={"all": str},
                               max_line_width=100)
    return np.array2string(array, precision=17, separator=", ")


def print_run(args: argparse.Namespace, dims: dict[str, int], where: str,
              result: dict[str, Any]) -> None:
    """`loss at B = 4 in <where>:` and one line per output, as `presk run` prints; `--out`."""
    print_header(args, dims, where)
    for path, value in result.items():
        print(f"  {path} = {show(value)}")
    if getattr(args, "out", None):
        save(dict(result), args.out)
        print(f"  written to {args.out}")
