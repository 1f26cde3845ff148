"""The solved realization's reverse sweep (`presk solve --grad`): measured, not estimated.

The solver chooses the forward's types under a budget on the loss (solver.py). A
realization that names only the forward's sites leaves the gradient's reverse sweep in
f64 (docs/artifacts.md, "The reverse sweep"): a training step under it runs its backward
in f64, reading the forward's narrow values through widening converts, and is slower
than the all-f32 one. With `grad`, the solver then offers the reverse sweep narrowed:

- **Candidates.** Every site of the reverse sweep (`reverse_sites`: the values the
  functions psk-differentiate makes compute, not the forward's clones) at f32; under
  `--fma` its contractions (`Linear.apply.bwd/%10`, xᵀ·g and g·wᵀ) fused as well.
- **Measure.** The kernel interpreter's value and gradient under the forward's types and
  the candidate, against the exact gradient (the MPFR reverse sweep the sensitivities
  ran): per parameter tensor, max |ĝ − g| / max |g| — the figure bench/peers.py prints
  beside PyTorch f64. The candidate is taken when every tensor's figure is within the
  budget; else the reverse sweep stays f64 (its figures are reported either way). The
  value's error is the forward's: the `.fwd` functions compute it with the forward's
  types.

These figures are measurements at one sample (the solve's weights and batch), not
bounds: the budget bounds the loss; the gradient's error is measured, like the loss's
after the greedy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from .realization import Realization

NARROW = "f32"


@dataclass
class ReverseSweep:
    """What the solver chose for the reverse sweep, and what it measured."""

    sites: dict[str, str]  # reverse-sweep site → type (empty: the sweep stays f64)
    fma: tuple[str, ...]  # reverse-sweep contractions fused
    errors: dict[str, float]  # grad.<path> → max |ĝ − g| / max |g| under the choice
    tried: dict[str, float] = field(default_factory=dict)  # under the narrowed candidate
    candidates: int = 0  # reverse-sweep sites offered

    @property
    def narrowed(self) -> bool:
        return bool(self.sites)

    @property
    def worst(self) -> float:
        return max(self.errors.values(), default=0.0)


def _differentiated(core_module, entry: str):
    from ..pipeline import differentiate
    module = core_module.clone()
    differentiate(module, [entry], "store")
    return module


def reverse_sites(core_module, entry: str, differentiated=None) -> list[str]:
    """The sites of `entry`'s reverse sweep that hold a tensor: the values computed by the
    functions psk-differentiate makes for it (`f.bwd`, `f.vjp`, `f.value_vjp`), each in
    its own function (not a `.fwd`'s clone of a forward value, which keeps its forward
    site), and the derivatives' coefficients a `.fwd` computes for its `.bwd` (their ops
    name the site they are a coefficient of). `differentiated`: the module differentiated
    for `entry`, when the caller has it."""
    from ..dialects import core as C
    from .sensitivity import reached
    module = differentiated or _differentiated(core_module, entry)
    funcs = {f.sym_name.data: f for f in module.ops if isinstance(f, C.FuncOp)}
    forward = set(reached(core_module, entry))
    out: dict[str, None] = {}
    for name in reached(module, f"{entry}.value_vjp"):
        if name in forward:
            continue
        for op in funcs[name].body.block.ops:
            if (op.results and "site" in op.attributes
                    and op.site.data.rpartition("/%")[0] == name
                    and isinstance(op.results[0].type, C.TensorAttr)
                    and (not name.endswith(".fwd") or "coefficient" in op.attributes)):
                out[op.site.data] = None
    return list(out)


def gradient_errors(result: dict[str, np.ndarray], exact: dict[str, object]
                    ) -> dict[str, float]:
    """Per `grad.<path>`: max |computed − exact| / max |exact| (the exact in MPFR, read as
    f64: its own rounding, 2⁻⁵³ relative, is far below any figure measured here)."""
    out = {}
    for key, value in exact.items():
        e = np.asarray(np.asarray(value, dtype=object).astype(np.float64), dtype=np.float64)
        k = np.asarray(result[key], dtype=np.float64)
        scale = float(np.max(np.abs(e))) if e.size else 0.0
        diff = float(np.max(np.abs(k - e))) if e.size else 0.0
        out[key] = diff / scale if scale > 0 else (0.0 if diff == 0 else np.inf)
    return out


def solve_reverse(core_module, entry: str, dims: dict[str, int], forward: Realization,
                  exact: dict[str, object], budget: float, params, values,
                  fma: bool = False) -> tuple[Realization, ReverseSweep]:
    """The forward's realization with the reverse sweep narrowed where the measured
    gradient stays within `budget` per tensor (the module docstring), and the record."""
    from ..pipeline import run_kernel
    from .sensitivity import contraction_sites

    def errors(real: Realization) -> dict[str, float]:
        run = run_kernel(core_module, entry, dims, params, values, real, grad=True)
        return gradient_errors(run.result, exact)

    module = _differentiated(core_module, entry)
    sites = reverse_sites(core_module, entry, module)
    fused = tuple(s for s in contraction_sites(module, f"{entry}.value_vjp")
                  if s not in forward.fma) if fma else ()
    candidate = replace(forward, sites={**forward.sites, **{s: NARROW for s in sites}},
                        fma=forward.fma + fused)
    tried = errors(candidate)
    if sites and all(v <= budget for v in tried.values()):
        return candidate, ReverseSweep({s: NARROW for s in sites}, fused, tried, tried,
                                       len(sites))
    return forward, ReverseSweep({}, (), errors(forward), tried, len(sites))
