"""The two number systems the PSK-Core interpreter computes in.

Both read the table of element-wise functions (presk/ops). `F64` is IEEE binary64 on
numpy float64 arrays: an exact row is its numpy ufunc, a library row the math library's f64
program (presk/emit/mathlib.py, `mathlib.evaluate`) — the functions the kernel interpreter
and the native code compute — and a composite (sigmoid, gelu, the slopes) the row's
expression in its order of operations, the one the kernels follow too, so that an all-f64
kernel computes this interpreter's bits. `MPFR(bits)` is MPFR through gmpy2 on numpy
object arrays of `mpfr` at `bits` of precision, each row's MPFR formula: the exact
reference every later stage (autodiff checks, the precision analysis, the native backend)
is measured against. Both take arrays already aligned by the interpreter and return arrays.

Sums run in index order, one term after another from zero, and a contraction adds its
products k ascending, a product then a sum: the order every loop nest of PSK-Kernel
follows, so the f64 interpreter computes the kernels' bits (numpy's own sums are pairwise
and BLAS may fuse a multiply-add).
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Callable

import gmpy2
import numpy as np

from presk import ops
from presk.emit import mathlib
from presk.powers import power
from presk.summation import blocked_sum_last

UNARY_NAMES = tuple(f.name for f in ops.rows(arity=1, core=True))
BINARY_NAMES = tuple(f.name for f in ops.rows(arity=2, core=True))
REDUCTION_NAMES = ("sum", "mean", "max", "min", "logsumexp")
_EXTREMUM = {"max": "maximum", "min": "minimum"}  # a reduction's element-wise function


def object_array(values, element: Callable[[Any], Any]) -> np.ndarray:
    """`values` as an object array, each f64 entry made an exact number by `element`.

    An array already of objects is returned as it is (its entries are numbers already);
    the interval, error-bound and MPFR arithmetics all build their constants this way.
    """
    values = np.asarray(values)
    if values.dtype == object:
        return values
    out = np.empty(values.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(values.reshape(-1)):
        flat[i] = element(v)
    return out


class ByEnclosure(ABC):
    """Ordering by enclosure, as numpy's object max/min compare two elements: x > y when
    x's upper end is above y's, x < y when its lower end is below y's. The error-bound
    (`bounds.EB`) and box (`box.Form`) elements share it; `_coerce` makes an operand one."""

    __slots__ = ()

    @abstractmethod
    def _coerce(self, o):
        """`o` (an element or a number) as an element of this kind."""

    def __gt__(self, o):
        return self.hi > self._coerce(o).hi

    def __lt__(self, o):
        return self.lo < self._coerce(o).lo

    def __ge__(self, o):
        return not self < o

    def __le__(self, o):
        return not self > o


def paired(a: np.ndarray, b: np.ndarray, a_axes: list[int],
           b_axes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """a and b laid out for a contraction over the paired axes: `left[…, k]` and
    `right[k, …]`, k running over the paired axes in row-major order, a's other axes
    before and b's after it."""
    a, b = np.asarray(a), np.asarray(b)
    a_rest = [i for i in range(a.ndim) if i not in a_axes]
    b_rest = [j for j in range(b.ndim) if j not in b_axes]
    left = np.transpose(a, a_rest + list(a_axes)).reshape([a.shape[i] for i in a_rest] + [-1])
    right = np.transpose(b, list(b_axes) + b_rest).reshape([-1] + [b.shape[j] for j in b_rest])
    return left, right


class Numbers(ABC):
    """What the interpreter needs of a number system."""

    name = ""
    bytes_per_real = 8
    _unary: dict[str, Callable[[np.ndarray], np.ndarray]]
    _binary: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]

    def context(self) -> AbstractContextManager:
        return nullcontext()

    @abstractmethod
    def array(self, values: np.ndarray) -> np.ndarray:
        """Values (numbers or f64 arrays) as this system's arrays."""

    def to_f64(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=np.float64)

    def constant(self, value: float) -> np.ndarray:
        return self.array(np.array(value, dtype=np.float64))

    def unary(self, name: str, x: np.ndarray) -> np.ndarray:
        return self._unary[name](x)

    def binary(self, name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._binary[name](a, b)

    @abstractmethod
    def heaviside(self, x: np.ndarray, at_zero: float) -> np.ndarray:
        """1 where x > 0, 0 where x < 0, `at_zero` where x = 0."""

    def powi(self, x: np.ndarray, n: int) -> np.ndarray:
        """x^n (n ≥ 0) by square and multiply, the order of presk/powers.py."""
        return power(x, n, lambda a, b: a * b, lambda: self.array(np.ones(np.shape(x))))

    def sum(self, x: np.ndarray, axes: tuple[int, ...] | None = None,
            keepdims: bool = False) -> np.ndarray:
        """Σ over `axes` (all when None) in the blocked order of presk/summation.py, the
        kernels' order: the last axis' sums first, each the terms of the axis before."""
        x = np.asarray(x)
        axes = tuple(range(x.ndim)) if axes is None else tuple(a % max(x.ndim, 1) for a in axes)
        kept = [i for i in range(x.ndim) if i not in axes]
        total = np.transpose(x, kept + sorted(axes))
        if not axes:
            total = self.array(np.zeros(total.shape)) + total
        for _ in axes:
            total = blocked_sum_last(total, lambda shape: self.array(np.zeros(shape)))
        if keepdims:
            total = np.reshape(total, [1 if i in axes else n for i, n in enumerate(x.shape)])
        return total

    def reduce(self, name: str, x: np.ndarray, axis: int | None) -> np.ndarray:
        # A value of type ℝ[] may be a bare number: numpy returns a 0-d object array's
        # reductions and arithmetic as the object itself (an mpfr has no .size).
        x = np.asarray(x)
        axes = None if axis is None else (axis,)
        if name == "sum":
            return self.sum(x, axes)
        if name == "mean":
            count = x.size if axis is None else x.shape[axis]
            return self.sum(x, axes) / self.constant(float(count))
        if name in ("max", "min"):
            return np.max(x, axis=axis) if name == "max" else np.min(x, axis=axis)
        top = np.max(x, axis=axis, keepdims=True)
        shifted = self.unary("exp", x - top)
        out = top + self.unary("log", self.sum(shifted, axes, keepdims=True))
        return np.asarray(out).reshape(()) if axis is None else np.squeeze(out, axis=axis)

    def softmax(self, x: np.ndarray, axis: int | None) -> np.ndarray:
        x = np.asarray(x)
        top = np.max(x, axis=axis, keepdims=True)
        e = self.unary("exp", x - top)
        return e / self.sum(e, None if axis is None else (axis,), keepdims=True)

    def dot(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Contract a's last axis with b's first."""
        a, b = np.asarray(a), np.asarray(b)
        return self.contract(a, b, [a.ndim - 1], [0])

    def contract(self, a: np.ndarray, b: np.ndarray, a_axes: list[int],
                 b_axes: list[int]) -> np.ndarray:
        """Σₖ a[…, k] · b[k, …] over the paired axes, k in row-major order: the result has
        a's other axes, then b's."""
        left, right = paired(a, b, a_axes, b_axes)
        total = self.array(np.zeros(left.shape[:-1] + right.shape[1:]))
        for k in range(left.shape[-1]):
            total = total + np.multiply.outer(left[..., k], right[k])
        return total


def _f64(fn: str) -> Callable[..., np.ndarray]:
    """The math library's f64 `fn` (presk/emit/mathlib.py)."""
    return lambda *xs: mathlib.evaluate(fn, "f64", *xs)


class F64(Numbers):
    name = "f64"

    def __init__(self) -> None:
        table = {f.name: self._function(f) for f in ops.rows(core=True)}
        self._unary = {f.name: table[f.name] for f in ops.rows(arity=1, core=True)}
        self._binary = {f.name: table[f.name] for f in ops.rows(arity=2, core=True)}

    def _function(self, f: ops.Function) -> Callable[..., np.ndarray]:
        c = f.compute
        if isinstance(c, ops.Exact):
            return getattr(np, c.numpy)
        if isinstance(c, ops.Library):
            return _f64(f.name)
        # a composite in its order of operations: a kernel computes it from the same
        # functions
        walker = ops.Walker[np.ndarray](
            const=lambda k: k.value, apply=lambda fn, args: self._function(ops.row(fn))(*args))
        return lambda x: walker.walk(c.expr, {"x": x})

    def array(self, values: np.ndarray) -> np.ndarray:
        return np.asarray(values, dtype=np.float64)

    def heaviside(self, x: np.ndarray, at_zero: float) -> np.ndarray:
        return np.heaviside(x, at_zero)

    def context(self) -> AbstractContextManager:
        return np.errstate(all="ignore")


class MPFR(Numbers):
    """MPFR at `bits` of precision; every operation rounds to nearest."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.name = f"mpfr{bits}"
        exact = {f.name: np.frompyfunc(lambda *a, f=f: f.mpfr(gmpy2, *a), f.arity, 1)
                 for f in ops.rows(core=True)}
        self._unary = {f.name: exact[f.name] for f in ops.rows(arity=1, core=True)}
        self._binary = {f.name: exact[f.name] for f in ops.rows(arity=2, core=True)}

    def context(self) -> AbstractContextManager:
        return gmpy2.context(precision=self.bits)

    def reduce(self, name: str, x: np.ndarray, axis: int | None) -> np.ndarray:
        if name in ("max", "min"):  # NaN propagates, as in f64 (numpy's max and min)
            x = np.asarray(x)
            if axis is None:  # a Python-function ufunc reduces one axis at a time
                x, axis = x.reshape(-1), 0
            return self._binary[_EXTREMUM[name]].reduce(x, axis=axis)
        return super().reduce(name, x, axis)

    def heaviside(self, x: np.ndarray, at_zero: float) -> np.ndarray:
        one, zero, mid = gmpy2.mpfr(1), gmpy2.mpfr(0), gmpy2.mpfr(at_zero)
        step = np.frompyfunc(lambda v: one if v > 0 else zero if v < 0 else mid, 1, 1)
        return np.asarray(step(x), dtype=object)

    @property
    def bytes_per_real(self) -> int:
        """One element of an array: the object and the array's pointer to it."""
        return sys.getsizeof(gmpy2.mpfr(0, max(self.bits, 53))) + 8

    def array(self, values: np.ndarray) -> np.ndarray:
        # An f64 value converts exactly: MPFR holds every binary64 at 53 bits or more.
        bits = max(self.bits, 53)
        return object_array(values, lambda v: gmpy2.mpfr(float(v), bits))

    def to_f64(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=object)
        return np.array([float(v) for v in x.reshape(-1)], dtype=np.float64).reshape(x.shape)



def number_system(bits: int | None) -> Numbers:
    """f64 when `bits` is None, else MPFR at `bits`."""
    return F64() if bits is None else MPFR(bits)
