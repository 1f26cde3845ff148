"""THE table of element-wise functions: one row per function, read by every stage.

A row says what the function is (name, arity, regularity), how every target computes it
(`compute`: an exact IEEE operation, a program of the math library presk/emit/mathlib.py,
or a composite of other rows), its derivative, its exact value (an MPFR formula over
gmpy2), its PyTorch spelling and what the precision bounds charge for it. The checker,
lowering, the Core and Realize op classes, both interpreters, differentiation, the kernel
conversions, the C and PyTorch emitters and the bounds all read these rows; adding a
function is adding a row (docs/contributing.md has the recipe).

Pure Python (math only): `presk check` imports it without xDSL or llvmlite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from .expr import DR, A, B, X, Y, Expr, Heaviside, call, functions_of, nodes, signed

C_INF, C0 = "C∞", "C⁰"  # smooth; continuous with kinks (relu, abs, min, max)

LIBRARY_ULPS = 4.0  # the least the sampled bounds charge for a library function or composite
EXACT_ULPS = 1.0  # … for a correctly rounded operation
NO_ROUNDING = 0.0  # … for an exact one (neg, abs, min, max, relu, heaviside)


def charge_of(ulps: float) -> float:
    """A result within `ulps` ulps of the correctly rounded value is within ulps + ½ ulp
    of the exact one, and an ulp of a normal y is at most 2u·|y|: (2·ulps + 1)·u·|y|."""
    return 2.0 * ulps + 1.0


# ---- how a function is computed ----

@dataclass(frozen=True)
class Exact:
    """An IEEE operation with a fixed result (correctly rounded, or exact): numpy's
    `numpy` ufunc computes its bits. `kernel` names its own PSK-Kernel scalar op
    (`psk_kernel.add`); without it the kernel computes it as `psk_kernel.math "<name>"`,
    which lowers to the `math` dialect's `math_op`, the LLVM intrinsic `llvm` and the C99
    functions `c` (f64, f32)."""

    numpy: str
    kernel: str | None = None
    math_op: str | None = None
    llvm: str | None = None
    c: tuple[str, str] | None = None


@dataclass(frozen=True)
class Library:
    """A program of the math library (presk/emit/mathlib.py `DEFS[name]`), called as
    `presk_<name>_<f32|f64>` by native code and C; kernel→std emits it as the `math`
    dialect's `math_op` when that dialect has the function, else as a direct call."""

    math_op: str | None = None


@dataclass(frozen=True)
class Composite:
    """Computed as `expr` over the operand `X` and other rows, in its order of
    operations, by every engine (so every engine computes the same bits)."""

    expr: Expr


@dataclass(frozen=True)
class Derivative:
    """The operand's cotangent as `expr` over `DR` (the result's cotangent), the operands
    (`X`; `A`, `B` of a binary function) and `Y`; `flip`: the contribution is the negative
    of `expr`. `reads`: operands the rule reads before it computes, in this order (the
    order a stored forward sweep keeps them in), where that is not their order in `expr`."""

    expr: Expr
    flip: bool = False
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Monotone:
    """For the bounds: `f` (f64) is monotone and |f'| ≤ slope(lo, hi, e) on [lo − e,
    hi + e] (a number: a global Lipschitz constant)."""

    f: Callable[[float], float]
    slope: float | Callable[[float, float, float], float]

    def lipschitz(self, lo: float, hi: float, e: float) -> float:
        return self.slope if isinstance(self.slope, float) else self.slope(lo, hi, e)

    def enclose(self, lo: float, hi: float, e: float) -> tuple[float, float, float]:
        """f's range on [lo, hi] and how far an error e of the operand moves it."""
        a, b = self.f(lo), self.f(hi)
        return min(a, b), max(a, b), self.lipschitz(lo, hi, e) * e


@dataclass(frozen=True)
class Bounded:
    """For the bounds: f stays within [lo, hi] and |f'| ≤ slope everywhere (sin, cos)."""

    lo: float
    hi: float
    slope: float

    def enclose(self, lo: float, hi: float, e: float) -> tuple[float, float, float]:
        """As Monotone.enclose: here the whole range, whatever the operand's."""
        return self.lo, self.hi, self.slope * e


@dataclass(frozen=True)
class Function:
    name: str
    arity: int
    regularity: str
    compute: Exact | Library | Composite
    mpfr: Callable[..., Any]  # (gmpy2, *operands) → the value at the context's precision
    torch: str | None  # a format of {x} (unary) or {a}, {b} (binary)
    derivative: Derivative | None = None  # a unary function's; None: constant in its operand
    bound_ulps: float = EXACT_ULPS
    bound: Monotone | Bounded | None = None  # None: bounds.ENCLOSURES has its rule
    builtin: str | None = None  # the .psk spelling of a call, if a program may call it
    core: bool = True  # a Core and a Realize op (`psk_core.<name>`) exist for it
    doc: str = ""
    # a binary function's derivatives: the cotangents of its two operands
    partials: tuple[Derivative, Derivative] | None = None
    # a Library row: the math library's largest error, in ulps from the correctly rounded
    # result, per type (f32, f64), as measured against MPFR (docs/mathlib.md; asserted by
    # test/unit/test_mathlib.py, which reads it from here)
    ulps: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.ulps is not None:  # the sampled rules charge no less than the library errs
            object.__setattr__(self, "bound_ulps",
                               max(self.bound_ulps, charge_of(max(self.ulps))))

    def library_charge(self, ty: str) -> float:
        """What a call rounded in `ty` ("f32" or "f64") errs by, in units of u(ty)·|y|."""
        assert self.ulps is not None, f"{self.name} is not a math-library function"
        return charge_of(self.ulps[0 if ty == "f32" else 1])

    @property
    def op_class(self) -> str:
        """The name of its op classes: `GeluSlopeOp`."""
        return "".join(p.title() for p in self.name.split("_")) + "Op"


# ---- helpers of the rows ----

def _sqrt2(g):
    return g.sqrt(g.mpfr(2))


def _sigmoid64(v: float) -> float:
    return 1 / (1 + math.exp(-v)) if v > -700 else 0.0


def _softplus64(v: float) -> float:
    return v + math.log1p(math.exp(-v)) if v > 0 else math.log1p(math.exp(v))


def _overflowing(f: Callable[[float], float]) -> Callable[[float], float]:
    """`f` with an overflow as ±inf (Python's math raises OverflowError)."""
    def g(v: float) -> float:
        try:
            return f(v)
        except OverflowError:
            return math.copysign(math.inf, f(math.copysign(1.0, v)))
    return g


_sinh64, _cosh64 = _overflowing(math.sinh), _overflowing(math.cosh)
_exp64 = _overflowing(math.exp)


def _log1p64(v: float) -> float:
    """log1p, −inf at and below −1 (an enclosure's lower end: the bounds widen it anyway)."""
    return math.log1p(v) if v > -1 else -math.inf


def _log1p_slope(lo: float, hi: float, e: float) -> float:
    """|log1p′| = 1/(1 + x) on [lo − e, hi + e]: unbounded when that reaches −1."""
    return 1 / (1 + (lo - e)) if lo - e > -1 else math.inf


SQRT2 = math.sqrt(2.0)  # √2 in f64
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)  # 2/√π in f64
SQRT_2PI = math.sqrt(2.0 * math.pi)  # √(2π) in f64

_PHI = (1 + call("erf", X / SQRT2)) / 2  # the normal distribution Φ(x)


ROWS: tuple[Function, ...] = (
    # ---- exact IEEE operations ----
    Function("neg", 1, C_INF, Exact("negative", kernel="neg"), lambda g, v: -v, "-{x}",
             Derivative(DR, flip=True), NO_ROUNDING, doc="−x (the prefix `-`)"),
    Function("add", 2, C_INF, Exact("add", kernel="add"), lambda g, a, b: a + b,
             "{a} + {b}", partials=(Derivative(DR), Derivative(DR)), doc="a + b"),
    Function("sub", 2, C_INF, Exact("subtract", kernel="sub"), lambda g, a, b: a - b,
             "{a} - {b}", partials=(Derivative(DR), Derivative(DR, flip=True)), doc="a − b"),
    Function("mul", 2, C_INF, Exact("multiply", kernel="mul"), lambda g, a, b: a * b,
             "{a} * {b}", partials=(Derivative(DR * B), Derivative(DR * A)), doc="a · b"),
    Function("div", 2, C_INF, Exact("divide", kernel="div"), lambda g, a, b: a / b,
             "{a} / {b}", partials=(Derivative(DR / B), Derivative(DR * Y / B, flip=True)),
             doc="a / b"),
    # each side of an extremum takes the cotangent where it wins, half of it at a tie
    Function("minimum", 2, C0, Exact("minimum", kernel="min"),
             lambda g, a, b: a if g.is_nan(a) else b if g.is_nan(b) or b < a else a,
             "torch.minimum({a}, {b})", bound_ulps=NO_ROUNDING, builtin="min",
             partials=(Derivative(DR * Heaviside(B - A, 0.5), reads=("a", "b")),
                       Derivative(DR * Heaviside(A - B, 0.5), reads=("b", "a"))),
             doc="the smaller operand, NaN when either is (`min(a, b)`; psk_core.min is the "
             "reduction)"),
    Function("maximum", 2, C0, Exact("maximum", kernel="max"),
             lambda g, a, b: a if g.is_nan(a) else b if g.is_nan(b) or b > a else a,
             "torch.maximum({a}, {b})", bound_ulps=NO_ROUNDING, builtin="max",
             partials=(Derivative(DR * Heaviside(A - B, 0.5)),
                       Derivative(DR * Heaviside(B - A, 0.5))),
             doc="the larger operand, NaN when either is (`max(a, b)`; psk_core.max is the "
             "reduction)"),
    Function("sqrt", 1, C_INF, Exact("sqrt", math_op="SqrtOp", llvm="llvm.sqrt",
                                     c=("sqrt", "sqrtf")),
             lambda g, v: g.sqrt(v), "torch.sqrt({x})",
             Derivative(DR * signed(0.5) / Y), builtin="sqrt", doc="√x, correctly rounded"),
    Function("abs", 1, C0, Exact("abs", math_op="AbsFOp", llvm="llvm.fabs",
                                 c=("fabs", "fabsf")),
             lambda g, v: abs(v), "torch.abs({x})",
             Derivative(DR * (Heaviside(X, 0.0) - Heaviside(-X, 0.0))), NO_ROUNDING,
             builtin="abs",
             doc="|x|"),
    Function("heaviside", 2, C0, Exact("heaviside"),
             lambda g, v, h: g.mpfr(1) if v > 0 else g.mpfr(0) if v < 0 else h, None,
             bound_ulps=NO_ROUNDING, core=False, doc="1 where x > 0, 0 where x < 0, h at 0 (psk_core.heaviside "
             "keeps h as its attribute `at_zero`)"),
    # ---- the math library ----
    Function("exp", 1, C_INF, Library("ExpOp"), lambda g, v: g.exp(v), "torch.exp({x})",
             Derivative(DR * Y), LIBRARY_ULPS, builtin="exp", doc="eˣ", ulps=(1, 1)),
    Function("log", 1, C_INF, Library("LogOp"), lambda g, v: g.log(v), "torch.log({x})",
             Derivative(DR / X), LIBRARY_ULPS, builtin="log", doc="the natural logarithm",
             ulps=(1, 1)),
    Function("log1p", 1, C_INF, Library("Log1pOp"), lambda g, v: g.log1p(v),
             "torch.log1p({x})", Derivative(DR / (1 + X)), LIBRARY_ULPS,
             Monotone(_log1p64, _log1p_slope), builtin="log1p",
             doc="log(1 + x), accurate where x is small (the optimizer's form of log(1 + x))",
             ulps=(1, 1)),
    Function("expm1", 1, C_INF, Library("ExpM1Op"), lambda g, v: g.expm1(v),
             "torch.expm1({x})", Derivative(DR * (Y + 1)), LIBRARY_ULPS,
             Monotone(_overflowing(math.expm1), lambda lo, hi, e: _exp64(hi + e)),
             builtin="expm1",
             doc="eˣ − 1, accurate where x is small (the optimizer's form of exp(x) − 1)",
             ulps=(1, 1)),
    Function("tanh", 1, C_INF, Library("TanhOp"), lambda g, v: g.tanh(v),
             "torch.tanh({x})", Derivative(DR * (1 - Y ** 2)), LIBRARY_ULPS,
             Monotone(math.tanh, 1.0), builtin="tanh", doc="the hyperbolic tangent", ulps=(1, 1)),
    Function("erf", 1, C_INF, Library("ErfOp"), lambda g, v: g.erf(v), "torch.erf({x})",
             Derivative(DR * call("erf_slope", X)), LIBRARY_ULPS,
             Monotone(math.erf, 2 / math.sqrt(math.pi)),
             doc="the error function: gelu's derivative is written with it", ulps=(1, 1)),
    Function("sin", 1, C_INF, Library("SinOp"), lambda g, v: g.sin(v), "torch.sin({x})",
             Derivative(DR * call("cos", X)), LIBRARY_ULPS, Bounded(-1.0, 1.0, 1.0),
             builtin="sin", doc="sine",
             ulps=(1, 1)),
    Function("cos", 1, C_INF, Library("CosOp"), lambda g, v: g.cos(v), "torch.cos({x})",
             Derivative(DR * call("sin", X), flip=True), LIBRARY_ULPS,
             Bounded(-1.0, 1.0, 1.0), builtin="cos",
             doc="cosine", ulps=(1, 1)),
    Function("softplus", 1, C_INF, Library(),
             lambda g, v: v + g.log1p(g.exp(-v)) if v > 0 else g.log1p(g.exp(v)),
             "torch.logaddexp({x}, torch.zeros_like({x}))",
             Derivative(DR * call("sigmoid", X)), LIBRARY_ULPS, Monotone(_softplus64, 1.0),
             builtin="softplus", doc="log(1 + eˣ)", ulps=(1, 2)),
    Function("sinh", 1, C_INF, Library("SinhOp"), lambda g, v: g.sinh(v), "torch.sinh({x})",
             Derivative(DR * (call("abs", Y) + call("exp", -call("abs", X)))), LIBRARY_ULPS,
             Monotone(_sinh64, lambda lo, hi, e: _cosh64(max(abs(lo), abs(hi)) + e)),
             builtin="sinh", doc="the hyperbolic sine (cosh x = |sinh x| + e^−|x|, its slope)",
             ulps=(1, 1)),
    Function("pow", 2, C_INF, Library("PowFOp"), lambda g, a, b: a ** b, "{a} ** {b}",
             partials=(Derivative(DR * (B * call("pow", A, B - 1)), reads=("a", "b")),
                       Derivative(DR * (Y * call("log", A)))),  # b·aᵇ⁻¹, aᵇ·log a
             doc="aᵇ for a real b (`a ^ b`; a natural b is psk_core.powi)", ulps=(1, 1)),
    # ---- composites: one definition, the order of operations every engine follows ----
    Function("sigmoid", 1, C_INF, Composite(1 / (1 + call("exp", -X))),
             lambda g, v: 1 / (1 + g.exp(-v)), "torch.sigmoid({x})",
             Derivative(DR * (Y * (1 - Y))), LIBRARY_ULPS, Monotone(_sigmoid64, 0.25),
             builtin="sigmoid", doc="1 / (1 + e⁻ˣ)"),
    Function("relu", 1, C0, Composite(call("maximum", X, 0.0)),
             lambda g, v: v if v > 0 or g.is_nan(v) else g.mpfr(0), "torch.relu({x})",
             Derivative(DR * Heaviside(X, 0.0)), NO_ROUNDING, builtin="relu",
             doc="max(x, 0), NaN propagating"),
    Function("gelu", 1, C_INF, Composite(X * _PHI),
             lambda g, v: v * (1 + g.erf(v / _sqrt2(g))) / 2, "F.gelu({x})",
             Derivative(DR * call("gelu_slope", X)), LIBRARY_ULPS, builtin="gelu",
             doc="x·Φ(x), Φ the normal distribution (exact, through erf)"),
    Function("erf_slope", 1, C_INF, Composite(TWO_OVER_SQRT_PI * call("exp", -X * X)),
             lambda g, v: 2 * g.exp(-v * v) / g.sqrt(g.const_pi()),
             "2.0 / math.sqrt(math.pi) * torch.exp(-{x} * {x})",
             doc="erf's derivative, 2/√π·exp(−x²)"),
    Function("gelu_slope", 1, C_INF,
             Composite(_PHI + X * call("exp", -X * X / 2) / SQRT_2PI),
             lambda g, v: (1 + g.erf(v / _sqrt2(g))) / 2
             + v * g.exp(-v * v / 2) / g.sqrt(2 * g.const_pi()),
             "(1.0 + torch.erf({x} / math.sqrt(2.0))) / 2.0 + "
             "{x} * torch.exp(-{x} * {x} / 2.0) / math.sqrt(2.0 * math.pi)",
             doc="gelu's derivative, Φ(x) + x·φ(x), φ(x) = exp(−x²/2)/√(2π)"),
)
"""Every element-wise function. A library row's `ulps` is the math library's measured error
per type; the sampled bounds charge it at least LIBRARY_ULPS (their figures stay), the box
analysis charges each type's own (`library_charge`). The sampled bounds charge the slopes
as exact operations (EXACT_ULPS), as they did before this table: a known looseness."""

BY_NAME: dict[str, Function] = {f.name: f for f in ROWS}


def row(name: str) -> Function:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no element-wise function `{name}`") from None


def rows(*, arity: int | None = None, core: bool | None = None) -> list[Function]:
    """The rows with this arity / with (or without) Core and Realize ops, in table order."""
    return [f for f in ROWS if (arity is None or f.arity == arity)
            and (core is None or f.core == core)]


def builtins(arity: int | None = None) -> dict[str, Function]:
    """The functions a .psk program calls by name, by that name."""
    return {f.builtin: f for f in ROWS if f.builtin and (arity is None or f.arity == arity)}


def library() -> list[str]:
    """The functions that are math-library programs."""
    return [f.name for f in ROWS if isinstance(f.compute, Library)]


def kernel_math() -> dict[str, int]:
    """The functions of `psk_kernel.math` (name: arity): the library's and the exact ones
    without a scalar op of their own."""
    return {f.name: f.arity for f in ROWS
            if isinstance(f.compute, Library)
            or (isinstance(f.compute, Exact) and f.compute.kernel is None)}


def kernel_arithmetic(name: str) -> bool:
    """Whether a function is computed by the kernel's own scalar ops alone (an exact row
    with its op, or a composite of such rows, powers and constants): no math-library call
    and no `psk_kernel.math`. A register tile runs such ops on its vectors; it runs a math
    call lane by lane."""
    c = row(name).compute
    if isinstance(c, Exact):
        return c.kernel is not None
    if isinstance(c, Composite):
        return not _has_heaviside(c.expr) and all(kernel_arithmetic(f)
                                                  for f in functions_of(c.expr))
    return False


def calls_library(name: str) -> bool:
    """Whether a function is a math-library program or a composite that calls one: a long
    chain of dependent operations, not a few IEEE ones."""
    c = row(name).compute
    if isinstance(c, Library):
        return True
    return isinstance(c, Composite) and any(calls_library(f) for f in functions_of(c.expr))


def _has_heaviside(e: Expr) -> bool:
    return any(isinstance(n, Heaviside) for n in nodes(e))


def _check() -> None:
    for f in ROWS:
        used = set()
        if isinstance(f.compute, Composite):
            used |= functions_of(f.compute.expr)
        for d in (f.derivative, *(f.partials or ())):
            if d is not None:
                used |= functions_of(d.expr)
        assert (f.partials is not None) == (f.arity == 2 and f.core), \
            f"{f.name}: a binary function with ops has the derivatives of its two operands"
        missing = used - BY_NAME.keys()
        assert not missing, f"{f.name} uses {missing}, not rows of the table"


_check()
