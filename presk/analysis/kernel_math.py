"""The math functions of PSK-Kernel (`psk_kernel.math "exp" %x : f32`): ONE table, per
function and scalar type, made from the table of element-wise functions (presk/ops).

Every evaluation of a kernel's math function goes through `MATH` (the kernel interpreter,
presk/analysis/kernel_interpret.py, and anything else that computes what a kernel
computes). The library rows — exp, log, log1p, tanh, erf, sin, cos, softplus, pow, … —
ARE the math library, presk/emit/mathlib.py, through its numpy evaluator
`mathlib.evaluate`: the same straight-line programs, in the type (f32 never promoted),
that the native code calls as `presk_<fn>_<ty>` (presk/emit/mathlib_llvm.py) and that the
C export compiles. So the interpreter and the native code compute the same bits, and under
all-f64 the kernel interpreter computes the PSK-Core f64 interpreter's bits
(presk/analysis/numbers.py `F64` calls the same f64 programs, and a composite row the
same operations in the same order).

The exact rows without a scalar op of their own — `sqrt`, `abs` (sqrt correctly rounded)
and `heaviside`, a choice between its operands — are their numpy ufuncs; numpy computes
those bits, as every target does.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from presk import ops
from presk.emit import mathlib

Fn = Callable[..., np.ndarray]


def _c(x: np.ndarray, dtype: type) -> np.ndarray:
    """A contiguous array of `dtype`: numpy picks its loop (SIMD or scalar) by layout, and
    one layout for every call keeps the bits independent of how the operand was made."""
    return np.ascontiguousarray(x, dtype=dtype)


def _exact(f: Callable[..., np.ndarray], dtype: type) -> Fn:
    def g(*xs: np.ndarray) -> np.ndarray:
        shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
        return np.asarray(f(*(_c(x, dtype) for x in xs)), dtype=dtype).reshape(shape)
    return g


def _mathlib(fn: str, ty: str) -> Fn:
    return lambda *xs: mathlib.evaluate(fn, ty, *xs)


def _table(ty: str) -> dict[str, Fn]:
    dtype = mathlib.TI[ty].dtype
    table = {}
    for fn in ops.kernel_math():
        c = ops.row(fn).compute
        table[fn] = _exact(getattr(np, c.numpy), dtype) if isinstance(c, ops.Exact) \
            else _mathlib(fn, ty)
    return table


MATH: dict[str, dict[str, Fn]] = {"f64": _table("f64"), "f32": _table("f32")}
"""MATH[type][function](operands…) → the results, in the type ("f64" or "f32")."""


def math_fn(name: str, type_name: str) -> Fn:
    """The table's entry for `name` in `type_name` ("f64" or "f32")."""
    try:
        return MATH[type_name][name]
    except KeyError:
        raise KeyError(f"the math table has no `{name}` in {type_name}") from None
