"""Measuring a box bound: the realized computation at points of the box against MPFR.

Two ways, both the computation the kernels do:

- `elementwise_errors`: an element-wise function over `ℝ[...]` (what `presk import-fpcore`
  writes as `f_each`) at N points at once — the Core f64 interpreter, which computes the
  kernels' and the native code's bits under all-f64 (docs/mathlib.md, test_kernel.py),
  against the MPFR interpreter at `bits`, point by point.
- `entry_errors`: any entry under any realization at each point — the kernel interpreter
  (the realized types and order of operations) against MPFR.
"""

from __future__ import annotations

import gmpy2
import numpy as np


def elementwise_errors(core_module, func: str, args: list[np.ndarray], bits: int = 128
                       ) -> np.ndarray:
    """|computed − exact| at each point: `args` are the arguments' values, one array of N
    points each."""
    from .interpret import Interpreter
    from .numbers import F64, MPFR
    f64 = Interpreter(core_module, F64()).run(func, [np.asarray(a, np.float64) for a in args])
    mp = MPFR(bits)
    with mp.context():
        exact = Interpreter(core_module, mp).run(func, [mp.array(np.asarray(a, np.float64))
                                                        for a in args])
    out = np.empty(np.shape(f64))
    flat_f, flat_e, flat_o = (np.reshape(f64, -1), np.reshape(exact, -1), out.reshape(-1))
    with gmpy2.context(precision=256, round=gmpy2.RoundUp):
        for i, (a, b) in enumerate(zip(flat_f, flat_e)):
            flat_o[i] = np.inf if a != a else float(abs(gmpy2.mpfr(float(a)) - b))
    return out


def entry_errors(core_module, entry: str, dims: dict[str, int], realization,
                 points: list[tuple[dict, dict]], bits: int = 128) -> list[float]:
    """max |L̂ − L| over the output at each point (values, params)."""
    from .bounds import measure
    return [measure(core_module, entry, dims, params, values, realization, bits)[0]
            for values, params in points]
