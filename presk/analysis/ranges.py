"""Input ranges: the box a sound bound holds over (docs/artifacts.md, `presk-ranges/1`).

On the command line, `--range NAME=[lo, hi]` (every element of the input in [lo, hi]) or
`--range NAME=±10%` (each element within 10 % of the value the command would otherwise
use: the seed's, the --inputs or --weights file's); NAME is a data input's path (`u`,
`batch.0`) or a parameter's (`blocks.proj.w`). A file:

    {"format": "presk-ranges/1", "entry": "doppler1",
     "inputs": {"u": [-100, 100], "batch.0": {"around": 0.1},
                "x": {"lo": [[0, 1]], "hi": [[1, 2]]}},
     "params": {"final.γ": [0.9, 1.1]}}

A parameter without a range keeps its value. Pure Python: no xDSL.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np

from .artifact import check_format, read_json, write_json

FORMAT = "presk-ranges/1"


class RangesError(Exception):
    """A range that cannot be read or does not fit: one line for the user."""


@dataclass
class Ranges:
    """Each input's box: lo/hi arrays by input path (a data input `batch.0`, `u`) or
    parameter path (`blocks.proj.w`); a path absent is a point (its value)."""

    inputs: dict[str, tuple[np.ndarray, np.ndarray]]
    params: dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass
class RangeSpec:
    """Ranges as written: per path, (lo, hi) numbers, element-wise lists, or a relative
    half-width around the value ("around")."""

    entry: str | None = None
    inputs: dict[str, object] = field(default_factory=dict)
    params: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict:
        out: dict = {"format": FORMAT}
        if self.entry is not None:
            out["entry"] = self.entry
        out["inputs"] = dict(self.inputs)
        if self.params:
            out["params"] = dict(self.params)
        return out

    def merged(self, other: "RangeSpec") -> "RangeSpec":
        return RangeSpec(self.entry or other.entry, {**self.inputs, **other.inputs},
                         {**self.params, **other.params})


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_PAIR = re.compile(rf"\[\s*({_NUM})\s*,\s*({_NUM})\s*\]")
_REL = re.compile(rf"(?:±|\+-|\+/-)\s*({_NUM})\s*%")


def parse_flag(text: str) -> tuple[str, object]:
    """`NAME=[lo, hi]` or `NAME=±P%` → (name, its spec)."""
    name, eq, value = text.partition("=")
    name, value = name.strip(), value.strip()
    if not eq or not name:
        raise RangesError(f"--range {text!r}: expected NAME=[lo, hi] or NAME=±P%")
    if m := _PAIR.fullmatch(value):
        pair = [float(m.group(1)), float(m.group(2))]
        _check_value(pair, f"--range {text!r}")
        return name, pair
    if m := _REL.fullmatch(value):
        return name, {"around": float(m.group(1)) / 100.0}
    raise RangesError(f"--range {text!r}: the range is [lo, hi] (two numbers) or ±P%")


def from_flags(flags: list[str], file: str | None = None) -> RangeSpec | None:
    """The ranges of `--ranges FILE` and the `--range` flags (a flag wins); None when
    neither is given. Which paths are parameters is decided later (`resolve`)."""
    spec = load_ranges(file) if file else RangeSpec()
    extra = RangeSpec()
    for f in flags:
        name, value = parse_flag(f)
        extra.inputs[name] = value
    if not file and not flags:
        return None
    return spec.merged(extra)


def load_ranges(spec: str) -> RangeSpec:
    data, where = read_json(spec, "ranges", RangesError)
    data = check_format(data, where, FORMAT, "ranges", {"format", "entry", "inputs", "params"},
                        RangesError)
    entry = data.get("entry")
    if entry is not None and not isinstance(entry, str):
        raise RangesError(f"{where}: \"entry\" is a function's name, a string")
    out = RangeSpec(entry)
    for key, target in (("inputs", out.inputs), ("params", out.params)):
        obj = data.get(key, {})
        if not isinstance(obj, dict):
            raise RangesError(f"{where}: \"{key}\" maps paths to ranges, an object")
        for path, value in obj.items():
            _check_value(value, f"{where}: {key} \"{path}\"")
            target[path] = value
    return out


def _check_value(value: object, what: str) -> None:
    if isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        if not value[0] <= value[1]:
            raise RangesError(f"{what}: lo {value[0]} is above hi {value[1]}")
        return
    if isinstance(value, dict) and set(value) == {"around"}:
        r = value["around"]
        if isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r < 1e300:
            return
        raise RangesError(f"{what}: \"around\" is a relative half-width ≥ 0")
    if isinstance(value, dict) and set(value) == {"lo", "hi"}:
        return
    raise RangesError(f"{what}: a range is [lo, hi], {{\"around\": r}} or "
                      "{\"lo\": array, \"hi\": array}")


def save_ranges(spec: RangeSpec, path: str) -> None:
    write_json(path, spec.to_json(), RangesError)


def resolve(spec: RangeSpec, inputs: dict[str, tuple[int, ...]],
            params: dict[str, np.ndarray], values: dict[str, np.ndarray]):
    """The box (`box.Ranges`): lo/hi arrays of each ranged input's and parameter's shape.
    A path of `spec.inputs` that names a parameter is taken as one."""
    out = Ranges({}, {})
    for path, value in list(spec.inputs.items()) + list(spec.params.items()):
        if path in inputs:
            shape, center, target = inputs[path], values.get(path), out.inputs
        elif path in params:
            shape, center, target = np.shape(params[path]), params[path], out.params
        else:
            known = ", ".join(list(inputs) + list(params)) or "none"
            raise RangesError(f"--range: `{path}` is neither an input nor a parameter of the "
                              f"entry (they are: {known})")
        target[path] = _arrays(path, value, shape, center)
    return out


def _arrays(path: str, value: object, shape, center) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(value, list):
        lo, hi = np.full(shape, float(value[0])), np.full(shape, float(value[1]))
    elif isinstance(value, dict) and "around" in value:
        c = np.asarray(center, dtype=np.float64)
        w = np.abs(c) * float(value["around"])  # type: ignore[arg-type]
        lo, hi = c - w, c + w
        # the box must hold the endpoints as written: widen by the f64 rounding of c ± w
        lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
        lo = np.where(w == 0, c, lo)
        hi = np.where(w == 0, c, hi)
    else:
        try:
            lo = np.asarray(value["lo"], dtype=np.float64)  # type: ignore[index]
            hi = np.asarray(value["hi"], dtype=np.float64)  # type: ignore[index]
        except (TypeError, ValueError):
            raise RangesError(f"the range of `{path}`: lo and hi are arrays of numbers") \
                from None
        if lo.shape != tuple(shape) or hi.shape != tuple(shape):
            raise RangesError(f"the range of `{path}` has shape {list(lo.shape)}, the value "
                              f"{list(shape)}")
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))) or np.any(lo > hi):
        raise RangesError(f"the range of `{path}`: lo ≤ hi, both finite")
    return lo, hi


def sample(box, rng: np.random.Generator, corners: bool = False):
    """A point of the box: uniform in each element's range (inputs and parameters); with
    `corners`, a random corner (each element at its lo or its hi)."""
    def one(lo, hi):
        if corners:
            return np.where(rng.random(np.shape(lo)) < 0.5, lo, hi).astype(np.float64)
        return lo + (hi - lo) * rng.random(np.shape(lo))
    return ({p: one(lo, hi) for p, (lo, hi) in box.inputs.items()},
            {p: one(lo, hi) for p, (lo, hi) in box.params.items()})


def corners(box, limit: int = 4096):
    """Every corner of the box when it has at most log2(limit) ranged scalars (else
    none): (inputs, params) pairs."""
    items = [(kind, p, i) for kind, d in (("i", box.inputs), ("p", box.params))
             for p, (lo, hi) in d.items() for i in range(np.size(lo))
             if np.reshape(lo, -1)[i] != np.reshape(hi, -1)[i]]
    if 2 ** len(items) > limit:
        return []
    out = []
    for mask in range(2 ** len(items)):
        ins = {p: np.array(lo, copy=True) for p, (lo, _) in box.inputs.items()}
        pars = {p: np.array(lo, copy=True) for p, (lo, _) in box.params.items()}
        for bit, (kind, p, i) in enumerate(items):
            if mask >> bit & 1:
                src = box.inputs if kind == "i" else box.params
                (ins if kind == "i" else pars)[p].reshape(-1)[i] = np.reshape(src[p][1], -1)[i]
        out.append((ins, pars))
    return out


def describe(box) -> str:
    """`u ∈ [-100, 100], v ∈ [20, 2e4]` (a tensor: its elements' hull and count)."""
    parts = []
    for p, (lo, hi) in list(box.inputs.items()) + list(box.params.items()):
        n = np.size(lo)
        s = f"{p} ∈ [{_g(np.min(lo))}, {_g(np.max(hi))}]"
        parts.append(s + (f" ({n} elements, each its own)" if n > 1 else ""))
    return ", ".join(parts) or "no ranges (every input a point)"


def _g(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else str(x)
