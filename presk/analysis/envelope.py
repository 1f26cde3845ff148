"""The envelope: how large each site's values get, how much its sums cancel, and how
much rounding them to f64, f32 or bf16 would move them, measured on the exact reference.

`calibrate(module, entry, dims, bits=128, samples=1, …)` runs the entry in MPFR at `bits`
on `samples` samples of its inputs (sample 0 from `inputs_path` or the seed, sample i > 0
from seed + i; the same weights for every sample) and records, at every site the run
passes through (every call, every fold iteration, every sample):

- `max_abs`: the largest |x| over the site's values (a tree's or tuple's: over its
  tensors); `count`: the elements of one value (the largest, if calls differ);
- `condition`, for a sum, mean, logsumexp, sum_to, dot or contract: the largest, over the
  result's elements, of Σ|terms| / |Σ terms| (a dot's terms are xᵢwᵢ; a logsumexp's are
  exp(xᵢ − max), all positive: 1). Σ|terms| is summed in f64 (terms of one sign: a
  relative k·2⁻⁵³), |Σ terms| is the MPFR value;
- `rounding[t]` for t in f64, f32, bf16: the largest |fl_t(x) − x| over the site's values,
  fl_t rounding the MPFR value directly (one rounding, never through a float64) to the
  type's precision and exponent range, to nearest even, with subnormals; its ratio to
  u_t · max_abs; and whether every value is representable in t (`exact`).

The parameters get the same record (no condition) keyed by path. A site whose value is
an f64 scalar (a hyperparameter such as `%3 : f64 = 1e-6`) is recorded with
`hyperparameter: true`: no type is chosen for it, but its rounding is what the reference
reports. The artifact `presk-envelope/1` is documented in docs/artifacts.md; the reader is
`load_envelope` (EnvelopeError, one line for the user). JSON has no infinity or NaN: such
numbers are written as the strings "inf" and "nan".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import gmpy2
import numpy as np

from .artifact import check_format, read_json, write_json

FORMAT = "presk-envelope/1"


class EnvelopeError(Exception):
    """An envelope that cannot be read, written or does not fit: one line for the user."""


# ---- the types a value can be rounded to ----

@dataclass(frozen=True)
class FloatType:
    """An IEEE-style binary format as MPFR sees it: `precision` bits of significand, a
    value m·2^e with ½ ≤ m < 1 and emin ≤ e ≤ emax (subnormals below 2^(emin+precision-2))."""

    name: str
    precision: int
    emin: int
    emax: int

    @property
    def unit_roundoff(self) -> float:
        return 2.0 ** -self.precision

    def context(self) -> gmpy2.context:
        return gmpy2.context(precision=self.precision, emin=self.emin, emax=self.emax,
                             subnormalize=True)


# f64: 2^-1074 … (2 − 2^-52)·2^1023; f32: 2^-149 … (2 − 2^-23)·2^127; bf16 has f32's exponent
# range with 8 bits of significand: 2^-133 … (2 − 2^-7)·2^127.
FLOAT_TYPES: dict[str, FloatType] = {
    "f64": FloatType("f64", 53, -1073, 1024),
    "f32": FloatType("f32", 24, -148, 128),
    "bf16": FloatType("bf16", 8, -132, 128),
}
TYPE_NAMES = tuple(FLOAT_TYPES)


def rounder(type_name: str):
    """fl_t on numpy object arrays of mpfr: each value rounded once, to nearest even, to
    the type (subnormal and overflowing to ±inf as the type does)."""
    return np.frompyfunc(FLOAT_TYPES[type_name].context().plus, 1, 1)


def round_to(type_name: str, values: Any) -> np.ndarray:
    """The values (mpfr, floats, or arrays of them) rounded to the type, as mpfr."""
    return np.asarray(rounder(type_name)(_as_mpfr(np.asarray(values, dtype=object))),
                      dtype=object)


def rounding_error(type_name: str, values: Any) -> np.ndarray:
    """|fl_t(x) − x| per element, as mpfr, computed exactly."""
    x = _as_mpfr(np.asarray(values, dtype=object))
    return _errors(x, rounder(type_name)(x))


_MPFR = type(gmpy2.mpfr(0))


def _as_mpfr(x: np.ndarray) -> np.ndarray:
    """Every element an mpfr: a float converts exactly (at 53 bits)."""
    if not x.size:
        return x
    convert = np.frompyfunc(lambda v: v if isinstance(v, _MPFR) else gmpy2.mpfr(float(v), 53),
                            1, 1)
    return np.asarray(convert(x), dtype=object)


_SUBTRACT: dict[int, np.ufunc] = {}


def _errors(x: np.ndarray, y: np.ndarray, bits: int | None = None) -> np.ndarray:
    """|y − x| per element, exactly. x − fl_t(x) is a multiple of x's last bit and below
    x's leading one, so x's own precision holds it: subtract at `bits`, at least the
    largest precision in x (found when not given)."""
    if not np.size(x):
        return np.asarray(x)
    if bits is None:
        bits = max(v.precision for v in x.reshape(-1))
    bits = max(53, bits)
    if bits not in _SUBTRACT:
        _SUBTRACT[bits] = np.frompyfunc(gmpy2.context(precision=bits).sub, 2, 1)
    return np.abs(np.asarray(_SUBTRACT[bits](y, x), dtype=object))


# ---- records ----

@dataclass
class Rounding:
    max_error: float  # the largest |fl_t(x) − x|
    ratio: float  # max_error / (u_t · max_abs); 0 when max_abs is 0
    exact: bool  # every value representable in the type

    def to_json(self) -> dict:
        return {"max_error": _num(self.max_error), "ratio": _num(self.ratio),
                "exact": self.exact}


@dataclass
class Record:
    """A site's or a parameter's figures."""

    max_abs: float
    count: int
    rounding: dict[str, Rounding]
    condition: float | None = None  # sums and contractions only
    op: str | None = None  # the operation's name (`dot`, `mean`, `field`…); sites only
    hyperparameter: bool = False  # an f64 scalar, not a real: no type is chosen for it

    def to_json(self) -> dict:
        out: dict[str, Any] = {}
        if self.op is not None:
            out["op"] = self.op
        out["max_abs"] = _num(self.max_abs)
        out["count"] = self.count
        if self.condition is not None:
            out["condition"] = _num(self.condition)
        if self.hyperparameter:
            out["hyperparameter"] = True
        out["rounding"] = {t: r.to_json() for t, r in self.rounding.items()}
        return out


@dataclass
class Envelope:
    entry: str
    dims: dict[str, int]
    bits: int
    samples: int
    weights: str  # "initial, seed 0", the weights file, or "none" (no parameter tree)
    inputs: str  # sample 0's: "seed 0" or the inputs file (sample i > 0: seed + i)
    sites: dict[str, Record] = field(default_factory=dict)
    params: dict[str, Record] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "entry": self.entry, "dims": dict(self.dims), "bits": self.bits,
            "samples": self.samples, "weights": self.weights, "inputs": self.inputs,
            "sites": {s: r.to_json() for s, r in self.sites.items()},
            "params": {p: r.to_json() for p, r in self.params.items()},
        }

    def seed(self) -> int | None:
        """The seed sample 0's inputs were drawn from (`"seed S"`), or None (a file)."""
        head, _, number = self.inputs.partition(" ")
        return int(number) if head == "seed" and number.lstrip("-").isdigit() else None

    def weights_file(self) -> str | None:
        """The safetensors file of the weights it was calibrated with, or None (the
        initializers, or no parameter tree)."""
        return None if self.weights in ("none", "") or self.weights.startswith("initial") \
            else self.weights

    def inputs_file(self) -> str | None:
        """The safetensors file sample 0's inputs came from, or None (the seed)."""
        return None if self.inputs.startswith("seed ") else self.inputs

    def sums(self) -> dict[str, Record]:
        """The sites with a condition number: the sums and contractions."""
        return {s: r for s, r in self.sites.items() if r.condition is not None}


def _num(x: float) -> float | str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(x)


# ---- the measurement ----

class _Stats:
    """Running maxima of one site or parameter. The maxima are kept as f64 (the artifact
    holds f64 numbers; rounding to f64 keeps their order); exactness is decided on the
    MPFR values."""

    def __init__(self, op: str | None = None, hyperparameter: bool = False) -> None:
        self.op = op
        self.hyperparameter = hyperparameter
        self.count = 0
        self.max_abs = _NOTHING
        self.errors = {t: _NOTHING for t in TYPE_NAMES}
        self.inexact = {t: False for t in TYPE_NAMES}
        self.condition = _NOTHING

    def add_stats(self, figures: "_Figures") -> None:
        max_abs, errors, inexact = figures
        self.max_abs = _max(self.max_abs, max_abs)
        for t in TYPE_NAMES:
            self.errors[t] = _max(self.errors[t], errors[t])
            self.inexact[t] = self.inexact[t] or inexact[t]

    def add_condition(self, c: float) -> None:
        self.condition = _max(self.condition, c)

    def record(self, is_sum: bool) -> Record:
        max_abs = max(self.max_abs, 0.0)
        rounding = {}
        for t, ft in FLOAT_TYPES.items():
            err = max(self.errors[t], 0.0)
            ratio = 0.0 if max_abs == 0 or err == 0 else err / max_abs * 2.0 ** ft.precision
            rounding[t] = Rounding(err, ratio, not self.inexact[t])
        condition = None
        if is_sum:
            condition = 1.0 if self.condition == _NOTHING else self.condition
        return Record(max_abs, self.count, rounding, condition, self.op, self.hyperparameter)


_NOTHING = -math.inf
_Figures = tuple  # (max |x|, {type: max |fl_t(x) − x|}, {type: some value inexact})


def _max(a: float, b: float) -> float:
    """The larger, NaN ignored."""
    return a if b != b or b <= a else b


def _nanmax(x: np.ndarray) -> float:
    x = x[~np.isnan(x)]
    return float(x.max()) if x.size else _NOTHING


def _array_stats(a: np.ndarray, bits: int | None = None) -> _Figures:
    """(max |x|, {type: max |fl_t(x) − x|}, {type: some value not representable}), the
    maxima in f64. `bits`: at least the precision of every element (found when None)."""
    x = _as_mpfr(np.asarray(a, dtype=object).reshape(-1))
    if x.size == 0:
        return _NOTHING, {t: _NOTHING for t in TYPE_NAMES}, {t: False for t in TYPE_NAMES}
    max_abs = _nanmax(np.abs(x).astype(np.float64))
    errors, inexact = {}, {}
    for t in TYPE_NAMES:
        e = _errors(x, rounder(t)(x), bits)
        ef = e.astype(np.float64)
        errors[t] = _nanmax(ef)
        zero = ef == 0  # a NaN is not representable; an error below f64's range is an error
        inexact[t] = bool(not zero.all() or np.any(e[zero] != 0))
    return max_abs, errors, inexact


def _leaves(value: Any) -> list[np.ndarray]:
    """A value's tensors: a tuple's, or itself (a tree's are the recorder's)."""
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [np.asarray(value, dtype=object)]


_SUM_OPS: tuple[type, ...] | None = None


def _sum_ops() -> tuple[type, ...]:
    global _SUM_OPS
    if _SUM_OPS is None:
        from ..dialects import core as C
        _SUM_OPS = (C.SumOp, C.MeanOp, C.LogSumExpOp, C.DotOp, C.ContractOp, C.SumToOp)
    return _SUM_OPS


class _Recorder:
    """The interpreter's `trace_op`: folds every op's value into its site's stats."""

    def __init__(self, module, bits: int) -> None:
        from .interpret import Interpreter
        from .numbers import F64
        self.bits = max(bits, 53)  # every value's precision is at most this
        self.sites: dict[str, _Stats] = {}
        # Σ|terms| of a sum, in f64: its terms have one sign, so f64 holds it to a
        # relative k·2⁻⁵³, far inside the figure's four digits; |Σ terms| is the MPFR value.
        self.f64 = Interpreter(module, F64())
        # A parameter tensor's figures, once per (tensor, selection): a fold's iterations,
        # every call and every sample read the same parameters. `stacks` holds how many
        # leading axes of the entry's parameter tensors are stack axes (by id).
        self._leaf_cache: dict[tuple, tuple] = {}
        self.stacks: dict[int, int] = {}

    def __call__(self, op, operands: list, value: Any) -> None:
        from ..dialects import core as C
        from .interpret import Tree
        site = op.site.data
        stats = self.sites.get(site)
        if stats is None:
            hyper = isinstance(value, float) and not isinstance(op.results[0].type, C.TensorAttr)
            stats = self.sites[site] = _Stats(op.name.split(".", 1)[-1], hyper)
        if isinstance(value, Tree):
            count = 0
            for path, array in value.data.items():
                if path.startswith(value.prefix):
                    size, figures = self.leaf(array, value.select)
                    count += size
                    stats.add_stats(figures)
            stats.count = max(stats.count, count)
        else:
            arrays = _leaves(value)
            stats.count = max(stats.count, sum(int(a.size) for a in arrays))
            for a in arrays:
                stats.add_stats(_array_stats(a, self.bits))
        if isinstance(op, _sum_ops()):
            stats.add_condition(self._condition(op, operands, value))

    def leaf(self, array: np.ndarray, select: tuple[int, ...]) -> tuple[int, _Figures]:
        """(elements, figures) of a tree's tensor as `select` views it; a view of a stacked
        parameter above its stack axes combines its copies' figures."""
        key = (id(array), select)
        if key not in self._leaf_cache:
            view = np.asarray(array[select] if select else array, dtype=object)
            if len(select) < self.stacks.get(id(array), 0):
                parts = [self.leaf(array, select + (i,))[1] for i in range(view.shape[0])]
                figures = (max(p[0] for p in parts),
                           {t: max(p[1][t] for p in parts) for t in TYPE_NAMES},
                           {t: any(p[2][t] for p in parts) for t in TYPE_NAMES})
            else:
                figures = _array_stats(view, self.bits)
            self._leaf_cache[key] = (array, int(view.size), figures)  # array: kept alive
        _, size, figures = self._leaf_cache[key]
        return size, figures

    def _condition(self, op, operands: list, value: Any) -> float:
        """max over the result's elements of Σ|terms| / |Σ terms|."""
        from ..dialects import core as C
        if isinstance(op, C.LogSumExpOp):
            return 1.0  # its terms exp(xᵢ − max) are all positive
        if isinstance(op, (C.MeanOp, C.SumOp, C.SumToOp)):
            operands = operands[:1]
        floats = [np.asarray(a, dtype=object).astype(np.float64) for a in operands]
        if all((f >= 0).all() or (f <= 0).all() for f in floats):
            return 1.0  # terms of one sign do not cancel
        absolute = [np.abs(f) for f in floats]
        with np.errstate(all="ignore"):
            magnitude = np.asarray(self.f64.step(op, absolute), dtype=np.float64).reshape(-1)
            exact = np.asarray(value, dtype=object).reshape(-1)
            total = np.abs(exact.astype(np.float64))
            c = magnitude / total
        zero = total == 0
        if zero.any():  # an exact zero: no terms (1) or terms that cancel (∞)
            really = np.array([v == 0 for v in exact[zero]], dtype=bool)
            c[zero] = np.where(really, np.where(magnitude[zero] == 0, 1.0, math.inf), math.inf)
        return max(_nanmax(c), 1.0)  # Σ|terms| ≥ |Σ terms|: below 1 is f64's rounding


def calibrate(module, entry_name: str, dims: Mapping[str, int], bits: int = 128,
              samples: int = 1, seed: int = 0, weights_path: str | None = None,
              inputs_path: str | None = None) -> Envelope:
    """Run `entry_name` in MPFR at `bits` on `samples` samples and record its envelope.
    Raises WeightsError for weights or inputs that do not fit, InterpretError for a value
    the interpreter cannot compute."""
    from . import entry as E
    from .interpret import Interpreter, Tree
    from .numbers import MPFR

    if samples < 1:
        raise EnvelopeError(f"--samples {samples}: at least one sample")
    entry = E.prepare(module, entry_name, dict(dims))
    numbers = MPFR(bits)
    params = E.weights(entry, seed, weights_path)
    recorder = _Recorder(module, bits)
    interpreter = Interpreter(module, numbers, trace_op=recorder)
    tree = None  # the parameters in MPFR, one tree for every sample
    for i in range(samples):
        values = E.inputs(entry, seed + i, inputs_path if i == 0 else None)
        args = E.arguments(entry, numbers, params if tree is None else {}, values)
        for k, arg in enumerate(args):
            if isinstance(arg, Tree):
                if tree is None:
                    tree = arg
                    stacks = {f.path: f.stack for f in entry.fields}
                    recorder.stacks = {id(a): stacks.get(p, 0) for p, a in tree.data.items()}
                args[k] = tree
        interpreter.run(entry_name, args, entry.dims)

    from ..dialects import core as C
    order = [op.site.data for f in module.ops if isinstance(f, C.FuncOp)
             for op in f.body.block.ops if not isinstance(op, C.ReturnOp)]
    sums = set()
    for f in module.ops:
        if isinstance(f, C.FuncOp):
            sums.update(op.site.data for op in f.body.block.ops if isinstance(op, _sum_ops()))
    sites = {s: recorder.sites[s].record(s in sums) for s in order if s in recorder.sites}
    out_params = {}
    for path, array in (tree.data.items() if tree is not None else ()):
        stats = _Stats()
        stats.count, figures = recorder.leaf(array, ())
        stats.add_stats(figures)
        out_params[path] = stats.record(False)
    return Envelope(
        entry_name, dict(entry.dims), bits, samples,
        "none" if not entry.fields else
        f"initial, seed {seed}" if weights_path is None else weights_path,
        f"seed {seed}" if inputs_path is None else inputs_path,
        sites, out_params)


# ---- the artifact ----

def save_envelope(envelope: Envelope, path: str) -> None:
    """Write atomically: a temporary file beside it, then a rename."""
    write_json(path, envelope.to_json(), EnvelopeError, allow_nan=False)


def load_envelope(spec: str) -> Envelope:
    """From `@path`, a path, or inline JSON text."""
    data, where = read_json(spec, "envelope", EnvelopeError)
    return parse_envelope(data, where)


_TOP = ("format", "entry", "dims", "bits", "samples", "weights", "inputs", "sites", "params")


def parse_envelope(data: object, where: str = "the envelope") -> Envelope:
    data = check_format(data, where, FORMAT, "envelope", set(_TOP), EnvelopeError)
    if missing := [k for k in _TOP if k not in data]:
        raise EnvelopeError(f"{where}: no \"{missing[0]}\" field")
    entry, weights, inputs = data["entry"], data["weights"], data["inputs"]
    for name, v in (("entry", entry), ("weights", weights), ("inputs", inputs)):
        if not isinstance(v, str):
            raise EnvelopeError(f"{where}: \"{name}\" is a string")
    dims = data["dims"]
    if not isinstance(dims, dict) or not all(_is_int(v) for v in dims.values()):
        raise EnvelopeError(f"{where}: \"dims\" maps dim names to integers")
    for name in ("bits", "samples"):
        if not _is_int(data[name]) or data[name] < 1:
            raise EnvelopeError(f"{where}: \"{name}\" is a positive integer")
    sites = _records(data["sites"], "sites", where, site=True)
    params = _records(data["params"], "params", where, site=False)
    return Envelope(entry, dict(dims), data["bits"], data["samples"], weights, inputs,
                    sites, params)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _records(obj: object, what: str, where: str, site: bool) -> dict[str, Record]:
    if not isinstance(obj, dict):
        raise EnvelopeError(f"{where}: \"{what}\" maps names to records, an object")
    allowed = {"max_abs", "count", "rounding"}
    if site:
        allowed |= {"op", "condition", "hyperparameter"}
    out = {}
    for name, rec in obj.items():
        at = f"{where}: {what} \"{name}\""
        if not isinstance(rec, dict):
            raise EnvelopeError(f"{at} is not an object")
        if unknown := sorted(set(rec) - allowed):
            raise EnvelopeError(f"{at}: unknown field \"{unknown[0]}\"")
        for key in ("max_abs", "count", "rounding"):
            if key not in rec:
                raise EnvelopeError(f"{at}: no \"{key}\" field")
        if not _is_int(rec["count"]) or rec["count"] < 0:
            raise EnvelopeError(f"{at}: \"count\" is a non-negative integer")
        op = rec.get("op")
        if op is not None and not isinstance(op, str):
            raise EnvelopeError(f"{at}: \"op\" is a string")
        hyper = rec.get("hyperparameter", False)
        if not isinstance(hyper, bool):
            raise EnvelopeError(f"{at}: \"hyperparameter\" is true or false")
        condition = rec.get("condition")
        rounding = rec["rounding"]
        if not isinstance(rounding, dict) or set(rounding) != set(TYPE_NAMES):
            raise EnvelopeError(f"{at}: \"rounding\" has exactly the types "
                                + ", ".join(TYPE_NAMES))
        parsed = {}
        for t in TYPE_NAMES:
            r = rounding[t]
            if not isinstance(r, dict) or set(r) != {"max_error", "ratio", "exact"} \
                    or not isinstance(r["exact"], bool):
                raise EnvelopeError(f"{at}: rounding \"{t}\" has max_error, ratio and exact "
                                    "(true or false)")
            parsed[t] = Rounding(_float(r["max_error"], f"{at}: {t} max_error"),
                                 _float(r["ratio"], f"{at}: {t} ratio"), r["exact"])
        out[name] = Record(_float(rec["max_abs"], f"{at}: max_abs"), rec["count"], parsed,
                           None if condition is None else _float(condition, f"{at}: condition"),
                           op, hyper)
    return out


def _float(v: object, what: str) -> float:
    if isinstance(v, str) and v in ("inf", "-inf", "nan"):
        return float(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise EnvelopeError(f"{what} is a number (or \"inf\", \"nan\"), not {json.dumps(v)}")
