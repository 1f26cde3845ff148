"""The two number systems the PSK-Core interpreter computes in.

`F64` is IEEE binary64 on numpy float64 arrays, its transcendental functions (exp, log,
tanh, erf, sin, cos, softplus, pow, and sigmoid, gelu and the slopes composed of them) the
math library's f64 programs (presk/emit/mathlib.py, `mathlib.evaluate`) — the functions
the kernel interpreter and the native code compute — composed in the order of operations
of presk/conversion/realize_to_kernel.py's `scalar_op`, so that an all-f64 kernel computes
this interpreter's bits. `MPFR(bits)` is MPFR through gmpy2 on
numpy object arrays of `mpfr` at `bits` of precision: the exact reference every later
stage (autodiff checks, the precision analysis, the native backend) is measured against.
Both take arrays already aligned by the interpreter and return arrays.

Sums run in index order, one term after another from zero, and a contraction adds its
products k ascending, a product then a sum: the order every loop nest of PSK-Kernel
follows, so the f64 interpreter computes the kernels' bits (numpy's own sums are pairwise
and BLAS may fuse a multiply-add).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from typing import Callable

import gmpy2
import numpy as np

from presk.emit import mathlib

UNARY_NAMES = ("neg", "sqrt", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "softplus",
               "abs", "sin", "cos", "erf", "erf_slope", "gelu_slope")
BINARY_NAMES = ("add", "sub", "mul", "div", "min", "max", "pow")
REDUCTION_NAMES = ("sum", "mean", "max", "min", "logsumexp")


class Numbers(ABC):
    """What the interpreter needs of a number system."""

    name = ""
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
        """x^n by repeated multiplication, left to right: x·x·…·x (n ≥ 0)."""
        out = self.array(np.ones(np.shape(x)))
        for _ in range(n):
            out = out * x
        return out

    def sum(self, x: np.ndarray, axes: tuple[int, ...] | None = None,
            keepdims: bool = False) -> np.ndarray:
        """Σ over `axes` (all when None), in row-major order, one term after another."""
        x = np.asarray(x)
        axes = tuple(range(x.ndim)) if axes is None else tuple(a % max(x.ndim, 1) for a in axes)
        kept = [i for i in range(x.ndim) if i not in axes]
        moved = np.transpose(x, kept + list(axes)).reshape(
            [x.shape[i] for i in kept] + [-1 if axes else 1])
        total = self.array(np.zeros(moved.shape[:-1]))
        for k in range(moved.shape[-1]):
            total = total + moved[..., k]
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
        a, b = np.asarray(a), np.asarray(b)
        a_rest = [i for i in range(a.ndim) if i not in a_axes]
        b_rest = [j for j in range(b.ndim) if j not in b_axes]
        left = np.transpose(a, a_rest + list(a_axes)).reshape([a.shape[i] for i in a_rest] + [-1])
        right = np.transpose(b, list(b_axes) + b_rest).reshape([-1] + [b.shape[j] for j in b_rest])
        total = self.array(np.zeros(left.shape[:-1] + right.shape[1:]))
        for k in range(left.shape[-1]):
            total = total + np.multiply.outer(left[..., k], right[k])
        return total


def _f64(fn: str) -> Callable[..., np.ndarray]:
    """The math library's f64 `fn` (presk/emit/mathlib.py)."""
    return lambda *xs: mathlib.evaluate(fn, "f64", *xs)


# the f64 constants of realize_to_kernel's scalar_op
_SQRT2 = math.sqrt(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)


class F64(Numbers):
    name = "f64"

    def __init__(self) -> None:
        exp, erf = _f64("exp"), _f64("erf")

        def phi(x: np.ndarray) -> np.ndarray:  # (1 + erf(x / √2)) / 2
            return (1.0 + erf(x / _SQRT2)) / 2.0

        # composites in scalar_op's order: a kernel computes them from the same functions
        self._unary = {
            "neg": np.negative, "sqrt": np.sqrt, "exp": exp, "log": _f64("log"),
            "tanh": _f64("tanh"),
            "sigmoid": lambda x: 1.0 / (1.0 + exp(-x)),
            "relu": lambda x: np.maximum(x, 0.0),
            "gelu": lambda x: x * phi(x),
            "softplus": _f64("softplus"),
            "abs": np.abs, "sin": _f64("sin"), "cos": _f64("cos"), "erf": erf,
            "erf_slope": lambda x: _TWO_OVER_SQRT_PI * exp(-x * x),
            "gelu_slope": lambda x: phi(x) + x * exp(-x * x / 2.0) / _SQRT_2PI,
        }
        self._binary = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "min": np.minimum, "max": np.maximum, "pow": _f64("pow"),
        }

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
        vec = lambda f: np.frompyfunc(f, 1, 1)  # noqa: E731
        sqrt2 = lambda: gmpy2.sqrt(gmpy2.mpfr(2))  # noqa: E731
        self._unary = {
            "neg": vec(lambda v: -v), "sqrt": vec(gmpy2.sqrt), "exp": vec(gmpy2.exp),
            "log": vec(gmpy2.log), "tanh": vec(gmpy2.tanh),
            "sigmoid": vec(lambda v: 1 / (1 + gmpy2.exp(-v))),
            "relu": vec(lambda v: v if v > 0 or gmpy2.is_nan(v) else gmpy2.mpfr(0)),
            "gelu": vec(lambda v: v * (1 + gmpy2.erf(v / sqrt2())) / 2),
            "softplus": vec(lambda v: v + gmpy2.log1p(gmpy2.exp(-v)) if v > 0
                            else gmpy2.log1p(gmpy2.exp(v))),
            "abs": vec(abs), "sin": vec(gmpy2.sin), "cos": vec(gmpy2.cos),
            "erf": vec(gmpy2.erf),
            "erf_slope": vec(lambda v: 2 * gmpy2.exp(-v * v) / gmpy2.sqrt(gmpy2.const_pi())),
            "gelu_slope": vec(lambda v: (1 + gmpy2.erf(v / sqrt2())) / 2
                              + v * gmpy2.exp(-v * v / 2) / gmpy2.sqrt(2 * gmpy2.const_pi())),
        }
        self._binary = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "min": np.frompyfunc(_nan_min, 2, 1),
            "max": np.frompyfunc(_nan_max, 2, 1),
            "pow": np.frompyfunc(lambda a, b: a ** b, 2, 1),
        }

    def context(self) -> AbstractContextManager:
        return gmpy2.context(precision=self.bits)

    def reduce(self, name: str, x: np.ndarray, axis: int | None) -> np.ndarray:
        if name in ("max", "min"):  # NaN propagates, as in f64 (numpy's max and min)
            x = np.asarray(x)
            if axis is None:  # a Python-function ufunc reduces one axis at a time
                x, axis = x.reshape(-1), 0
            return self._binary[name].reduce(x, axis=axis)
        return super().reduce(name, x, axis)

    def heaviside(self, x: np.ndarray, at_zero: float) -> np.ndarray:
        one, zero, mid = gmpy2.mpfr(1), gmpy2.mpfr(0), gmpy2.mpfr(at_zero)
        step = np.frompyfunc(lambda v: one if v > 0 else zero if v < 0 else mid, 1, 1)
        return np.asarray(step(x), dtype=object)

    def array(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        if values.dtype == object:
            return values
        out = np.empty(values.shape, dtype=object)
        flat = out.reshape(-1)
        # An f64 value converts exactly: MPFR holds every binary64 at 53 bits or more.
        for i, v in enumerate(values.reshape(-1)):
            flat[i] = gmpy2.mpfr(float(v), max(self.bits, 53))
        return out

    def to_f64(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=object)
        return np.array([float(v) for v in x.reshape(-1)], dtype=np.float64).reshape(x.shape)



def _nan_min(a, b):
    """min(a, b), NaN when either is NaN: numpy's minimum, which f64 uses."""
    return a if gmpy2.is_nan(a) else b if gmpy2.is_nan(b) or b < a else a


def _nan_max(a, b):
    return a if gmpy2.is_nan(a) else b if gmpy2.is_nan(b) or b > a else a


def number_system(bits: int | None) -> Numbers:
    """f64 when `bits` is None, else MPFR at `bits`."""
    return F64() if bits is None else MPFR(bits)
