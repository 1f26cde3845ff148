"""The math functions of PSK-Kernel (`psk_kernel.math "exp" %x : f32`): ONE table, per
function and scalar type.

Every evaluation of a kernel's math function goes through `MATH` (the kernel interpreter,
presk/analysis/kernel_interpret.py, and anything else that computes what a kernel
computes). The transcendental entries — exp, log, log1p, tanh, erf, sin, cos, sigmoid,
softplus and pow — ARE the math library, presk/emit/mathlib.py, through its numpy
evaluator `mathlib.evaluate`: the same straight-line programs, in the type (f32 never
promoted), that the native code calls as `presk_<fn>_<ty>` (presk/emit/mathlib_llvm.py) and
that the C export compiles. So the interpreter and the native code compute the same bits,
and under all-f64 the kernel interpreter computes the PSK-Core f64 interpreter's bits
(presk/analysis/numbers.py `F64` calls the same f64 programs, in the order of operations of
presk/conversion/realize_to_kernel.py's `scalar_op`).

`sqrt` and `abs` are exact IEEE operations (sqrt correctly rounded) and `heaviside` a
choice between its operands; numpy computes those bits, as every target does.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from presk.emit import mathlib

Fn = Callable[..., np.ndarray]

_MATHLIB = ("exp", "log", "log1p", "tanh", "erf", "sin", "cos", "sigmoid", "softplus", "pow")
"""The table's functions that are mathlib's (all of mathlib.FUNCTIONS)."""


def _c(x: np.ndarray, dtype: type) -> np.ndarray:
    """A contiguous array of `dtype`: numpy picks its loop (SIMD or scalar) by layout, and
    one layout for every call keeps the bits independent of how the operand was made."""
    return np.ascontiguousarray(x, dtype=dtype)


def _unary(f: Callable[[np.ndarray], np.ndarray], dtype: type) -> Fn:
    return lambda x: np.asarray(f(_c(x, dtype)), dtype=dtype).reshape(np.shape(x))


def _mathlib(fn: str, ty: str) -> Fn:
    return lambda *xs: mathlib.evaluate(fn, ty, *xs)


def _table(ty: str) -> dict[str, Fn]:
    dtype = mathlib.TI[ty].dtype
    table = {fn: _mathlib(fn, ty) for fn in _MATHLIB}
    table.update({
        "sqrt": _unary(np.sqrt, dtype),
        "abs": _unary(np.abs, dtype),
        # 1 where x > 0, 0 where x < 0, h where x = 0 (NaN stays NaN): exact.
        "heaviside": lambda x, h: np.asarray(np.heaviside(_c(x, dtype), _c(h, dtype)),
                                             dtype=dtype).reshape(np.broadcast_shapes(
                                                 np.shape(x), np.shape(h))),
    })
    return table


MATH: dict[str, dict[str, Fn]] = {"f64": _table("f64"), "f32": _table("f32")}
"""MATH[type][function](operands…) → the results, in the type ("f64" or "f32")."""


def math_fn(name: str, type_name: str) -> Fn:
    """The table's entry for `name` in `type_name` ("f64" or "f32")."""
    try:
        return MATH[type_name][name]
    except KeyError:
        raise KeyError(f"the math table has no `{name}` in {type_name}") from None
