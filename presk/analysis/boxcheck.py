"""Measuring a box bound: the realized computation at points of the box against MPFR.

Three ways, all the computation the kernels do:

- `elementwise_errors`: an element-wise function over `ℝ[...]` (what `presk import-fpcore`
  writes as `f_each`) at N points at once — the Core f64 interpreter, which computes the
  kernels' and the native code's bits under all-f64 (docs/mathlib.md, test_kernel.py), or
  the values given (`computed`: the native code's, `native_points`), against the MPFR
  interpreter at `bits`, point by point.
- `entry_errors`: any entry under any realization at each point — the kernel interpreter
  (the realized types and order of operations) against MPFR.
- `NativeEntry`: any entry under a realization compiled once to native code, called at
  each point, against MPFR values computed once (`exact_outputs`) and shared by the
  realizations compared.
"""

from __future__ import annotations

import gmpy2
import numpy as np


def elementwise_errors(core_module, func: str, args: list[np.ndarray], bits: int = 128,
                       computed: np.ndarray | None = None) -> np.ndarray:
    """|computed − exact| at each point: `args` are the arguments' values, one array of N
    points each; `computed` the values to measure (default: the Core f64 interpreter's)."""
    from .interpret import Interpreter
    from .numbers import F64, MPFR
    f64 = computed if computed is not None else Interpreter(core_module, F64()).run(
        func, [np.asarray(a, np.float64) for a in args])
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


def native_points(core_module, entry: str, args: dict[str, np.ndarray],
                  realization=None) -> np.ndarray:
    """The native code's values of an element-wise entry over one axis of N points (the
    `f_points` entry `presk.frontend.fpcore.to_psk(points=True)` writes), in one call,
    under the realization (all-f64 when None)."""
    from ..frontend.fpcore import POINTS
    from ..pipeline.call import run_native
    n = len(next(iter(args.values())))
    return run_native(core_module, entry, {POINTS: n}, {}, args, realization).result["result"]


class NativeEntry:
    """An entry under a realization compiled once; `errors` calls it at each point."""

    def __init__(self, core_module, entry: str, dims: dict[str, int], realization,
                 params: dict, values: dict) -> None:
        from ..pipeline.call import compile_call, entry_call
        self.call = entry_call(core_module, entry, dims, params, values, realization)
        self.native = compile_call(self.call)[1]

    def errors(self, points: list[tuple[dict, dict]], exact: list) -> list[float]:
        """max |L̂ − L| over the output at each point (values, params), `exact` the MPFR
        outputs at the same points."""
        from ..pipeline.call import entry_inputs
        from .solver import measure_error
        realize = self.call.pipeline.realize
        return [measure_error(self.call.flatten(self.native(entry_inputs(realize, p, v))), e)
                for (v, p), e in zip(points, exact)]


def exact_outputs(core_module, entry: str, dims: dict[str, int],
                  points: list[tuple[dict, dict]], bits: int = 128) -> list:
    """The MPFR interpreter's outputs at each point (values, params)."""
    from . import entry as E
    from .interpret import Interpreter
    from .numbers import MPFR
    prepared = E.prepare(core_module, entry, dict(dims))
    numbers = MPFR(bits)
    interp = Interpreter(core_module, numbers)
    return [interp.run(entry, E.arguments(prepared, numbers, p, v), prepared.dims)
            for v, p in points]
