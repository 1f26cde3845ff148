"""The math functions of PSK-Kernel (`psk_kernel.math "exp" %x : f32`): ONE table, per
function and scalar type.

Every evaluation of a kernel's math function goes through `MATH` (the kernel interpreter,
presk/analysis/kernel_interpret.py, and anything else that computes what a kernel
computes). For now the entries are numpy's, per type: f64 through numpy's float64 loops
(erf through Python's `math.erf`, as the PSK-Core f64 interpreter computes it), f32
through numpy's float32 loops, never promoted to f64 — except erf, which numpy lacks: the
f64 erf rounded to f32. `sqrt` is IEEE (correctly rounded) in both types, as it will stay.

The native backend's math library (a later issue: transcendental functions written once,
as IR or one polynomial source, emitted to both LLVM and C) will REPLACE these entries, so
that the interpreter, the native code and the C export compute the same bits. Until then
the bits of exp, log, tanh, erf, sin, cos, log1p, expm1, softplus and pow are numpy's and
may differ from the native code's by an ulp; + − × ÷, sqrt, min, max, abs and the
conversions are exact IEEE operations and will not change.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

Fn = Callable[..., np.ndarray]

_erf64 = np.frompyfunc(math.erf, 1, 1)


def _c(x: np.ndarray, dtype: type) -> np.ndarray:
    """A contiguous array of `dtype`: numpy picks its loop (SIMD or scalar) by layout, and
    one layout for every call keeps the bits independent of how the operand was made."""
    return np.ascontiguousarray(x, dtype=dtype)


def _erf_f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf64(_c(x, np.float64)), dtype=np.float64).reshape(np.shape(x))


def _erf_f32(x: np.ndarray) -> np.ndarray:
    return _erf_f64(np.asarray(x, dtype=np.float64)).astype(np.float32)


def _unary(f: Callable[[np.ndarray], np.ndarray], dtype: type) -> Fn:
    return lambda x: np.asarray(f(_c(x, dtype)), dtype=dtype)


def _table(dtype: type) -> dict[str, Fn]:
    zero = dtype(0)
    return {
        "exp": _unary(np.exp, dtype),
        "log": _unary(np.log, dtype),
        "tanh": _unary(np.tanh, dtype),
        "sin": _unary(np.sin, dtype),
        "cos": _unary(np.cos, dtype),
        "sqrt": _unary(np.sqrt, dtype),
        "abs": _unary(np.abs, dtype),
        "log1p": _unary(np.log1p, dtype),
        "expm1": _unary(np.expm1, dtype),
        "softplus": _unary(lambda v: np.logaddexp(zero, v), dtype),
        "erf": _erf_f64 if dtype is np.float64 else _erf_f32,
        "pow": lambda a, b: np.asarray(np.power(_c(a, dtype), _c(b, dtype)), dtype=dtype),
        # 1 where x > 0, 0 where x < 0, h where x = 0 (NaN stays NaN): exact.
        "heaviside": lambda x, h: np.asarray(np.heaviside(_c(x, dtype), _c(h, dtype)),
                                             dtype=dtype),
    }


MATH: dict[str, dict[str, Fn]] = {"f64": _table(np.float64), "f32": _table(np.float32)}
"""MATH[type][function](operands…) → the results, in the type ("f64" or "f32")."""


def math_fn(name: str, type_name: str) -> Fn:
    """The table's entry for `name` in `type_name` ("f64" or "f32")."""
    try:
        return MATH[type_name][name]
    except KeyError:
        raise KeyError(f"the math table has no `{name}` in {type_name}") from None
