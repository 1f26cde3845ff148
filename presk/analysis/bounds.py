"""Bounds on an entry's output error under a realization (reference §6.4).

Four rules, each a figure on |L̂ − L|, L the exact output and L̂ what the kernels compute
under the realization (docs/precision.md states what each assumes):

- `k` and `normwise`: a forward running error analysis, op by op through the Core
  functions (calls and folds included), on an abstract value per element: an interval
  [lo, hi] holding the exact value and a bound e on |computed − exact| (and a relative
  bound r where one is known). The inputs are POINTS: the data inputs the envelope was
  calibrated on (its samples, seed + i; exact f64 values, as the reference reads them)
  and the parameters (exact, each with its rounding to its stored type, f64 → f32 → bf16
  as the kernels store it). The intervals are computed in f64 and widened outward by
  4 ulps after every operation, so they hold the exact value. Every arithmetic operation
  in type t adds u(t)·(max|value| + e) (4·u(t) for a library function), a sum of n terms
  γ_k(t)·Σ(|terms| + e) (k = ⌈n/P⌉ − 1 + ⌈log₂ min(n, P)⌉ per axis, the blocked order of
  presk/summation.py; a contraction's k = n − 1, its products rounded each — or, where
  the realization fuses its multiply-adds, exact but the first), every operand of an op
  computing in t ≠ f64 a conversion
  u(t)·(|operand| + e); errors propagate with worst-case derivative bounds over the
  interval widened by e (mean value theorem: no first-order truncation). After each op
  the interval is intersected with the envelope's [−max|v|, max|v|] at that site.
  `normwise` keeps one error and one relative error per value (the max over the tensor
  after each op); `k` keeps one absolute error per value and no relative error (so a
  division or square root is charged through its denominator's smallest magnitude).
  Both are rigorous bounds FOR THE SAMPLED INPUTS (the largest over the samples), not for
  other inputs: nothing is claimed between samples.
- `cond`: Σ_sites s·R + Σ_params s·r, s = ‖∂L/∂v‖₁ (one MPFR reverse sweep at the
  envelope's first sample), R the site's local rounding-error bound: c·u(t)·max|v| for an
  element-wise op (c = 1 per arithmetic rounding, 4 for a library function, plus one
  u(t)·max|v| per operand converted to t), for an add or sub u(t)·(max|v| + max|a| +
  max|b|) (the operands' conversions charged at the operands' magnitudes: under
  cancellation they dwarf the result's), γ_k(t)·condition·max|v| + u(t)·max|v| for a
  sum or contraction (k as above) (Σ|terms| = condition·|Σ|), the measured rounding error
  of a parameter stored narrower. FIRST ORDER: it drops products of errors and assumes
  the sensitivities at the exact values hold at the computed ones; sound to first order
  at the envelope's first sample only.
- `rss`: √Σ(s·R)², an estimate (errors of independent sign would add so), not a bound.

The measurement: the kernel interpreter under the realization against MPFR at `bits`,
max |L̂ − L| over the output's elements, at the first sample.

One file, though long: the forward analysis of `k` and `normwise` (`EB`) and the local
bounds of `cond` (`local_rounding`) share one rounding model (`gamma`, u(t), the stored
types) and are computed and reported together by `bounds`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .. import ops
from ..summation import nested_roundings
from .numbers import ByEnclosure, object_array, paired
from .realization import Realization

U = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "bf16": 2.0 ** -8}
LIB = ops.LIBRARY_ULPS  # ulps charged for a library function (exp, log, tanh, gelu…)
SLACK = 1.0 + 1e-9  # the analysis' own f64 arithmetic
RULES = ("k", "normwise", "cond", "rss")
SOUND = ("k", "normwise", "cond")


class BoundsError(Exception):
    """An envelope or realization that does not fit the entry: one line for the user."""


def gamma(n: int, t: str) -> float:
    nu = n * U[t]
    return math.inf if nu >= 1 else nu / (1 - nu)


# ---- the abstract value ----

class EB(ByEnclosure):
    """An element: the exact value x lies in [lo, hi]; |computed − x| ≤ e, and ≤ r·|x|
    (r a relative bound, inf when none is known; e is kept ≤ r·max|x|)."""

    __slots__ = ("lo", "hi", "e", "r")
    t = "f64"  # the type the current op computes in (set by the interpreter)

    def __init__(self, lo: float, hi: float, e: float = 0.0, r: float = math.inf):
        self.lo, self.hi = float(lo), float(hi)
        e = float(e)
        r = float(r)
        if e != e:
            e = math.inf
        if r != r or r < 0:
            r = math.inf
        if r < math.inf:
            e = min(e, r * max(abs(self.lo), abs(self.hi)) * SLACK)
        self.e, self.r = e, r

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def mig(self) -> float:  # min |x| over the interval
        return 0.0 if self.lo <= 0 <= self.hi else min(abs(self.lo), abs(self.hi))

    @property
    def nonneg(self) -> bool:
        return self.lo >= 0

    @property
    def nonpos(self) -> bool:
        return self.hi <= 0

    def _r(self, lo: float, hi: float, e: float, c: float = 1.0, r: float = math.inf) -> "EB":
        lo, hi = _outward(lo, hi)
        m = max(abs(lo), abs(hi))
        cu = c * U[EB.t]
        return EB(lo, hi, (e + _m(cu, m + e)) * SLACK, (r + cu + _m(r, cu)) * SLACK)

    def __add__(self, o):
        o = _eb(o)
        same = (self.nonneg and o.nonneg) or (self.nonpos and o.nonpos)
        return self._r(self.lo + o.lo, self.hi + o.hi, _add(self.e, o.e),
                       r=max(self.r, o.r) if same else math.inf)

    __radd__ = __add__

    def __sub__(self, o):
        return self + (-_eb(o))

    def __rsub__(self, o):
        return _eb(o) - self

    def __neg__(self):
        return EB(-self.hi, -self.lo, self.e, self.r)

    def __mul__(self, o):
        o = _eb(o)
        p = (self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi)
        p = [0.0 if v != v else v for v in p]
        e = _add(_add(_m(self.mag, o.e), _m(o.mag, self.e)), _m(self.e, o.e))
        return self._r(min(p), max(p), e, r=self.r + o.r + _m(self.r, o.r))

    __rmul__ = __mul__

    def __truediv__(self, o):
        o = _eb(o)
        mig = o.mig
        rb = min(o.r, o.e / mig if mig > 0 else math.inf)
        if not (mig > 0 and rb < 1):
            return EB(-math.inf, math.inf, math.inf)
        q = [a / b for a in (self.lo, self.hi) for b in (o.lo, o.hi)]
        q = [0.0 if v != v else v for v in q]
        qm = max(abs(v) for v in q)
        e = self.e / (mig * (1 - rb)) + qm * rb / (1 - rb)
        return self._r(min(q), max(q), e, r=(self.r + rb) / (1 - rb))

    def __rtruediv__(self, o):
        return _eb(o) / self

    def __abs__(self):
        return EB(self.mig, self.mag, self.e, self.r)

    def _coerce(self, o) -> EB:
        return _eb(o)

    def __float__(self):
        return 0.5 * (self.lo + self.hi)

    def __repr__(self):
        return f"EB([{self.lo:.3g}, {self.hi:.3g}] ± {self.e:.3g}, rel {self.r:.3g})"


def _outward(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened by 4 ulps each way: the interval is computed in f64 (round to
    nearest, library functions within 1 ulp), and must still hold the exact value."""
    w = 2.0 ** -50
    lo2, hi2 = lo - abs(lo) * w - 1e-300, hi + abs(hi) * w + 1e-300
    # round to nearest keeps the sign: a nonnegative endpoint stays one
    return (max(lo2, 0.0) if lo >= 0 else lo2), (min(hi2, 0.0) if hi <= 0 else hi2)


def _m(a: float, b: float) -> float:
    """a·b with 0·inf = 0."""
    return 0.0 if a == 0 or b == 0 else a * b


def _add(a: float, b: float) -> float:
    return a + b


def _eb(x) -> EB:
    if isinstance(x, np.ndarray) and x.shape == () and isinstance(x.item(), EB):
        return x.item()  # a 0-d array holding one (numpy's indexing gives those): its error
    return x if isinstance(x, EB) else EB(float(x), float(x))


def _from_row(f: ops.Function):
    """The enclosure the row's `bound` describes (a monotone or a bounded function), with
    the rounding the row charges."""
    assert f.bound is not None

    def g(x: EB) -> EB:
        lo, hi, e = f.bound.enclose(x.lo, x.hi, x.e)
        return x._r(lo, hi, e, f.bound_ulps)
    return g


def _sqrt(x: EB) -> EB:
    lo = max(x.lo, 0.0)
    hi = max(x.hi, 0.0)
    e = math.sqrt(x.e) if math.isfinite(x.e) else math.inf
    if lo > 0:
        e = min(e, x.e / math.sqrt(lo))
    return x._r(math.sqrt(lo), math.sqrt(hi), e, r=x.r if x.r < 1 else math.inf)


def _exp(x: EB) -> EB:
    hi = min(x.hi + x.e, 709.0)
    return x._r(math.exp(max(x.lo, -745)), math.exp(min(x.hi, 709)), _m(math.exp(hi), x.e),
                LIB, r=math.expm1(min(x.e, 709)))


def _log(x: EB) -> EB:
    if x.lo - x.e <= 0:
        return EB(-math.inf, math.inf, math.inf)
    return x._r(math.log(x.lo), math.log(x.hi), x.e / (x.lo - x.e), LIB)


def _gelu_f(v: float) -> float:
    return 0.5 * v * (1 + math.erf(v / math.sqrt(2)))


_GELU_ARGMIN, _GELU_MIN = -0.7517916, -0.1700407  # the minimum (rounded down)


def _gelu(x: EB) -> EB:
    """gelu decreases below its argmin and increases above it; |gelu'| ≤ 1.1290."""
    a, b = _gelu_f(x.lo), _gelu_f(x.hi)
    lo, hi = min(a, b), max(a, b)
    if x.lo <= _GELU_ARGMIN <= x.hi:
        lo = _GELU_MIN
    return x._r(lo, hi, 1.1290 * x.e, LIB)


def _relu(x: EB) -> EB:
    return EB(max(x.lo, 0.0), max(x.hi, 0.0), x.e, x.r if x.r < 1 else math.inf)


def _binmax(a: EB, b: EB) -> EB:
    return EB(max(a.lo, b.lo), max(a.hi, b.hi), max(a.e, b.e))  # no relative bound


def _binmin(a: EB, b: EB) -> EB:
    return EB(min(a.lo, b.lo), min(a.hi, b.hi), max(a.e, b.e))


ENCLOSURES: dict[str, Callable] = {
    "neg": lambda x: -x, "abs": abs, "sqrt": _sqrt, "exp": _exp, "log": _log, "relu": _relu,
    "gelu": _gelu, "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "maximum": _binmax, "minimum": _binmin,
}
"""The enclosure of each element-wise function (a row of presk/ops) whose row describes
none (`bound`), by the row's name: EB's own arithmetic (numpy's ufunc applies it), or a
rule on one EB that keeps a relative bound or knows a minimum. A row in neither place
(pow, erf_slope, gelu_slope) is refused."""


def _unsupported(name):
    def f(*_):
        raise BoundsError(f"the bounds do not cover `{name}` yet")
    return f


def _enclosures(arity: int) -> dict[str, Callable]:
    """Each Core function of this arity's enclosure over arrays of EB, by name."""
    out = {}
    for f in ops.rows(arity=arity, core=True):
        rule = _from_row(f) if f.bound is not None else ENCLOSURES.get(f.name)
        if rule is None:
            out[f.name] = _unsupported(f.name)
        else:
            out[f.name] = rule if isinstance(rule, np.ufunc) else np.frompyfunc(rule, arity, 1)
    return out


def _numbers():
    from .numbers import Numbers

    class Bounded(Numbers):
        """The interpreter's number system on arrays of EB."""

        name = "bounds"

        def __init__(self) -> None:
            self._unary = _enclosures(1)
            self._binary = _enclosures(2)

        def array(self, values):
            # an f64 constant, exact (the reference's too)
            return object_array(values, lambda v: EB(v, v, 0.0, 0.0))

        def to_f64(self, x):
            x = np.asarray(x, dtype=object)
            return np.array([float(v) for v in x.reshape(-1)]).reshape(x.shape)

        def powi(self, x, n):
            out = super().powi(x, n)
            if n % 2 == 0:  # an even power is ≥ 0 whatever the interval analysis says
                f = np.frompyfunc(lambda v: EB(max(v.lo, 0.0), v.hi, v.e, v.r), 1, 1)
                out = np.asarray(f(out), dtype=object) if isinstance(out, np.ndarray) \
                    else f(out)
            return out

        def heaviside(self, x, at_zero):
            def step(v: EB) -> EB:
                if v.lo - v.e > 0:
                    return EB(1, 1)
                if v.hi + v.e < 0:
                    return EB(0, 0)
                return EB(min(0, at_zero), max(1, at_zero), 1.0)
            return np.asarray(np.frompyfunc(step, 1, 1)(x), dtype=object)

        def reduce(self, name, x, axis):
            if name in ("max", "min"):
                x = np.asarray(x)
                if axis is None:
                    x, axis = x.reshape(-1), 0
                extremum = {"max": "maximum", "min": "minimum"}[name]
                return self._binary[extremum].reduce(x, axis=axis)
            return super().reduce(name, x, axis)

        roundings = 0  # the γ index of the last sum (what the site records)

        def sum(self, x, axes=None, keepdims=False):
            """Σ in the blocked order (presk/summation.py): γ_k·Σ|terms|, k the roundings
            on a term's path (Σ over the axes of ⌈n/P⌉ − 1 + ⌈log₂ min(n, P)⌉), charged
            at the end (the additions themselves exact here)."""
            x = np.asarray(x)
            ax = tuple(range(x.ndim)) if axes is None else axes
            sizes = [x.shape[a] for a in ax] if x.ndim else []
            return self._charged(x, axes, keepdims, nested_roundings(sizes))

        def _charged(self, x, axes, keepdims, k: int):
            """Σ over `axes` exactly, then γ_k(t)·Σ(|terms| + e) charged."""
            x = np.asarray(x)
            self.roundings = k
            t = EB.t
            EB.t = "exact"
            try:
                total = super().sum(x, axes, keepdims)
                absx = np.frompyfunc(lambda v: v.mag + v.e, 1, 1)(x)
                absx = np.asarray(absx, dtype=np.float64)
                ax = tuple(range(x.ndim)) if axes is None else axes
                s = np.sum(absx, axis=ax, keepdims=keepdims) if x.ndim else absx
            finally:
                EB.t = t
            g = gamma(k, t)
            flat = list(x.reshape(-1))
            one_sign = flat and (all(v.nonneg for v in flat) or all(v.nonpos for v in flat))
            rho = max((v.r for v in flat), default=0.0) if one_sign else math.inf
            rr = rho + g + _m(rho, g)
            add = lambda v, a: EB(v.lo, v.hi, _add(v.e, _m(g, a)) * SLACK, rr * SLACK)  # noqa: E731
            return np.asarray(np.frompyfunc(add, 2, 1)(total, s), dtype=object) \
                if np.ndim(total) else add(_eb(np.asarray(total).reshape(()).item()
                                               if isinstance(total, np.ndarray) else total),
                                           float(s))

        fused = False  # the current site's contraction runs fused multiply-adds

        def contract(self, a, b, a_axes, b_axes):
            """Σₖ aₖ·bₖ, k ascending one after another (the kernels' order): each product
            rounded (u), then γ_{n−1} on the sum. Fused (acc = fma(aₖ, bₖ, acc)): the first
            step rounds its product onto +0 (u), every other product enters its rounding
            exact — the same γ_{n−1} recursive sum of terms each rounded no more, so
            never a larger bound."""
            left, right = paired(a, b, a_axes, b_axes)
            prods = [self._product(left[..., k], right[k], self.fused and k > 0)
                     for k in range(left.shape[-1])]
            return self._charged(np.stack(prods, axis=-1) if prods else
                                 self.array(np.zeros(left.shape[:-1] + right.shape[1:] + (0,))),
                                 (-1,), False, max(len(prods) - 1, 0))

        def _product(self, x, y, exact: bool):
            t = EB.t
            if exact:
                EB.t = "exact"
            try:
                return np.multiply.outer(x, y)
            finally:
                EB.t = t

    return Bounded()


U["exact"] = 0.0


# ---- the analysis ----

@dataclass
class SiteFigures:
    site: str
    type: str
    magnitude: float  # the envelope's max|v|
    k: float  # the `k` analysis' error bound at the site (over calls)
    normwise: float
    condition: float | None
    s: float
    term: float  # s·R, cond's term
    roundings: int = 0  # a sum's γ index: the roundings on a term's path


@dataclass
class Component:
    """One element L_j of a tensor result: its exact value and its own bounds on
    |L̂_j − L_j| (k and normwise: the element's error in the running analysis, the largest
    over the samples; cond: Σ ‖∂L_j/∂v‖₁·R_v), and its measured error."""

    index: tuple[int, ...]
    value: float
    bounds: dict[str, float]
    measured: float | None = None


@dataclass
class Bounds:
    entry: str
    name: str  # the realization's summary
    magnitude: float  # |L|
    bounds: dict[str, float]  # rule → absolute
    sites: list[SiteFigures]
    envelope_samples: int
    envelope_sites: int
    envelope_weights: str
    measured: float | None = None
    # a tensor result: each element's own figures (componentwise), row-major
    shape: tuple[int, ...] = ()
    components: list["Component"] | None = None

    def relative(self, rule: str) -> float:
        return self.bounds[rule] / self.magnitude if self.magnitude else math.inf


def _flatten(v, out: list) -> None:
    from .interpret import flatten
    flatten(v, out, EB)


def _map(v, f):
    if isinstance(v, tuple):
        return tuple(_map(x, f) for x in v)
    if isinstance(v, EB):
        return f(np.asarray([v], dtype=object)).reshape(()).item()
    if isinstance(v, np.ndarray) and v.dtype == object and v.size and isinstance(
            v.reshape(-1)[0], EB):
        return f(v)
    return v


def forward(core_module, entry: str, dims: dict[str, int], envelope, realization: Realization,
            params: dict[str, np.ndarray], values: dict[str, np.ndarray],
            mode: str = "elementwise") -> tuple[EB, dict[str, float], dict[str, int], dict[str, str]]:
    """The running error analysis: (the output's abstract value, the error bound per
    site, the γ index of each sum site (the roundings on a term's path), type per site). mode: "elementwise", "normwise" (one error
    per value) or "k" (one error and one magnitude per value)."""
    from ..conversion.core_to_realize import site_types
    from ..dialects import core as C
    from . import entry as E
    from .interpret import Interpreter, Tree
    from .kernel_interpret import bf16_round, bf16_to_f32
    from .sensitivity import reached

    prepared = E.prepare(core_module, entry, dict(dims))
    funcs = {f.sym_name.data: f for f in core_module.ops if isinstance(f, C.FuncOp)}
    types: dict[str, str] = {}
    for n in reached(core_module, entry):
        types.update(site_types(funcs[n], realization))
    numbers = _numbers()
    site_err: dict[str, float] = {}
    site_roundings: dict[str, int] = {}
    SUMS = (C.SumOp, C.MeanOp, C.SumToOp, C.LogSumExpOp, C.SoftmaxOp, C.DotOp, C.ContractOp)

    def envelope_clip(site: str, a: np.ndarray) -> np.ndarray:
        rec = envelope.sites.get(site)
        m = rec.max_abs * SLACK if rec is not None and math.isfinite(rec.max_abs) else math.inf

        def one(v: EB) -> EB:
            lo, hi = max(v.lo, -m), min(v.hi, m)
            if lo > hi:  # outside the envelope: keep the analysis' own interval
                lo, hi = v.lo, v.hi
            return EB(lo, hi, v.e, v.r)
        out = np.asarray(np.frompyfunc(one, 1, 1)(a), dtype=object)
        if mode in ("normwise", "k") and out.size:
            flat = out.reshape(-1)
            e = max(v.e for v in flat)
            rel = max(v.r for v in flat) if mode == "normwise" else math.inf
            for i, v in enumerate(flat):
                flat[i] = EB(v.lo, v.hi, e, rel)
        return out

    def convert(t: str):
        def one(v: EB) -> EB:
            return EB(v.lo, v.hi, (v.e + U[t] * (v.mag + v.e)) * SLACK,
                      (v.r + U[t] + _m(v.r, U[t])) * SLACK)
        f = np.frompyfunc(one, 1, 1)
        return lambda a: np.asarray(f(a), dtype=object)

    class Running(Interpreter):
        def step(self, op, args, dims=None, prefix=None):
            site = op.site.data if "site" in op.attributes else None
            t = types.get(site, "f64") if site else "f64"
            ct = _compute(t)  # bf16 is stored: computed in f32, then rounded to bf16
            if ct != "f64":
                args = [_map(a, convert(ct)) if not isinstance(a, Tree) else a for a in args]
            old, EB.t = EB.t, ct
            numbers.roundings = 0
            numbers.fused = site is not None and realization.fused(site)
            try:
                value = super().step(op, args, dims, prefix)
            finally:
                EB.t = old
            if t == "bf16":
                value = _map(value, convert("bf16"))
            if site is not None and isinstance(op, SUMS):
                # the γ index the op's sums were charged (numbers.sum/contract set it)
                site_roundings[site] = max(site_roundings.get(site, 0), numbers.roundings)
            if site is not None:
                value = _map(value, lambda a: envelope_clip(site, a))
                flat: list = []
                _flatten(value, flat)
                if flat and not isinstance(value, Tree):
                    site_err[site] = max(site_err.get(site, 0.0), max(v.e for v in flat))
            return value

    args = E.arguments(prepared, numbers, params, values)
    # the parameters: each element's exact rounding to its stored type
    for name, a in (args[0].data.items() if args and isinstance(args[0], Tree) else []):
        t = realization.param_type(name)
        raw = np.asarray(params[name], dtype=np.float64)
        if t == "f32":
            r = np.abs(raw.astype(np.float32).astype(np.float64) - raw)
        elif t == "bf16":
            # as the kernels store it: f64 → f32 → bf16 (two roundings), exactly
            r = np.abs(bf16_to_f32(bf16_round(raw.astype(np.float32))).astype(np.float64)
                       - raw)
        else:
            r = np.zeros_like(raw)
        flat = a.reshape(-1)
        for i, (v, ri) in enumerate(zip(flat, r.reshape(-1))):
            flat[i] = EB(v.lo, v.hi, float(ri), U[t] if t != "f64" else 0.0)
    # the data inputs: points, exact (the f64 values the reference also reads)
    def exact(a):
        f = np.frompyfunc(lambda v: EB(v.lo, v.hi, 0.0, 0.0), 1, 1)
        return np.asarray(f(a), dtype=object)
    args = [a if isinstance(a, Tree) else _map(a, exact) for a in args]
    EB.t = "f64"
    out = Running(core_module, numbers).run(entry, args, prepared.dims)
    flat: list = []
    _flatten(out, flat)
    return flat, site_err, site_roundings, types


def _operand_magnitudes(core_module, envelope) -> dict[str, tuple]:
    """For each site, its operands' envelope magnitudes (None for an operand that is no
    site: a function's argument)."""
    from ..dialects import core as C
    out: dict[str, tuple] = {}
    for f in core_module.ops:
        if not isinstance(f, C.FuncOp):
            continue
        for op in f.body.block.ops:
            if "site" not in op.attributes:
                continue
            mags = []
            for v in op.operands:
                owner = v.owner
                s = owner.site.data if hasattr(owner, "attributes") and \
                    "site" in owner.attributes else None
                r = envelope.sites.get(s) if s else None
                mags.append(float(r.max_abs) if r is not None else None)
            out[op.site.data] = tuple(mags)
    return out


def _exponents(core_module) -> dict[str, int]:
    """Each `x ^ n` site's n."""
    from ..dialects import core as C
    return {op.site.data: op.n.value.data for op in core_module.walk()
            if isinstance(op, C.PowIOp)}


# ---- rule cond: each site's local rounding-error bound R (docs/precision.md) ----

EXACT = ("max", "min", "broadcast", "spread", "zeros_like")
"""The structural ops that round nowhere (an element-wise function's row says what it
charges: `bound_ulps`, NO_ROUNDING for neg, abs, relu, minimum, maximum, heaviside)."""
CARRIED = ("get", "field", "tuple", "call", "fold", "tree")


@dataclass
class Local:
    """What R is computed from at one site: its op, stored type t (bf16 computes in f32),
    max|v|, the operands' magnitudes, the operands it reads converted (their magnitudes,
    each with the type it is converted into), and for a sum the roundings on a term's
    path (its γ index) and its condition."""

    op: str
    t: str
    m: float
    operands: tuple
    converted: list[tuple[float, str]]
    roundings: int = 1
    condition: float | None = None
    exponent: int = 2  # a powi's


def _compute(t: str) -> str:
    return "f32" if t == "bf16" else t


def _store(x: Local) -> float:
    """A bf16 value, computed in f32, is rounded once more where it is stored."""
    return U["bf16"] * x.m if x.t == "bf16" else 0.0


def rounding_elementwise(x: Local) -> float:
    """c·u(t)·max|v| (c = 0 for an exact op, n − 1 for x^n, else the ulps the table of
    element-wise functions charges: 1 for a correctly rounded one, 4 for a library
    function) + u(t′)·max|v| per operand read converted into t′."""
    c = max(x.exponent - 1, 1) if x.op == "powi" else ops.row(x.op).bound_ulps \
        if x.op in ops.BY_NAME else ops.NO_ROUNDING if x.op in EXACT else ops.EXACT_ULPS
    return c * U[_compute(x.t)] * x.m + sum(U[to] * x.m for _, to in x.converted) + _store(x)


def rounding_add(x: Local) -> float:
    """u(t)·max|v| + u(t′)·max|a| per operand a read converted: under cancellation |a| ≫
    |a ± b|, and ∂(a ± b)/∂a = ±1 carries the operand's error whole."""
    return U[_compute(x.t)] * x.m + sum(U[to] * a for a, to in x.converted) + _store(x)


def rounding_sum(x: Local) -> float:
    """A sum or contraction: γ_k(t)·condition·max|v| (k the roundings on a term's path: a
    sum's blocked order, presk/summation.py, or a contraction's n − 1 one after another;
    Σ|terms| = condition·|Σ|) + u(t)·max|v| (its last operation, a mean's division) +
    u(t′)·condition·max|v| per operand read converted (each term moves by u(t′) of
    itself)."""
    t = _compute(x.t)
    k = float(x.condition) * x.m
    return gamma(max(x.roundings, 1), t) * k + U[t] * x.m + \
        sum(U[to] * k for _, to in x.converted) + _store(x)


def rounding_softmax(x: Local) -> float:
    """exp(x − max x) / Σ: the subtraction's rounding moves exp's argument by u·2·max|x|,
    exp adds 4 ulps, the sum of n positive terms γ_k (blocked), the division 1 ulp; an operand
    read converted moves the argument by u(t′)·2·max|x| too."""
    t = _compute(x.t)
    a = x.operands[0] if x.operands and x.operands[0] is not None else 0.0
    conv = sum(U[to] for _, to in x.converted)
    return ((LIB + 1 + 2 * a) * U[t] + gamma(max(x.roundings, 1), t) + 2 * a * conv) * x.m \
        + _store(x)


def local_rounding(x: Local) -> float:
    """R for the site's kind (a carried value rounds nowhere: what reads it converted is
    charged at the reader)."""
    if x.op in CARRIED or x.op in ("real", "constant"):
        return 0.0
    if x.condition is not None:
        return rounding_sum(x)
    if x.op in ("add", "sub"):
        return rounding_add(x)
    if x.op == "softmax":
        return rounding_softmax(x)
    return rounding_elementwise(x)


def converted_operands(reads, envelope, inputs: dict[str, str]) -> dict[str, list]:
    """Reader site → [(the value's max|v|, the type it is read in)] for every narrowing
    convert of the recording (presk.analysis.conversions) that can round: the envelope
    says whether the value is exact in that type."""
    out: dict[str, list] = {}
    for r in reads:
        key = inputs.get(r.value, r.value)
        rec = envelope.params.get(key) if r.kind == "param" else envelope.sites.get(key)
        if rec is not None and r.to in rec.rounding and rec.rounding[r.to].exact:
            continue  # every value it takes is representable in t′: the convert is exact
        reader = envelope.sites.get(r.reader)
        m = float(rec.max_abs) if rec is not None else \
            float(reader.max_abs) if reader is not None else math.inf
        out.setdefault(r.reader, []).append((m, r.to))
    return out


def cond_terms_from(local: dict[str, float], sens) -> dict[str, float]:
    """s·R for each site and narrowed parameter (s the largest over the result's
    elements)."""
    return {k: float(sens.sites[k] if k in sens.sites else sens.params[k]) * v
            for k, v in local.items()}


def cond_terms(envelope, sens, types: dict[str, str], site_roundings: dict[str, int],
               realization: Realization, core_module=None, reads=(),
               inputs: dict[str, str] | None = None) -> dict[str, float]:
    """Each site's and narrowed parameter's s·R (rule cond); `reads`: the recording's
    narrowing reads (presk.analysis.conversions.narrowing_reads)."""
    return cond_terms_from(local_bounds(envelope, sens, types, site_roundings, realization,
                                        core_module, reads, inputs), sens)


def local_bounds(envelope, sens, types: dict[str, str], site_roundings: dict[str, int],
                 realization: Realization, core_module=None, reads=(),
                 inputs: dict[str, str] | None = None) -> dict[str, float]:
    """Each site's and narrowed parameter's R: cond's local rounding-error bound."""
    out: dict[str, float] = {}
    operands = _operand_magnitudes(core_module, envelope) if core_module is not None else {}
    converted = converted_operands(reads, envelope, inputs or {})
    exponents = _exponents(core_module) if core_module is not None else {}
    for site, s in sens.sites.items():
        rec = envelope.sites.get(site)
        if rec is None or getattr(rec, "hyperparameter", False):
            continue
        m = float(rec.max_abs)
        x = Local(rec.op or "", types.get(site, "f64"), m, operands.get(site, ()),
                  converted.get(site, []), site_roundings.get(site, rec.count),
                  None if rec.condition is None else float(rec.condition),
                  exponents.get(site, 2))
        out[site] = local_rounding(x)
    for path in sens.params:
        t = realization.param_type(path)
        if t == "f64":
            continue
        rec = envelope.params.get(path)
        out[path] = rec.rounding[t].max_error if rec is not None and t in rec.rounding else \
            U[t] * (rec.max_abs if rec else 0.0)
    return out


def measure(core_module, entry: str, dims, params, values, realization: Realization,
            bits: int = 128, exact=None, each: bool = False) -> tuple:
    """The kernel interpreter under the realization against MPFR at `bits`: (max |error|,
    the exact value), and with `each` every element's |error| (row-major) too."""
    from ..pipeline import run_kernel
    from . import entry as E
    from .interpret import Interpreter
    from .numbers import MPFR
    from .solver import element_errors, measure_error
    prepared = E.prepare(core_module, entry, dict(dims))
    if exact is None:
        numbers = MPFR(bits)
        exact = Interpreter(core_module, numbers).run(
            entry, E.arguments(prepared, numbers, params, values), prepared.dims)
    run = run_kernel(core_module, entry, dict(prepared.dims), params, values, realization)
    if each:
        errors = element_errors(run.result, exact)
        return max(errors, default=0.0), exact, errors
    return measure_error(run.result, exact), exact


def check_envelope(envelope, realization: Realization, entry: str, dims: dict) -> None:
    if envelope.entry != entry:
        raise BoundsError(f"the envelope was measured on `{envelope.entry}`, not `{entry}`")
    if realization.entry is not None and realization.entry != entry:
        raise BoundsError(f"the realization is for `{realization.entry}`, not `{entry}`")
    if {k: int(v) for k, v in envelope.dims.items()} != {k: int(v) for k, v in dims.items()}:
        raise BoundsError("the envelope was measured at dims "
                          + (", ".join(f"{k}={v}" for k, v in envelope.dims.items()) or "none")
                          + ", not " + (", ".join(f"{k}={v}" for k, v in dims.items()) or "none"))


def bounds(core_module, entry: str, dims: dict[str, int], envelope, realization: Realization,
           params: dict[str, np.ndarray] | None = None,
           values: dict[str, np.ndarray] | None = None, seed: int = 0, bits: int = 128,
           rules: tuple[str, ...] = RULES, do_measure: bool = False) -> Bounds:
    """Every rule's bound on |L̂ − L|. `k` and `normwise` are run at each input sample
    (given `values`: those alone; otherwise the envelope's samples, seed + i) and hold for
    each of them; `cond` and `rss` and the measurement are at the first sample."""
    from ..pipeline import record_entry
    from . import entry as E
    from .conversions import input_sites, narrowing_reads
    from .sensitivity import sensitivities
    from .solver import _magnitude

    check_envelope(envelope, realization, entry, dims)
    prepared = E.prepare(core_module, entry, dict(dims))
    dims = dict(prepared.dims)
    # the envelope's own weights and inputs when it names files (else the seed's)
    wfile, ifile = envelope.weights_file(), envelope.inputs_file()
    if params is None:
        params = E.weights(prepared, seed, wfile)
    samples = [values] if values is not None else \
        [E.inputs(prepared, seed + i, ifile if i == 0 else None)
         for i in range(max(1, envelope.samples))]
    values = samples[0]
    sens = sensitivities(core_module, entry, dims, params, values, bits)
    magnitude = _magnitude(sens.value)
    out: dict[str, float] = {}
    errs: dict[str, dict[str, float]] = {"k": {}, "normwise": {}}
    site_roundings: dict[str, int] = {}
    types: dict[str, str] = {}
    each: dict[str, list[float]] = {}  # rule → each output element's bound
    for rule in ("k", "normwise"):
        for sample in samples:  # the bound holds for each sample: the largest
            flat, err, st, types = forward(core_module, entry, dims, envelope, realization,
                                           params, sample, rule)
            site_roundings.update(st)
            each[rule] = [max(a, v.e) for a, v in zip(each.get(rule, [0.0] * len(flat)),
                                                      flat)]
            for k, v in err.items():
                errs[rule][k] = max(errs[rule].get(k, 0.0), v)
        out[rule] = max(each[rule], default=0.0)
    # the reads that narrow, from the entry's recording (its Realize module: the kernels
    # the pipeline would lower it to are not read)
    recorded, _ = record_entry(core_module, entry, dims, realization)
    local = local_bounds(envelope, sens, types, site_roundings, realization, core_module,
                         narrowing_reads(recorded, {f.path for f in prepared.fields}),
                         input_sites(core_module, entry))
    # cond and rss per output element j, from ‖∂L_j/∂v‖₁ (one element: the figures are it)
    per = sens.components or [{**sens.sites, **sens.params}]
    each["cond"] = [math.fsum(float(c.get(k, 0.0)) * r for k, r in local.items()) for c in per]
    each["rss"] = [math.sqrt(math.fsum((float(c.get(k, 0.0)) * r) ** 2
                                       for k, r in local.items())) for c in per]
    out["cond"], out["rss"] = max(each["cond"]), max(each["rss"])
    terms = cond_terms_from(local, sens)
    sites = []
    for site, rec in envelope.sites.items():
        if site not in errs["k"] or getattr(rec, "hyperparameter", False):
            continue
        sites.append(SiteFigures(site, types.get(site, "f64"), float(rec.max_abs),
                                 errs["k"][site], errs["normwise"].get(site, math.nan),
                                 None if rec.condition is None else float(rec.condition),
                                 float(sens.sites.get(site, 0.0)), terms.get(site, 0.0),
                                 site_roundings.get(site, 0)))
    sites.sort(key=lambda f: (-f.k, -f.magnitude, f.site))
    chosen = [r for r in RULES if r in rules or rules == ("all",)]
    result = Bounds(entry, realization.summary(), magnitude, {r: out[r] for r in chosen},
                    sites, envelope.samples, len(envelope.sites), envelope.weights,
                    shape=tuple(sens.shape))
    measured = None
    if do_measure:
        result.measured, _, measured = measure(core_module, entry, dims, params, values,
                                               realization, bits, sens.value, each=True)
    if sens.shape:
        exact = np.asarray(sens.value, dtype=object).reshape(-1)
        result.components = [
            Component(tuple(int(i) for i in np.unravel_index(j, sens.shape)), float(exact[j]),
                      {r: each[r][j] for r in chosen},
                      None if measured is None else measured[j])
            for j in range(len(exact))]
    return result
