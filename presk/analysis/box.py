"""A sound bound over an input box: every input in its range, the output's error under a
realization bounded for all of them at once (docs/precision.md, "Sound bounds over a box").

The abstract value of one element (`Form`) is a first-order Taylor form in the rounding
errors, FPTaylor's idea with interval coefficients:

    computed − exact = Σₖ cₖ·εₖ + ρ,   |εₖ| ≤ 1,  cₖ ∈ [clo, chi],  |ρ| ≤ r

and an interval [lo, hi] holding the exact value, for every input of the (sub-)box. Each
εₖ is one rounding (of an operation, a conversion, a parameter's storage), tagged with its
site; cₖ is an interval because the coefficient is a function of the inputs. Propagation
is exact algebra on the forms plus the mean value theorem (a function's derivative over
the interval widened by the error bound), so no term is dropped: what is not linear goes
to ρ. Every endpoint is computed in MPFR at 53 bits, rounded outward (gmpy2's round-up
and round-down contexts), and MPFR's exponent range is unbounded, so a value beyond a
type's range is seen, not lost to an infinity.

Each operation rounds at its site's realized type (`site_types`): relative u(t) (bf16:
computed in f32 and stored in bf16, both roundings) and the absolute subnormal term; an
operand held wider than the op's type is converted (one more rounding); a library
function within the math library's documented ulps (docs/mathlib.md). A sum or
contraction, added in the kernels' order (a contraction's one term after another from the
first, a sum's blocked order of presk/summation.py: partials, then a pairwise tree), is
charged u(t)·Σ|Sₖ| over the results Sₖ of its rounded additions (their enclosures; an
addition onto an empty partial is exact), one symbol per output element, not one per
term. A form with more than CAP symbols merges each site's symbols
into one fresh symbol (sound: a fresh symbol claims no correlation).

Scalar programs are refined by bisecting the box (the leaf with the largest bound first,
along its widest input): the bound is the largest over the leaves. The first leaf's pass
is written to a tape of rule calls (`_Tape`) that the other leaves replay on their own
inputs: the same forms, without walking the program again.

One file, though long: the `Form` algebra, the per-function rules (`rule`) and the
bisection driver (`analyze`) share the outward-rounding helpers and `State`, and none is
used without the others; a split would only move private helpers across a module boundary.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import gmpy2
import numpy as np
from gmpy2 import mpfr

from .. import summation
from .ranges import Ranges
from .numbers import ByEnclosure, object_array, paired
from .realization import Realization

UP = gmpy2.context(precision=53, round=gmpy2.RoundUp)
DN = gmpy2.context(precision=53, round=gmpy2.RoundDown)
ZERO = mpfr(0)
INF = mpfr("inf")

# relative unit roundoff of one stored result: bf16 is computed in f32, then rounded again
U = {"exact": ZERO, "f64": mpfr(2.0 ** -53), "f32": mpfr(2.0 ** -24),
     "bf16": UP.add(UP.add(mpfr(2.0 ** -8), mpfr(2.0 ** -24)), mpfr(2.0 ** -32))}
# half the smallest subnormal: the absolute error of a rounding into the subnormals
ETA = {"exact": ZERO, "f64": mpfr(2.0 ** -1075), "f32": mpfr(2.0 ** -150),
       "bf16": UP.add(mpfr(2.0 ** -134), mpfr(2.0 ** -150))}
MAX = {"f64": mpfr(1.7976931348623157e308), "f32": mpfr(3.4028234663852886e38),
       "bf16": mpfr(3.3895313892515355e38)}
TINY = {"f64": mpfr(2.0 ** -1022), "f32": mpfr(2.0 ** -126), "bf16": mpfr(2.0 ** -126)}
WIDTH = {"exact": 0, "bf16": 1, "f32": 2, "f64": 3}  # which types hold which exactly
# A math-library function's charge comes from the op table (presk/ops, each row's `ulps`:
# the library's measured error per type, docs/mathlib.md): within n ulps of the correctly
# rounded result is within (n + ½) ulps ≤ (2n + 1)·u·|y| of the exact value (a normal y),
# plus (2n + 1) half subnormal spacings (`_library_unit`).
CAP = 48  # symbols per form before a site's are merged
WORK = 16000  # roundings a refinement analyses in all (its leaves × the program's roundings)
STALL = 24  # bisections in a row that leave the bound within 2⁻¹⁰ of itself: converged
SIN_DOMAIN = {"f64": 1.7e6, "f32": 7000.0}


class BoxError(Exception):
    """A program or a box the analysis cannot bound: one line for the user."""


# ---- outward-rounded interval arithmetic on mpfr endpoints ----

def _up(*xs):
    s = ZERO
    for x in xs:
        s = UP.add(s, x)
    return s


def imul(alo, ahi, blo, bhi):
    if alo == ahi and blo == bhi:
        return DN.mul(alo, blo), UP.mul(alo, blo)
    # a factor of one sign: two products, not eight (the common case)
    if alo >= 0 and blo >= 0:
        return _nan0(DN.mul(alo, blo)), _nan0(UP.mul(ahi, bhi))
    if ahi <= 0 and bhi <= 0:
        return _nan0(DN.mul(ahi, bhi)), _nan0(UP.mul(alo, blo))
    if alo >= 0 and bhi <= 0:
        return _nan0(DN.mul(ahi, blo)), _nan0(UP.mul(alo, bhi))
    if ahi <= 0 and blo >= 0:
        return _nan0(DN.mul(alo, bhi)), _nan0(UP.mul(ahi, blo))
    lo = min(DN.mul(alo, blo), DN.mul(alo, bhi), DN.mul(ahi, blo), DN.mul(ahi, bhi))
    hi = max(UP.mul(alo, blo), UP.mul(alo, bhi), UP.mul(ahi, blo), UP.mul(ahi, bhi))
    return _nan0(lo), _nan0(hi)


def _nan0(v):
    return ZERO if gmpy2.is_nan(v) else v


def idiv(alo, ahi, blo, bhi):
    """a / b for b not containing 0."""
    lo = min(DN.div(alo, blo), DN.div(alo, bhi), DN.div(ahi, blo), DN.div(ahi, bhi))
    hi = max(UP.div(alo, blo), UP.div(alo, bhi), UP.div(ahi, blo), UP.div(ahi, bhi))
    return lo, hi


def mag(lo, hi):
    return max(abs(lo), abs(hi))


def mig(lo, hi):
    return ZERO if lo <= 0 <= hi else min(abs(lo), abs(hi))


# ---- the analysis' state: the current op's type and site, the symbols' sites ----

@dataclass
class State:
    t: str = "f64"
    site: str = ""
    sym_site: list[str] = field(default_factory=list)
    # per site: the largest |value| (computed: + its error) and the smallest nonzero
    # magnitude a nonzero-everywhere value reaches, over the box
    site_max: dict[str, Any] = field(default_factory=dict)
    site_min: dict[str, Any] = field(default_factory=dict)
    site_lo: dict[str, Any] = field(default_factory=dict)
    site_hi: dict[str, Any] = field(default_factory=dict)
    site_type: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    recorded: list = field(default_factory=list)  # (site, type, its values' forms) per op
    input_of: dict[int, tuple[str, int]] = field(default_factory=dict)  # δ symbol → element
    influence: dict[int, Any] = field(default_factory=dict)  # δ symbol → Σ |coefficients|
    centered: bool = True  # keep the values' centered forms (a tensor's box)

    def symbol(self, site: str | None = None) -> int:
        self.sym_site.append(site if site is not None else self.site)
        return len(self.sym_site) - 1


S = State()


class Form(ByEnclosure):
    """One element: exact value in [lo, hi]; computed − exact = Σ d[k]·εₖ + ρ, |ρ| ≤ r;
    the computed value held in type `ty`."""

    __slots__ = ("lo", "hi", "d", "r", "ty", "_e", "val")

    def __init__(self, lo, hi, d: dict | None = None, r=ZERO, ty: str = "f64", val=None):
        self.lo, self.hi = lo, hi
        self.d = d if d is not None else {}
        self.r = r
        self.ty = ty
        self._e = None
        self.val = val  # the centered form of the exact value (`Val`), or None

    @staticmethod
    def point(v: float, ty: str = "f64") -> "Form":
        m = mpfr(float(v))
        return Form(m, m, {}, ZERO, ty)

    @property
    def e(self):
        """The bound on |computed − exact|."""
        if self._e is None:
            s = self.r
            add = UP.add
            for clo, chi in self.d.values():
                s = add(s, -clo if -clo > chi else chi)  # mag(clo, chi), inline: hot
            self._e = s
        return self._e

    @property
    def mag(self):
        return mag(self.lo, self.hi)

    def widened(self):
        """The interval holding the computed value too."""
        e = self.e
        return DN.sub(self.lo, e), UP.add(self.hi, e)

    # -- the rounding of a result at the current type --
    def _round(self, lo, hi, d: dict, r, lib: str | None = None, val=None) -> "Form":
        t = S.t
        if val is not None:
            lo, hi = _tight(lo, hi, val)
        if lo > hi or gmpy2.is_nan(lo) or gmpy2.is_nan(hi):
            return _unbounded(t)
        out = Form(lo, hi, d, r, t, val)
        if t == "exact":
            return _condense(out)
        # an IEEE operation: one rounding; a library function `lib`: its measured error
        u, eta = _library_unit(lib, t) if lib else (U[t], ETA[t])
        pre = out.e
        # the rounding δ·ẑ, |δ| ≤ u: first order u·z (z in [lo, hi]) times ε; the rest,
        # u·(ẑ − z), is second order and goes to the remainder
        d = dict(d)
        d[S.symbol()] = (DN.mul(u, lo), UP.mul(u, hi))
        r = _up(r, UP.mul(u, pre), eta)
        return _condense(Form(lo, hi, d, r, t, val))

    def __add__(self, o):
        o = _form(o)
        a, b = _conv(self), _conv(o)
        return a._round(DN.add(a.lo, b.lo), UP.add(a.hi, b.hi), _dadd(a.d, b.d),
                        UP.add(a.r, b.r), val=_vadd(_val(a), _val(b)) if S.centered else None)

    __radd__ = __add__

    def __neg__(self):
        return Form(-self.hi, -self.lo, {k: (-h, -l) for k, (l, h) in self.d.items()},
                    self.r, self.ty, None if self.val is None else _vneg(self.val))

    def __sub__(self, o):
        o = _form(o)
        a, b = _conv(self), _conv(o)
        nb = -b
        return a._round(DN.sub(a.lo, b.hi), UP.sub(a.hi, b.lo), _dadd(a.d, nb.d),
                        UP.add(a.r, b.r),
                        val=_vadd(_val(a), _vneg(_val(b))) if S.centered else None)

    def __rsub__(self, o):
        return _form(o) - self

    def __mul__(self, o):
        o = _form(o)
        if o is self:
            return self._square()
        a, b = _conv(self), _conv(o)
        # x̂ŷ − xy = ŷ·dx + x·dy: dx's coefficients times ŷ's interval, dy's times x's
        blo, bhi = b.widened()
        lo, hi = imul(a.lo, a.hi, b.lo, b.hi)
        d = _dscale(a.d, blo, bhi)
        d = _dadd(d, _dscale(b.d, a.lo, a.hi))
        r = _up(UP.mul(mag(blo, bhi), a.r), UP.mul(a.mag, b.r))
        # x·y − x₀·y₀ = y·(x − x₀) + x₀·(y − y₀)
        if not S.centered:
            return a._round(lo, hi, d, r)
        va, vb = _val(a), _val(b)
        val = (*imul(va[0], va[1], vb[0], vb[1]),
               _dadd(_dscale(va[2], b.lo, b.hi), _dscale(vb[2], va[0], va[1])),
               _up(UP.mul(b.mag, va[3]), UP.mul(mag(va[0], va[1]), vb[3])))
        return a._round(lo, hi, d, r, val=val)

    __rmul__ = __mul__

    def _square(self):
        a = _conv(self)
        lo, hi = imul(a.lo, a.hi, a.lo, a.hi)
        if a.lo <= 0 <= a.hi:
            lo = ZERO
        elif a.lo > 0:
            lo = DN.mul(a.lo, a.lo)
        else:
            lo = DN.mul(a.hi, a.hi)
        hi = UP.mul(a.mag, a.mag)
        # x̂² − x² = (x̂ + x)·dx, x̂ + x in 2·[lo, hi] widened by e
        wlo, whi = DN.sub(DN.mul(2, a.lo), a.e), UP.add(UP.mul(2, a.hi), a.e)
        if not S.centered:
            return a._round(lo, hi, _dscale(a.d, wlo, whi), UP.mul(mag(wlo, whi), a.r))
        # x² − x₀² = (x + x₀)·(x − x₀)
        v = _val(a)
        slo, shi = DN.add(a.lo, v[0]), UP.add(a.hi, v[1])
        c = imul(v[0], v[1], v[0], v[1])
        c = (max(c[0], ZERO) if v[0] > 0 or v[1] < 0 else ZERO, c[1])
        val = (*c, _dscale(v[2], slo, shi), UP.mul(mag(slo, shi), v[3]))
        return a._round(lo, hi, _dscale(a.d, wlo, whi), UP.mul(mag(wlo, whi), a.r), val=val)

    def __truediv__(self, o):
        o = _form(o)
        a, b = _conv(self), _conv(o)
        blo, bhi = b.widened()
        if blo <= 0 <= bhi:
            S.problems.append(f"{S.site}: the divisor can be 0 over the box")
            return _unbounded(S.t)
        lo, hi = idiv(a.lo, a.hi, b.lo, b.hi)
        # â/b̂ − a/b = da/b̂ − (a/b)·db/b̂
        inv = idiv(mpfr(1), mpfr(1), blo, bhi)
        d = _dscale(a.d, *inv)
        q = imul(lo, hi, *inv)
        d = _dadd(d, _dscale(b.d, -q[1], -q[0]))
        r = _up(UP.mul(mag(*inv), a.r), UP.mul(mag(*q), b.r))
        # x/y − x₀/y₀ = (x − x₀)/y − (x₀/y₀)·(y − y₀)/y
        va, vb = _val(a), _val(b)
        val = None
        if S.centered and not vb[0] <= 0 <= vb[1]:
            yinv = idiv(mpfr(1), mpfr(1), b.lo, b.hi)
            c = idiv(va[0], va[1], vb[0], vb[1])
            k = imul(c[0], c[1], *yinv)
            val = (*c, _dadd(_dscale(va[2], *yinv), _dscale(vb[2], -k[1], -k[0])),
                   _up(UP.mul(mag(*yinv), va[3]), UP.mul(mag(*k), vb[3])))
        return a._round(lo, hi, d, r, val=val)

    def __rtruediv__(self, o):
        return _form(o) / self

    def __abs__(self):
        if self.lo >= 0:
            return self
        if self.hi <= 0:
            return -self
        # |x̂| − |x| = s·dx, s in [−1, 1]
        d = {k: (-mag(l, h), mag(l, h)) for k, (l, h) in self.d.items()}
        v = _val(self)
        val = (mig(v[0], v[1]), mag(v[0], v[1]),
               {k: (-mag(l, h), mag(l, h)) for k, (l, h) in v[2].items()}, v[3]) \
            if S.centered else None
        return Form(ZERO, self.mag, d, self.r, self.ty, val)

    def _coerce(self, o) -> Form:  # comparisons by enclosure (ByEnclosure)
        return _form(o)

    def __float__(self):
        return float((self.lo + self.hi) / 2)

    def __repr__(self):
        return f"Form([{float(self.lo):.6g}, {float(self.hi):.6g}] ± {float(self.e):.3g})"


def _library_unit(name: str, t: str):
    """(relative, absolute) error of the library function `name` called in t: (2n + 1)·u
    and (2n + 1) half subnormal spacings, n its measured ulps (presk/ops `ulps`); bf16 is
    computed in f32 and stored, one more rounding of the f32 result."""
    from .. import ops
    if t != "bf16":
        c = mpfr(ops.row(name).library_charge(t))
        return UP.mul(U[t], c), UP.mul(ETA[t], c)
    c = mpfr(ops.row(name).library_charge("f32"))
    f32, f32_eta = UP.mul(U["f32"], c), UP.mul(ETA["f32"], c)
    # ŷ₃₂ = y(1 + δ₁) + η₁ rounded to bf16: ŷ = ŷ₃₂(1 + δ₂) + η₂, |δ₂| ≤ 2⁻⁸, η₂ ≤ 2⁻¹³⁴
    store = mpfr(2.0 ** -8)
    return (_up(f32, UP.mul(store, UP.add(1, f32))),
            _up(f32_eta, UP.mul(store, f32_eta), mpfr(2.0 ** -134)))


def _unbounded(t: str) -> Form:
    return Form(-INF, INF, {}, INF, t)


def _form(x) -> Form:
    return x if isinstance(x, Form) else Form.point(float(x))


def _conv(a: Form) -> Form:
    """The operand as the current op reads it: converted to its type when held wider."""
    t = S.t
    if t == "exact" or WIDTH[a.ty] <= WIDTH[t] or a.lo == a.hi and _exact_in(a.lo, t) \
            and a.e == 0:
        return a
    u = U[t]
    c = UP.mul(u, a.mag)
    d = dict(a.d)
    d[S.symbol()] = (-c, c)
    return Form(a.lo, a.hi, d, _up(a.r, UP.mul(u, a.e), ETA[t]), t, a.val)


def _exact_in(v, t: str) -> bool:
    f = float(v)
    if t == "f32":
        return float(np.float32(f)) == f
    if t == "bf16":
        from .kernel_interpret import bf16_round, bf16_to_f32
        return float(bf16_to_f32(bf16_round(np.float32(f)))) == f and \
            float(np.float32(f)) == f
    return True


def _dadd(a: dict, b: dict) -> dict:
    if len(a) < len(b):
        a, b = b, a
    out = dict(a)
    for k, (l, h) in b.items():
        if k in out:
            l0, h0 = out[k]
            out[k] = (DN.add(l0, l), UP.add(h0, h))
        else:
            out[k] = (l, h)
    return out


def _dscale(d: dict, lo, hi) -> dict:
    return {k: imul(l, h, lo, hi) for k, (l, h) in d.items()}


# ---- the centered form of the exact value over the box ----
# Val = (c0, c1, v, vr): x(p) = x₀ + Σ v[k]·δₖ(p) + ρ(p) for every point p of the box, with
# x₀ ∈ [c0, c1] the value at the box's centre, |δₖ| ≤ 1 an input's deviation from its
# centre, |ρ| ≤ vr. Intervals lose the correlation of a value with itself (x / √mean(x²)
# as a row of x moves); the centered form keeps it to first order, and each value's
# interval is intersected with it.

def _val(f: Form):
    if f.val is not None:
        return f.val
    w = UP.sub(f.hi, f.lo) if f.hi > f.lo else ZERO
    return (f.lo, f.hi, {}, w)


def _vadd(a, b):
    return (DN.add(a[0], b[0]), UP.add(a[1], b[1]), _dadd(a[2], b[2]), UP.add(a[3], b[3]))


def _vneg(a):
    return (-a[1], -a[0], {k: (-h, -l) for k, (l, h) in a[2].items()}, a[3])


def _vbound(val):
    s = val[3]
    for l, h in val[2].values():
        s = UP.add(s, mag(l, h))
    return s


def _tight(lo, hi, val):
    """[lo, hi] intersected with the centered form's enclosure."""
    e = _vbound(val)
    return max(lo, DN.sub(val[0], e)), min(hi, UP.add(val[1], e))


def _vcondense(val):
    if val is None or len(val[2]) <= CAP:
        return val
    keep = sorted(val[2], key=lambda k: -mag(*val[2][k]))[:CAP]
    rest = _up(*(mag(*val[2][k]) for k in val[2] if k not in keep))
    return (val[0], val[1], {k: val[2][k] for k in keep}, UP.add(val[3], rest))


def _condense(f: Form) -> Form:
    f.val = _vcondense(f.val)
    if len(f.d) <= CAP:
        return f
    merged: dict[str, Any] = {}
    for k, (l, h) in f.d.items():
        s = S.sym_site[k]
        merged[s] = UP.add(merged.get(s, ZERO), mag(l, h))
    d = {}
    for s, c in merged.items():
        d[S.symbol(s)] = (-c, c)
    if len(d) > CAP:  # still too many sites: the smallest into the remainder
        keep = sorted(d, key=lambda k: -d[k][1])[:CAP]
        rest = _up(*(d[k][1] for k in d if k not in keep))
        d = {k: d[k] for k in keep}
        return Form(f.lo, f.hi, d, UP.add(f.r, rest), f.ty, f.val)
    return Form(f.lo, f.hi, d, f.r, f.ty, f.val)


# ---- element-wise functions: enclosures of f and f' over an interval ----

def _lib(name: str, x: Form, lo, hi, dlo, dhi, enc=None) -> Form:
    """f(x) with [lo, hi] ∋ f(x) and [dlo, dhi] ∋ f' over x's widened interval; `enc`
    encloses f over an interval (for the centered form's centre)."""
    x = _conv(x)
    val = _vunary(x, dlo, dhi, enc)
    t = S.t
    d = _dscale(x.d, dlo, dhi)
    r = UP.mul(mag(dlo, dhi), x.r)
    return x._round(lo, hi, d, r, lib=name if t != "exact" else None, val=val)


def _vunary(x: Form, dlo, dhi, enc):
    """f(x) − f(x₀) = f'(ξ)·(x − x₀), ξ between them: in x's widened interval, where
    [dlo, dhi] holds f'."""
    if enc is None or not S.centered:
        return None
    v = _val(x)
    wlo, whi = x.widened()
    if v[0] < wlo or v[1] > whi:
        return None
    return (*enc(v[0], v[1]), _dscale(v[2], dlo, dhi), UP.mul(mag(dlo, dhi), v[3]))


def _exp(x: Form) -> Form:
    wlo, whi = x.widened()
    lo, hi = DN.exp(x.lo), UP.exp(x.hi)
    return _lib("exp", x, lo, hi, DN.exp(wlo), UP.exp(whi),
                lambda a, b: (DN.exp(a), UP.exp(b)))


def _log(x: Form) -> Form:
    wlo, whi = x.widened()
    if wlo <= 0:
        S.problems.append(f"{S.site}: log's argument can be ≤ 0 over the box")
        return _unbounded(S.t)
    return _lib("log", x, DN.log(x.lo), UP.log(x.hi), DN.div(1, whi), UP.div(1, wlo),
                lambda a, b: (DN.log(a), UP.log(b)) if a > 0 else (-INF, UP.log(b)))


def _sqrt(x: Form) -> Form:
    x = _conv(x)
    wlo, whi = x.widened()
    lo, hi = DN.sqrt(max(x.lo, ZERO)), UP.sqrt(max(x.hi, ZERO))
    if x.hi < 0:
        S.problems.append(f"{S.site}: sqrt's argument is negative over the box")
        return _unbounded(S.t)
    if wlo > 0:
        dlo, dhi = DN.div(1, UP.mul(2, UP.sqrt(whi))), UP.div(1, DN.mul(2, DN.sqrt(wlo)))
        val = _vunary(x, dlo, dhi, lambda a, b: (DN.sqrt(max(a, ZERO)), UP.sqrt(max(b, ZERO))))
        return x._round(lo, hi, _dscale(x.d, dlo, dhi), UP.mul(dhi, x.r), val=val)
    # near 0: |√x̂ − √x| ≤ √|x̂ − x|, all in the remainder
    return x._round(lo, hi, {}, UP.sqrt(x.e))


def _tanh(x: Form) -> Form:
    wlo, whi = x.widened()
    # tanh' = 1 − tanh², even and decreasing in |x|
    m, n = mag(wlo, whi), mig(wlo, whi)
    dlo = DN.sub(1, UP.square(UP.tanh(m)))
    dhi = UP.sub(1, DN.square(DN.tanh(n)))
    return _lib("tanh", x, DN.tanh(x.lo), UP.tanh(x.hi), max(dlo, ZERO), dhi,
                lambda a, b: (DN.tanh(a), UP.tanh(b)))


def _expm1(x: Form) -> Form:
    wlo, whi = x.widened()
    return _lib("expm1", x, DN.expm1(x.lo), UP.expm1(x.hi), DN.exp(wlo), UP.exp(whi),
                lambda a, b: (DN.expm1(a), UP.expm1(b)))


def _log1p(x: Form) -> Form:
    wlo, whi = x.widened()
    if wlo <= -1:
        S.problems.append(f"{S.site}: log1p's argument can be ≤ −1 over the box")
        return _unbounded(S.t)
    return _lib("log1p", x, DN.log1p(x.lo), UP.log1p(x.hi), DN.div(1, UP.add(1, whi)),
                UP.div(1, DN.add(1, wlo)),
                lambda a, b: (DN.log1p(a), UP.log1p(b)) if a > -1 else (-INF, UP.log1p(b)))


def _sinh(x: Form) -> Form:
    wlo, whi = x.widened()
    # sinh' = cosh, even and increasing in |x|; sinh increasing
    return _lib("sinh", x, DN.sinh(x.lo), UP.sinh(x.hi), DN.cosh(mig(wlo, whi)),
                UP.cosh(mag(wlo, whi)), lambda a, b: (DN.sinh(a), UP.sinh(b)))


def _pow_range(alo, ahi, blo, bhi):
    """An enclosure of aᵇ = exp(b·log a) over a box of positive a."""
    lo, hi = imul(DN.log(alo), UP.log(ahi), blo, bhi)
    return DN.exp(lo), UP.exp(hi)


def _pow(a: Form, b: Form) -> Form:
    """aᵇ for a base positive over the box (the library's exp(b·log a)): the mean value
    theorem in both operands, ∂/∂a = b·aᵇ/a and ∂/∂b = log(a)·aᵇ over the widened box."""
    a, b = _conv(_form(a)), _conv(_form(b))
    alo, ahi = a.widened()
    blo, bhi = b.widened()
    if alo <= 0:
        S.problems.append(f"{S.site}: pow's base can be ≤ 0 over the box")
        return _unbounded(S.t)

    def slopes(xlo, xhi, ylo, yhi):
        p = _pow_range(xlo, xhi, ylo, yhi)
        return imul(*idiv(*p, xlo, xhi), ylo, yhi), imul(DN.log(xlo), UP.log(xhi), *p)
    da, db = slopes(alo, ahi, blo, bhi)
    d = _dadd(_dscale(a.d, *da), _dscale(b.d, *db))
    r = _up(UP.mul(mag(*da), a.r), UP.mul(mag(*db), b.r))
    val = None
    if S.centered:
        va, vb = _val(a), _val(b)
        if va[0] > 0 and va[0] >= a.lo and va[1] <= a.hi and vb[0] >= b.lo and vb[1] <= b.hi:
            ea, eb = slopes(a.lo, a.hi, b.lo, b.hi)
            val = (*_pow_range(va[0], va[1], vb[0], vb[1]),
                   _dadd(_dscale(va[2], *ea), _dscale(vb[2], *eb)),
                   _up(UP.mul(mag(*ea), va[3]), UP.mul(mag(*eb), vb[3])))
    t = S.t
    return a._round(*_pow_range(a.lo, a.hi, b.lo, b.hi), d, r,
                    lib="pow" if t != "exact" else None, val=val)


_TWO_OVER_SQRT_PI_UP = UP.div(2, DN.sqrt(DN.const_pi()))


def _erf(x: Form) -> Form:
    wlo, whi = x.widened()
    m, n = mag(wlo, whi), mig(wlo, whi)
    dlo = DN.mul(DN.div(2, UP.sqrt(UP.const_pi())), DN.exp(-UP.square(m)))
    dhi = UP.mul(_TWO_OVER_SQRT_PI_UP, UP.exp(-DN.square(n)))
    return _lib("erf", x, DN.erf(x.lo), UP.erf(x.hi), dlo, dhi,
                lambda a, b: (DN.erf(a), UP.erf(b)))


def _softplus_c(c, v):
    # log1p(exp(v)), monotone: evaluated in the context's direction
    return c.log1p(c.exp(v))


def _sigmoid_c(c, v):
    o = UP if c is DN else DN
    return c.div(1, o.add(1, o.exp(-v)))


def _softplus(x: Form) -> Form:
    wlo, whi = x.widened()
    return _lib("softplus", x, _softplus_c(DN, x.lo), _softplus_c(UP, x.hi),
                _sigmoid_c(DN, wlo), _sigmoid_c(UP, whi),
                lambda a, b: (_softplus_c(DN, a), _softplus_c(UP, b)))


def _sincos(name: str):
    def f(x: Form) -> Form:
        t = "f32" if S.t == "bf16" else S.t
        wlo, whi = x.widened()
        if mag(wlo, whi) > SIN_DOMAIN.get(t, 1.7e6):
            S.problems.append(f"{S.site}: {name}'s argument leaves the math library's domain")
            return _unbounded(S.t)
        lo, hi = _trig_range(name, x.lo, x.hi)
        dlo, dhi = _trig_range("cos" if name == "sin" else "-sin", wlo, whi)
        return _lib(name, x, lo, hi, dlo, dhi, lambda a, b: _trig_range(name, a, b))
    return f


def _trig_range(name: str, lo, hi):
    """An enclosure of sin, cos or −sin over [lo, hi]: the endpoints' values, and ±1 where
    an extremum (an odd multiple of π/2, shifted) may lie inside (π's enclosure used)."""
    if UP.sub(hi, lo) >= 6:
        return mpfr(-1), mpfr(1)
    shift = {"sin": 0, "cos": 1, "-sin": 2}[name]  # f(x) = sin(x + shift·π/2)

    def f(c, v):
        if name == "sin":
            return c.sin(v)
        if name == "cos":
            return c.cos(v)
        return -(UP if c is DN else DN).sin(v)
    vlo = min(f(DN, lo), f(DN, hi))
    vhi = max(f(UP, lo), f(UP, hi))
    hp_lo, hp_hi = DN.div(DN.const_pi(), 2), UP.div(UP.const_pi(), 2)
    q = float(lo) / float(hp_lo)
    q2 = float(hi) / float(hp_lo)
    for target in (1, -1):  # f = target at x = a·π/2, a = target − shift + 4k
        base = target - shift
        for k in range(int(math.floor((min(q, q2) - base) / 4)) - 1,
                       int(math.ceil((max(q, q2) - base) / 4)) + 2):
            a = base + 4 * k
            ends = (DN.mul(a, hp_lo), DN.mul(a, hp_hi), UP.mul(a, hp_lo), UP.mul(a, hp_hi))
            if max(ends) >= lo and min(ends) <= hi:
                if target > 0:
                    vhi = mpfr(1)
                else:
                    vlo = mpfr(-1)
    return max(vlo, mpfr(-1)), min(vhi, mpfr(1))


def _binmax(a: Form, b: Form, pick=max) -> Form:
    """max(â, b̂) − max(a, b) lies between da and db: a convex combination, so each
    coefficient in the hull of the two (exact: no rounding)."""
    a, b = _form(a), _form(b)
    alo, ahi = a.widened()
    blo, bhi = b.widened()
    if pick is max:
        if alo > bhi:
            return a
        if blo > ahi:
            return b
    else:
        if ahi < blo:
            return a
        if bhi < alo:
            return b
    keys = set(a.d) | set(b.d)
    z = (ZERO, ZERO)
    d = {}
    for k in keys:
        l1, h1 = a.d.get(k, z)
        l2, h2 = b.d.get(k, z)
        d[k] = (min(l1, l2), max(h1, h2))
    ty = a.ty if WIDTH[a.ty] >= WIDTH[b.ty] else b.ty
    if not S.centered:
        return _condense(Form(pick(a.lo, b.lo), pick(a.hi, b.hi), d, max(a.r, b.r), ty))
    # the exact value: max(x, y) − max(x₀, y₀) lies between x − x₀ and y − y₀ likewise
    va, vb = _val(a), _val(b)
    v = {}
    for k in set(va[2]) | set(vb[2]):
        l1, h1 = va[2].get(k, z)
        l2, h2 = vb[2].get(k, z)
        v[k] = (min(l1, l2), max(h1, h2))
    val = (pick(va[0], vb[0]), pick(va[1], vb[1]), v, max(va[3], vb[3]))
    lo, hi = _tight(pick(a.lo, b.lo), pick(a.hi, b.hi), val)
    return _condense(Form(lo, hi, d, max(a.r, b.r), ty, val))


def _binmin(a, b):
    return _binmax(a, b, min)


# the rules of the exact operations and of the library functions, by the op table's names;
# a composite (sigmoid, gelu, …) is walked from its table expression, in its order
RULES: dict[str, Callable[..., Form]] = {
    "neg": lambda x: -x, "sqrt": _sqrt, "abs": abs, "exp": _exp, "log": _log, "tanh": _tanh,
    "erf": _erf, "softplus": _softplus, "sin": _sincos("sin"), "cos": _sincos("cos"),
    "sinh": _sinh, "expm1": _expm1, "log1p": _log1p, "pow": _pow,
    "add": lambda a, b: _form(a) + b, "sub": lambda a, b: _form(a) - b,
    "mul": lambda a, b: _form(a) * b, "div": lambda a, b: _form(a) / b,
    "maximum": _binmax, "minimum": _binmin,
}


def rule(name: str) -> Callable[..., Form]:
    """One element's rule for the op table's function `name`."""
    from .. import ops
    f = ops.row(name)
    if isinstance(f.compute, ops.Composite):
        walker = ops.Walker[Form](const=lambda k: Form.point(k.value),
                                  apply=lambda fn, args: rule(fn)(*args),
                                  powi=lambda v, n: _powi(v, n),
                                  heaviside=lambda v, h: _heaviside(v, h))
        expr = f.compute.expr
        return lambda x: walker.walk(expr, {"x": x})
    if name in RULES:
        return RULES[name]

    def unsupported(*_):
        raise BoxError(f"the box analysis does not cover `{name}` yet")
    return unsupported


def _powi(v: Form, n: int) -> Form:
    """x^n in the multiplies every engine does (presk/powers.py); p·p is a square."""
    from ..powers import power
    return power(v, n, lambda a, b: a._square() if a is b else a * b,
                 lambda: Form.point(1.0))


def _heaviside(v: Form, at_zero: float) -> Form:
    lo, hi = v.widened()
    if lo > 0:
        return Form.point(1.0, "exact")
    if hi < 0:
        return Form.point(0.0, "exact")
    return Form(mpfr(min(0.0, at_zero)), mpfr(max(1.0, at_zero)), {},
                mpfr(max(1.0, abs(at_zero))), "exact")


# ---- the number system the interpreter computes in ----

_BOXED: list = []  # the number system, built once (it holds no state: S does)


def _numbers():
    if not _BOXED:
        _BOXED.append(_boxed())
    return _BOXED[0]


_CONSTANTS: dict[float, Form] = {}


def _constant(v) -> Form:
    """An exact f64 constant; one Form per value (no rule mutates an operand's Form)."""
    v = float(v)
    f = _CONSTANTS.get(v)
    if f is None or math.copysign(1.0, v) != math.copysign(1.0, float(f.lo)):
        f = _CONSTANTS[v] = Form.point(v)
    return f


def _boxed():
    from .numbers import Numbers

    from .. import ops

    class Boxed(Numbers):
        name = "box"

        def __init__(self) -> None:
            vec = lambda f: np.frompyfunc(f, 1, 1)  # noqa: E731
            self._unary = {f.name: vec(rule(f.name)) for f in ops.rows(arity=1, core=True)}
            self._binary = {f.name: np.frompyfunc(rule(f.name), 2, 1)
                            for f in ops.rows(arity=2, core=True)}

        def array(self, values):
            # an f64 constant, exact (the reference's too)
            return object_array(values, _constant)

        def to_f64(self, x):
            x = np.asarray(x, dtype=object)
            return np.array([float(v) for v in x.reshape(-1)]).reshape(x.shape)

        def powi(self, x, n):
            if isinstance(x, Form):
                return _powi(x, n)
            return np.asarray(np.frompyfunc(lambda v: _powi(v, n), 1, 1)(x), dtype=object)

        def heaviside(self, x, at_zero):
            f = np.frompyfunc(lambda v: _heaviside(v, at_zero), 1, 1)
            return np.asarray(f(x), dtype=object)

        def reduce(self, name, x, axis):
            if name in ("max", "min"):
                x = np.asarray(x)
                if axis is None:
                    x, axis = x.reshape(-1), 0
                pick = _binmax if name == "max" else _binmin
                return np.frompyfunc(pick, 2, 1).reduce(x, axis=axis)
            if name == "logsumexp":
                return self.logsumexp(x, axis)
            return super().reduce(name, x, axis)

        def _top(self, x, axis):
            """max over the axis, kept: the sound max (numpy's would pick an element)."""
            x = np.asarray(x, dtype=object)
            if axis is None:
                top = np.frompyfunc(_binmax, 2, 1).reduce(x.reshape(-1), axis=0)
                return np.asarray(top, dtype=object).reshape((1,) * x.ndim)
            top = np.frompyfunc(_binmax, 2, 1).reduce(x, axis=axis)
            return np.expand_dims(np.asarray(top, dtype=object), axis)

        def softmax(self, x, axis):
            x = np.asarray(x, dtype=object)
            e = self.unary("exp", x - self._top(x, axis))
            return e / self.sum(e, None if axis is None else (axis,), keepdims=True)

        def logsumexp(self, x, axis):
            x = np.asarray(x, dtype=object)
            top = self._top(x, axis)
            shifted = self.unary("exp", x - top)
            out = top + self.unary("log", self.sum(shifted, None if axis is None else (axis,),
                                                   keepdims=True))
            return np.asarray(out).reshape(()) if axis is None else np.squeeze(out, axis=axis)

        def sum(self, x, axes=None, keepdims=False, order=blocked_sum):
            """Σ over `axes` in the kernels' order: a sum's blocked (the last axis' sums
            first, each a term of the axis before); `order=sequential_sum` one row."""
            x = np.asarray(x, dtype=object)
            axes = tuple(range(x.ndim)) if axes is None else \
                tuple(a % max(x.ndim, 1) for a in axes)
            kept = [i for i in range(x.ndim) if i not in axes]
            out = np.transpose(x, kept + sorted(axes))
            if not axes:
                out = out[..., np.newaxis]
            for _ in range(max(len(axes), 1)):
                rows = out.reshape(-1, out.shape[-1])
                reduced = np.empty(rows.shape[0], dtype=object)
                for i in range(rows.shape[0]):
                    reduced[i] = order(list(rows[i]))
                out = reduced.reshape(out.shape[:-1])
            if keepdims:
                out = np.reshape(out, [1 if i in axes else n for i, n in enumerate(x.shape)])
            return out if out.ndim else out.reshape(()).item()

        def contract(self, a, b, a_axes, b_axes):
            left, right = paired(a, b, a_axes, b_axes)
            prods = [np.multiply.outer(left[..., k], right[k]) for k in range(left.shape[-1])]
            if not prods:
                return self.array(np.zeros(left.shape[:-1] + right.shape[1:]))
            return self.sum(np.stack(prods, axis=-1), (-1,), order=sequential_sum)

    return Boxed()


@dataclass
class _Partial:
    """A partial sum while its additions are charged: its enclosure, derivative terms,
    remainder, centered value and running error bound (`e`)."""

    lo: Any
    hi: Any
    d: dict
    r: Any
    val: Any
    e: Any
    ty: str


class _Additions:
    """The additions of one sum, each rounded at the current type: the propagated errors
    add exactly; the roundings are u·Σ|Sₖ| over every rounded addition's result Sₖ (its
    enclosure), one symbol, plus u·(the partial sums' own errors) in the remainder."""

    def __init__(self) -> None:
        self.t = S.t
        self.u = U[self.t]
        self.first = ZERO  # Σ u·|Sₖ|
        self.second = ZERO  # Σ u·err(Ŝₖ before its rounding)
        self.rounded = 0

    def leaf(self, v: Form) -> _Partial:
        v = _conv(_form(v))
        return _Partial(v.lo, v.hi, dict(v.d), v.r, _val(v) if S.centered else None, v.e,
                        v.ty)

    def add(self, a: _Partial | None, b: _Partial | None) -> _Partial | None:
        """a + b rounded; with an empty partial (None, +0) exact."""
        if a is None or b is None:
            return a if b is None else b
        lo, hi = DN.add(a.lo, b.lo), UP.add(a.hi, b.hi)
        val = _vadd(a.val, b.val) if a.val is not None and b.val is not None else None
        d, r, err = _dadd(a.d, b.d), UP.add(a.r, b.r), UP.add(a.e, b.e)
        step = UP.mul(self.u, mag(lo, hi))
        self.first = UP.add(self.first, step)
        self.second = _up(self.second, UP.mul(self.u, err),
                          ETA[self.t] if self.t != "exact" else ZERO)
        err = UP.add(err, _up(step, UP.mul(self.u, err)))
        if len(d) > 4 * CAP:
            tmp = _condense(Form(lo, hi, d, r, "f64", val))
            d, r, val = tmp.d, tmp.r, tmp.val
        self.rounded += 1
        return _Partial(lo, hi, d, r, val, err, self.t)

    def result(self, p: _Partial | None) -> Form:
        if p is None:
            return Form.point(0.0)
        d = dict(p.d)
        if self.first > 0:
            d[S.symbol()] = (-self.first, self.first)
        lo, hi = (_tight(p.lo, p.hi, p.val) if p.val is not None else (p.lo, p.hi))
        out = Form(lo, hi, d, UP.add(p.r, self.second), self.t if self.rounded else p.ty,
                   p.val)
        return _condense(out)


def sequential_sum(terms: list[Form]) -> Form:
    """((t₁ + t₂) + t₃) + … (a contraction's order), charged as `_Additions` says."""
    adds = _Additions()
    acc = None
    for v in terms:
        acc = adds.add(acc, adds.leaf(v))
    return adds.result(acc)


def blocked_sum(terms: list[Form]) -> Form:
    """Σ in the blocked order of presk/summation.py (a sum's), charged as `_Additions`
    says: its partials from +0 (the first addition exact), then the pairwise tree."""
    adds = _Additions()
    return adds.result(summation.blocked_sum([adds.leaf(v) for v in terms], adds.add,
                                             lambda: None))


# ---- the analysis ----

@dataclass
class SiteRange:
    site: str
    type: str
    lo: float
    hi: float
    error: float  # the share of the output's bound from this site's roundings


@dataclass
class BoxResult:
    entry: str
    name: str  # the realization's summary
    bound: float  # max |L̂ − L| over the box, elementwise over the output
    lo: float  # the output's exact range (hull over its elements)
    hi: float
    sites: list[SiteRange]
    contributions: dict[str, float]  # site or parameter → its share of the bound
    excluded: dict[str, list[str]]  # site → the types it cannot take (range)
    problems: list[str]
    leaves: int
    seconds: float

    @property
    def magnitude_min(self) -> float:
        return 0.0 if self.lo <= 0 <= self.hi else min(abs(self.lo), abs(self.hi))


def _check_ranges(prepared, ranges: Ranges, params: dict) -> None:
    for path, (lo, hi) in ranges.inputs.items():
        if path not in prepared.inputs:
            raise BoxError(f"`{path}` is not an input of `{prepared.func.sym_name.data}` "
                           "(its inputs: " + (", ".join(prepared.inputs) or "none") + ")")
        shape = prepared.inputs[path]
        if np.shape(lo) != shape:
            raise BoxError(f"the range of `{path}` has shape {list(np.shape(lo))}, the input "
                           f"{list(shape)}")
    for path, (lo, hi) in ranges.params.items():
        if path not in params:
            raise BoxError(f"`{path}` is no parameter of the entry")
        if np.shape(lo) != np.shape(params[path]):
            raise BoxError(f"the range of `{path}` has shape {list(np.shape(lo))}, the "
                           f"parameter {list(np.shape(params[path]))}")


def _interval_array(lo: np.ndarray, hi: np.ndarray, ty: str = "f64", path: str = "") -> np.ndarray:
    out = np.empty(np.shape(lo), dtype=object)
    flat = out.reshape(-1)
    for i, (a, b) in enumerate(zip(np.reshape(lo, -1), np.reshape(hi, -1))):
        lo_, hi_ = mpfr(float(a)), mpfr(float(b))
        f = Form(lo_, hi_, {}, ZERO, ty)
        if lo_ < hi_ and S.centered:  # x = m + h·δ, δ in [−1, 1]: its own input symbol
            m = mpfr(float(a) + (float(b) - float(a)) / 2)
            h = max(UP.sub(hi_, m), UP.sub(m, lo_))
            k = S.symbol("<input>")
            S.input_of[k] = (path, i)
            f.val = (m, m, {k: (h, h)}, ZERO)
        flat[i] = f
    return out


TAPE = True  # replay the first pass's rule calls for the other leaves (see `_Tape`)


class _Tape:
    """The rule calls of one pass over a program of scalars, in order, with where each
    operand came from (an input, an earlier result, a literal) and the (type, site) each
    ran under, and the values each site records. The interpreter's ops and their order
    do not depend on the values (no branch on data: the rules decide inside), so the
    other leaves replay it on their own inputs, the forms computed by the same rules —
    the interpreter's walking left out. Anything the tape cannot follow (a tensor, a
    call outside unary/binary/constant/powi/heaviside) makes it `ok = False`: the
    interpreter then runs every leaf."""

    def __init__(self, inputs: list) -> None:
        self.ok = True
        self.slot = {id(f): i for i, f in enumerate(inputs)}
        self.keep = list(inputs)  # alive while recording: ids stay unique
        self.steps: list[tuple] = []
        self.out: list[int] = []

    def _ref(self, v):
        if isinstance(v, np.ndarray) and v.shape == ():
            v = v.item()
        if isinstance(v, Form):
            i = self.slot.get(id(v))
            if i is None:
                self.ok = False
            return ("slot", i)
        if isinstance(v, (float, int)) and not isinstance(v, bool):
            return ("literal", v)
        self.ok = False
        return None

    def _new(self, v) -> None:
        if isinstance(v, np.ndarray) and v.shape == ():
            v = v.item()
        if not isinstance(v, Form):
            self.ok = False
            return
        self.slot[id(v)] = len(self.keep)
        self.keep.append(v)

    def call(self, kind: str, args: tuple, extra, result):
        if self.ok:
            refs = tuple(self._ref(a) for a in args)
            self.steps.append((kind, S.t, S.site, refs, extra))
            self._new(result)
        return result

    def record(self, site: str, t: str, value) -> None:
        if self.ok:
            flat: list = []
            _flatten(value, flat)
            self.steps.append(("record", t, site, tuple(self._ref(f) for f in flat), None))

    def outputs(self, flat: list) -> None:
        self.out = [self._ref(f)[1] if self.ok else 0 for f in flat]
        self.keep = [None] * len(self.keep)  # the slots' count; the forms let go

    def replay(self, inputs: list) -> list:
        numbers = _numbers()
        vals = list(inputs) + [None] * (len(self.keep) - len(inputs))
        n = len(inputs)
        for kind, t, site, refs, extra in self.steps:
            args = [vals[r[1]] if r[0] == "slot" else r[1] for r in refs]
            S.t, S.site = t, site
            if kind == "record":
                _record(site, t, args[0] if len(args) == 1 else tuple(args))
                continue
            if kind == "constant":
                v = numbers.constant(extra)
            elif kind == "unary":
                v = numbers.unary(extra, args[0])
            elif kind == "binary":
                v = numbers.binary(extra, args[0], args[1])
            elif kind == "powi":
                v = numbers.powi(args[0], extra)
            else:
                v = numbers.heaviside(args[0], extra)
            vals[n] = v.item() if isinstance(v, np.ndarray) else v
            n += 1
        return [vals[i] for i in self.out]


class _Taping:
    """The number system, its calls written to a tape."""

    def __init__(self, inner, tape: _Tape) -> None:
        self.inner, self.tape = inner, tape

    def context(self):
        return self.inner.context()

    def constant(self, value):
        return self.tape.call("constant", (), value, self.inner.constant(value))

    def unary(self, name, x):
        return self.tape.call("unary", (x,), name, self.inner.unary(name, x))

    def binary(self, name, a, b):
        return self.tape.call("binary", (a, b), name, self.inner.binary(name, a, b))

    def powi(self, x, n):
        return self.tape.call("powi", (x,), n, self.inner.powi(x, n))

    def heaviside(self, x, at_zero):
        return self.tape.call("heaviside", (x,), at_zero, self.inner.heaviside(x, at_zero))

    def __getattr__(self, name):  # any other call: the tape cannot follow it
        self.tape.ok = False
        return getattr(self.inner, name)


def _run_once(core_module, entry: str, prepared, realization: Realization, types,
              params: dict, values: dict, ranges: Ranges, centered: bool = True,
              tapes: list | None = None):
    """One pass over one box: the output's forms (flat) and the state. `tapes`: [] to
    record this pass's tape into, [tape] to replay it instead of interpreting."""
    from ..dialects import core as C
    from . import entry as E
    from .interpret import Interpreter, Tree

    global S
    S = State(centered=centered)
    numbers = _numbers()
    tape = None

    class Running(Interpreter):
        def step(self, op, args, dims=None, prefix=None):
            site = op.site.data if "site" in op.attributes else None
            t = types.get(site, "f64") if site else "f64"
            old = (S.t, S.site)
            S.t, S.site = t, site or S.site
            try:
                value = super().step(op, args, dims, prefix)
            finally:
                S.t, S.site = old
            if site is not None and not isinstance(op, (C.ConstantOp,)):
                _record(site, t, value)
                if tape is not None:
                    tape.record(site, t, value)
            return value

    args = E.arguments(prepared, numbers, params, {k: np.zeros(s) for k, s in
                                                   prepared.inputs.items()})
    # the parameters: a point rounded exactly to its stored type, or a range
    for name, a in (args[0].data.items() if args and isinstance(args[0], Tree) else []):
        t = realization.param_type(name)
        flat = a.reshape(-1)
        if name in ranges.params:
            lo, hi = ranges.params[name]
            src = _interval_array(lo, hi).reshape(-1)
            for i, v in enumerate(src):
                flat[i] = _store(v, t, name)
        else:
            raw = np.asarray(params[name], dtype=np.float64).reshape(-1)
            stored = _stored(raw, t)
            for i, (v, s) in enumerate(zip(raw, stored)):
                m, ms = mpfr(float(v)), mpfr(float(s))
                f = Form(m, m, {}, ZERO, t)
                if s != v:  # its exact rounding error, a known number
                    f.d = {S.symbol(name): (DN.sub(ms, m), UP.sub(ms, m))}
                flat[i] = f
    # the data inputs: their box (or their point), f64 values
    def given(path, shape):
        if path in ranges.inputs:
            lo, hi = ranges.inputs[path]
        else:
            lo = hi = np.asarray(values[path], dtype=np.float64)
        return _interval_array(lo, hi, path=path)
    args = [a if isinstance(a, Tree) else _inputs(prepared, name, t, given)
            for a, name, t in zip(args, prepared.func.arg_name_list,
                                  prepared.func.function_type.inputs.data)]
    S.t = "f64"
    inputs: list = []
    _flatten(tuple(args), inputs)
    if tapes:  # a tape of this program: replayed on this box's inputs
        return tapes[0].replay(inputs), S
    if tapes is not None and not S.centered:
        tape = _Tape(inputs)
        numbers = _Taping(numbers, tape)
    out = Running(core_module, numbers).run(entry, args, prepared.dims)
    flat: list = []
    _flatten(out, flat)
    if tape is not None:
        tape.outputs(flat)
        if tape.ok:
            tapes.append(tape)
    return flat, S


def _inputs(prepared, path, t, given):
    from xdsl.dialects.builtin import TupleType
    if isinstance(t, TupleType):
        return tuple(_inputs(prepared, f"{path}.{i}", item, given)
                     for i, item in enumerate(t.types.data))
    return given(path, prepared.inputs[path])


def _stored(raw: np.ndarray, t: str) -> np.ndarray:
    from .kernel_interpret import bf16_round, bf16_to_f32
    if t == "f32":
        return raw.astype(np.float32).astype(np.float64)
    if t == "bf16":
        return bf16_to_f32(bf16_round(raw.astype(np.float32))).astype(np.float64)
    return raw


def _store(v: Form, t: str, name: str) -> Form:
    """A parameter's range stored in t: f64 → f32 → bf16, each a rounding."""
    if t == "f64":
        return v
    u = U[t]
    c = UP.mul(u, v.mag)
    return Form(v.lo, v.hi, {S.symbol(name): (-c, c)}, ETA[t], t, v.val)


def _flatten(v, out: list) -> None:
    from .interpret import flatten
    flatten(v, out, Form)


def _record(site: str, t: str, value) -> None:
    flat: list = [value] if isinstance(value, Form) else []
    if not flat:
        _flatten(value, flat)
    if not flat:
        return
    S.recorded.append((site, t, flat))  # its ranges: `_site_stats`, for the leaves kept
    if len(S.input_of) > 8:  # a tensor's box: where to bisect it (`_influential`)
        for f in flat:
            if f.val is not None:
                for k, (lo, hi) in f.val[2].items():
                    if k in S.input_of:
                        S.influence[k] = UP.add(S.influence.get(k, ZERO), mag(lo, hi))


def _site_stats(st: State) -> None:
    """Each site's type, range and largest and (nonzero everywhere) smallest magnitude in
    one leaf, from its recorded values."""
    for site, t, flat in st.recorded:
        st.site_type[site] = t
        # an infinite endpoint is the analysis giving up (a divisor reaching 0…), not a
        # value: MPFR's exponent range holds any finite one, so only those count
        mags = [UP.add(f.mag, f.e) for f in flat]
        m = max((x for x in mags if gmpy2.is_finite(x)), default=ZERO)
        st.site_max[site] = max(st.site_max.get(site, ZERO), m)
        lo = min(f.lo for f in flat)
        hi = max(f.hi for f in flat)
        st.site_lo[site] = min(st.site_lo.get(site, lo), lo)
        st.site_hi[site] = max(st.site_hi.get(site, hi), hi)
        if all(f.lo > 0 or f.hi < 0 for f in flat) and all(gmpy2.is_finite(x) for x in mags):
            n = min(DN.sub(mig(f.lo, f.hi), f.e) for f in flat)
            st.site_min[site] = min(st.site_min.get(site, n), n)
    st.recorded = []


def excluded_types(site_max: dict, site_min: dict) -> dict[str, list[str]]:
    """The types each site cannot take over the box: a value beyond the type's largest
    finite number (overflow), or a value nonzero everywhere that reaches below its
    smallest normal (underflow: its digits lost)."""
    out: dict[str, list[str]] = {}
    for site, m in site_max.items():
        bad = [t for t in ("f64", "f32", "bf16") if m > MAX[t]]
        n = site_min.get(site)
        if n is not None:
            bad += [t for t in ("f64", "f32", "bf16") if 0 < n < TINY[t] and t not in bad]
        if bad:
            out[site] = bad
    return out


def _types(core_module, entry: str, realization: Realization) -> dict[str, str]:
    from ..conversion.core_to_realize import site_types
    from ..dialects import core as C
    from .sensitivity import reached
    funcs = {f.sym_name.data: f for f in core_module.ops if isinstance(f, C.FuncOp)}
    types: dict[str, str] = {}
    for n in reached(core_module, entry):
        types.update(site_types(funcs[n], realization))
    return types


@dataclass
class _Leaf:
    bound: Any
    inputs: dict  # path → (lo, hi) of this leaf
    flat: list
    state: State

    def __lt__(self, other):  # for heapq: the largest bound first
        return self.bound > other.bound


def analyze(core_module, entry: str, dims: dict[str, int], realization: Realization,
            ranges: Ranges, params: dict[str, np.ndarray], values: dict[str, np.ndarray],
            max_leaves: int = 192, seconds: float | None = None) -> BoxResult:
    """The bound over the box. A program whose ranged inputs are at most 8 scalars is
    refined by bisection: up to `max_leaves` leaves (the same bound on any machine), or
    fewer when `seconds` is given and runs out."""
    from . import entry as E
    start = time.perf_counter()
    prepared = E.prepare(core_module, entry, dict(dims))
    _check_ranges(prepared, ranges, params)
    types = _types(core_module, entry, realization)
    scalars = [(p, i) for p, (lo, hi) in ranges.inputs.items()
               for i in range(np.size(lo)) if np.reshape(lo, -1)[i] != np.reshape(hi, -1)[i]]
    refine = not ranges.params and len(scalars) > 0
    # a few scalars: bisection does what the centered forms would, cheaper
    centered = len(scalars) > 8 or bool(ranges.params)

    tapes: list = []  # the root's pass, replayed for the other leaves (`_Tape`)

    def leaf(box: dict) -> _Leaf:
        flat, state = _run_once(core_module, entry, prepared, realization, types, params,
                                values, Ranges(box, ranges.params), centered,
                                tapes if TAPE else None)
        b = max((f.e for f in flat), default=ZERO)
        return _Leaf(b, box, flat, state)

    root = leaf(dict(ranges.inputs))
    # the budget in roundings analysed, not seconds: the same bound on any machine
    max_leaves = max(8, min(max_leaves, WORK // max(1, len(root.state.sym_site))))
    leaves = [root]
    if refine:
        full = {p: (np.asarray(lo, float), np.asarray(hi, float))
                for p, (lo, hi) in ranges.inputs.items()}
        heap = [root]
        done: list[_Leaf] = []
        count, stalled = 1, 0
        while heap and count < max_leaves and stalled < STALL and (
                seconds is None or time.perf_counter() - start < seconds):
            worst = heapq.heappop(heap)
            split = _widest(worst.inputs, full) if len(scalars) <= 8 else \
                _influential(worst)
            if split is None:
                done.append(worst)
                continue
            for half in _halves(worst.inputs, *split):
                heapq.heappush(heap, leaf(half))
            count += 1
            # the bound is the worst leaf's: converged when splitting stops lowering it
            now = max([heap[0].bound] + [d.bound for d in done]) if heap else ZERO
            stalled = stalled + 1 if now > DN.mul(worst.bound, 1 - 2.0 ** -10) else 0
        leaves = done + heap
    return _result(entry, realization, leaves, time.perf_counter() - start)


def _influential(leaf: _Leaf):
    """The input element whose deviation moves the values most (the sum of its centered
    forms' coefficients over every site): where a tensor program's box is bisected."""
    weight = leaf.state.influence
    for k in sorted(weight, key=lambda k: -weight[k]):
        path, i = leaf.state.input_of[k]
        lo, hi = leaf.inputs[path]
        if np.reshape(hi, -1)[i] > np.reshape(lo, -1)[i]:
            return path, i
    return None


def _widest(box: dict, full: dict):
    best, where = 0.0, None
    for p, (lo, hi) in box.items():
        flo, fhi = full[p]
        for i in range(np.size(lo)):
            w0 = float(np.reshape(fhi, -1)[i] - np.reshape(flo, -1)[i])
            w = float(np.reshape(hi, -1)[i] - np.reshape(lo, -1)[i])
            if w0 > 0 and w / w0 > best and w > 0:
                best, where = w / w0, (p, i)
    return where


def _halves(box: dict, path: str, i: int):
    lo, hi = (np.array(a, dtype=float, copy=True) for a in box[path])
    a, b = float(lo.reshape(-1)[i]), float(hi.reshape(-1)[i])
    mid = a + (b - a) / 2
    for l_, h_ in ((a, mid), (mid, b)):
        nlo, nhi = lo.copy(), hi.copy()
        nlo.reshape(-1)[i], nhi.reshape(-1)[i] = l_, h_
        out = dict(box)
        out[path] = (nlo, nhi)
        yield out


def _result(entry: str, realization: Realization, leaves: list[_Leaf], seconds: float
            ) -> BoxResult:
    bound = max(lf.bound for lf in leaves)
    lo = min(min((f.lo for f in lf.flat), default=ZERO) for lf in leaves)
    hi = max(max((f.hi for f in lf.flat), default=ZERO) for lf in leaves)
    contributions: dict[str, float] = {}
    site_max: dict = {}
    site_min: dict = {}
    site_lo: dict = {}
    site_hi: dict = {}
    site_type: dict = {}
    problems: list[str] = []
    for lf in leaves:
        st = lf.state
        _site_stats(st)
        per: dict[str, Any] = {}
        for f in lf.flat:
            own: dict[str, Any] = {}
            for k, (cl, ch) in f.d.items():
                s = st.sym_site[k]
                own[s] = UP.add(own.get(s, ZERO), mag(cl, ch))
            for s, v in own.items():
                per[s] = max(per.get(s, ZERO), v)
        for s, v in per.items():
            contributions[s] = max(contributions.get(s, 0.0), float(v))
        for s, v in st.site_max.items():
            site_max[s] = max(site_max.get(s, ZERO), v)
        for s, v in st.site_min.items():
            site_min[s] = min(site_min.get(s, v), v)
        for s in st.site_lo:
            site_lo[s] = min(site_lo.get(s, st.site_lo[s]), st.site_lo[s])
            site_hi[s] = max(site_hi.get(s, st.site_hi[s]), st.site_hi[s])
        site_type.update(st.site_type)
        problems += [p for p in st.problems if p not in problems]
    # sites that are nonzero in some leaves only: no underflow claim for them
    for s in list(site_min):
        if any(s in lf.state.site_max and s not in lf.state.site_min for lf in leaves):
            del site_min[s]
    sites = [SiteRange(s, site_type.get(s, "f64"), float(site_lo[s]), float(site_hi[s]),
                       contributions.get(s, 0.0)) for s in site_lo]
    excluded = excluded_types(site_max, site_min)
    t_of = {s.site: s.type for s in sites}
    for s, bad in excluded.items():
        if t_of.get(s) in bad:
            problems.append(f"{s}: its value leaves {t_of[s]}'s range over the box")
    b = float(bound)  # an mpfr of 53 bits: exact as a float (inf beyond)
    for s, t in t_of.items():
        if float(site_max.get(s, 0)) > float(MAX[t]):
            b = math.inf  # the realized computation can overflow: no finite bound
    return BoxResult(entry, realization.summary(), b, float(lo), float(hi), sites,
                     contributions, excluded, problems, len(leaves), seconds)
