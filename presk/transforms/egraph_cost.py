"""The cost psk-egraph-opt extracts by: `cost = time + W · bits` per e-node (see
presk/transforms/egraph.py), time priced by a machine profile (`Prices`) or by ops and
bytes, bits measured on a probe (`Probe`: the original function run in f64)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Operation, SSAValue

from presk import ops
from presk.ops.expr import functions_of
from presk.dialects import core as C

from .egraph_terms import Node, Types


BYTES_PER_OP = 4.0  # a byte moved costs a quarter of an operation (ops-and-bytes model)
LIBRARY_OPS = 16.0  # a math-library call costs 16 operations (ops-and-bytes model)
F32_UNIT = 2.0 ** -24
NOMINAL_SIZE = 64  # the size a symbolic dim stands at for the cost, without --dim


# ---- the cost ----

@dataclass
class Probe:
    """The values of an entry's run in f64, by SSA value (every function it reaches, the
    block arguments too), and `step`, the f64 interpreter's step of one op on operand
    values at the run's dims: what the accuracy term measures condition numbers with.
    presk/pipeline/optimize.py makes one."""

    values: dict[SSAValue, Any]
    step: Callable[[Operation, list], Any]  # None where the value cannot be formed


_SLOW_EXACT = {"div": 4.0, "sqrt": 4.0}  # a divide or a root costs a few multiplies
_REDUCE_COUNTS = {"sum": (1.0, 0.0), "mean": (1.0, 0.0), "max": (1.0, 0.0),
                  "min": (1.0, 0.0), "logsumexp": (3.0, 1.0)}  # per input element


def _function_counts(name: str) -> tuple[float, float]:
    """(arithmetic ops, math-library calls) per element of a row: an IEEE op is one op (a
    divide or a root a few), a library program one call, a composite what its expression
    calls plus one op."""
    compute = ops.row(name).compute
    if isinstance(compute, ops.Exact):
        return _SLOW_EXACT.get(name, 1.0), 0.0
    if isinstance(compute, ops.Library):
        return 0.0, 1.0
    parts = [_function_counts(f) for f in functions_of(compute.expr)]
    return 1.0 + sum(w for w, _ in parts), sum(m for _, m in parts)


@dataclass(frozen=True)
class Prices:
    """The machine profile's constants the time term uses when a profile exists (seconds:
    one arithmetic op, one math-library call, one element loaded or stored; seconds per
    byte from L2, L3, memory, by the level the bytes fit in; the p of the p-norm that
    combines the terms), as presk/analysis/cost_model.py prices a loop nest."""

    work: float
    math: float
    load: float
    per_byte: tuple[float, float, float]
    sizes: tuple[int, int]  # L2, L3 bytes
    p: float

    def seconds(self, work: float, calls: float, elements: float, moved: float) -> float:
        level = 0 if moved <= self.sizes[0] else 1 if moved <= self.sizes[1] else 2
        terms = (work * self.work, calls * self.math, elements * self.load,
                 moved * self.per_byte[level])
        return sum(t ** self.p for t in terms) ** (1 / self.p)


@dataclass
class CostModel:
    """`time + weight · bits` per node (the module docstring says why)."""

    types: Types
    dims: Mapping[str, int]
    probe: Probe | None = None
    budget: float | None = None
    prices: Prices | None = None  # a machine profile's; None: ops + bytes/4
    weight: float = 0.0
    _values: dict[str, Any] = field(default_factory=dict)

    def elements(self, t: C.TensorAttr) -> int:
        n = 1
        for a in t.shape.axes:
            n *= a.size if isinstance(a.size, int) else self.dims.get(a.size, NOMINAL_SIZE)
        return n * (NOMINAL_SIZE if t.shape.prefix else 1)

    def time(self, node: Node, out: C.TensorAttr, kids: Sequence[C.TensorAttr]) -> float:
        """The node's predicted time: the profile's seconds, or ops + bytes/4."""
        head, p = node.head, node.payload
        if head in ("Leaf", "Num"):
            return 0.0
        n_out = self.elements(out)
        n_in = [self.elements(k) for k in kids]
        work, calls = 0.0, 0.0
        if head in ("F1", "F2"):
            w, m = _function_counts(p[0])
            work, calls = n_out * w, n_out * m
        elif head == "Powi":
            work = n_out * max(1, p[0].bit_length() + bin(p[0]).count("1") - 2)
        elif head == "Red":
            w, m = _REDUCE_COUNTS[p[0]]
            work, calls = n_in[0] * w, n_in[0] * m
        elif head == "Dot":
            last = kids[0].shape.axes[-1].size if kids[0].shape.axes else 1
            k = last if isinstance(last, int) else self.dims.get(last, NOMINAL_SIZE)
            work = 2.0 * n_out * k
        elements = n_out + sum(n_in)  # a broadcast only moves
        if self.prices is not None:
            return self.prices.seconds(work, calls, elements, 8.0 * elements)
        return work + LIBRARY_OPS * calls + 8.0 * elements / BYTES_PER_OP

    def bits(self, node: Node, cls: str, kids: Sequence[str],
             evaluate: Callable[[Node, list, str], Any]) -> float:
        """Bits lost at `node`: log₂ κ averaged over its elements (0 without a probe or a
        value to measure on); with a budget, only those beyond an f32 site's slack."""
        r = self._values.get(cls)
        vals = [self._values.get(k) for k in kids]
        if self.probe is None or r is None or any(v is None for v in vals):
            return 0.0
        import numpy as np
        with np.errstate(all="ignore"):
            kappa = self._condition(node, r, vals, cls, evaluate, np)
            if kappa is None:
                return 0.0
            kappa = np.asarray(kappa, dtype=np.float64)
            kappa = np.where(np.isnan(kappa), 1.0, np.clip(kappa, 1.0, 2.0 ** 53))
            lost = float(np.mean(np.log2(kappa))) if kappa.size else 0.0
        if self.budget is not None:
            lost = max(0.0, lost - math.log2(self.budget / F32_UNIT))
        return lost

    @staticmethod
    def _condition(node: Node, r: Any, vals: list, cls: str,
                   evaluate: Callable[[Node, list, str], Any], np: Any) -> Any:
        """κ per element: Σ|terms| / |Σ terms| for a sum, difference, reduction or dot;
        |x·f′(x)/f(x)| (a relative difference, step 2⁻²⁰) for a function; None for
        what does not amplify (products, quotients, powers, broadcasts)."""
        head, p = node.head, node.payload
        if head == "F2" and p[0] in ("add", "sub"):
            mag = evaluate(Node("F2", ("add",), node.children), [np.abs(v) for v in vals], cls)
        elif (head == "Red" and p[0] in ("sum", "mean")) or head == "Dot":
            mag = evaluate(node, [np.abs(v) for v in vals], cls)
        elif head == "F1" and p[0] not in ("neg", "abs"):
            h = 2.0 ** -20
            moved = evaluate(node, [vals[0] * (1 + h)], cls)
            return None if moved is None else np.abs((moved - r) / (h * r))
        else:
            return None
        return None if mag is None else np.abs(mag) / np.abs(r)
