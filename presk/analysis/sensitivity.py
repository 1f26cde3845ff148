"""The sensitivities of an entry (reference §6.2): ‖∂L/∂v‖₁ at every site, from one
reverse sweep in MPFR.

The entry E is differentiated by psk-differentiate with `all_values=True` (so that the
values computed from no differentiable argument, a `real eps`, get a cotangent too) and
`E.value_vjp(args, 1)` runs in the MPFR interpreter at `bits` (default 128). Each time an
operation of a `.bwd` executes whose attribute `adjoint` or `adjoint_negated` names a site,
the 1-norm of its value (Σ |element|, over every tensor of a tuple or parameter tree) is
added to that site's sensitivity; so a site's figure is summed over every call and fold
iteration of the function that owns it.

Where a site's cotangent is not an operation of its own, the rules:

- **a function's result** (`loss/%7`, `RMSNorm.apply/%10`, `Block.apply/%8`): its cotangent
  is the `.bwd`'s second argument, dy — the caller's cotangent of the call's result (or of
  the fold's accumulator, or 1 for the entry). The sweep marks the `.bwd` function itself
  with the sites whose cotangent dy is (`adjoint_dy = ["Linear.apply/%5",
  "Linear.apply/%3"]`): each call of it adds ‖dy‖₁ to each;
- **a value whose cotangent passes through unchanged** (an operand of `add`, the left
  operand of `sub`, a `get` or a field read whose reader passes it on, a call's result
  returned as it is): the differentiator marks the one operation holding the cotangent
  with every site it is the cotangent of (`adjoint = ["loss/%5", "loss/%4"]`, or the
  `.bwd`'s `adjoint_dy` when it is dy, as `Block.apply/%7` shares `Block.apply/%8`'s), so
  they share the figure;
- **a value held negated** (`sub`'s right operand, `adjoint_negated`): ‖−d‖₁ = ‖d‖₁;
- **a value computed from no differentiable argument** (`%5 = real eps`, a constant): the
  sweep made with `all_values` gives it its cotangent, the reader's summed back to its shape
  (for `%6 = add ms, %5`, the `sum_to` of d%6 to ℝ[]); the figure is ∂L/∂v all the same;
- **a value no cotangent reaches** (computed but not read on the way to the result, or read
  only where the derivative is zero everywhere, a `heaviside`): 0.

Sites are the operations of the functions the entry reaches whose result has a
differentiable type (ℝ tensors, parameter trees, tuples of them); an f64 (`1e-6`) and the
functions' arguments are not sites here. Parameters are listed apart by path: ‖∂L/∂θ‖₁ of
each tensor of the gradient in the entry's parameter-tree argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import gmpy2
import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation

from ..dialects import core as C
from ..transforms.differentiate import Differentiator, differentiable
from . import entry as E
from .interpret import Interpreter, Tree
from .numbers import MPFR


@dataclass
class Sensitivities:
    """‖∂L/∂v‖₁ per site and per parameter path, as MPFR numbers."""

    entry: str
    bits: int
    value: Any  # the entry's result
    sites: dict[str, Any]  # site → Σ over calls of ‖∂L/∂v‖₁, in the functions' order
    functions: dict[str, list[str]]  # each function the entry reaches → its sites
    params: dict[str, Any]  # parameter path → ‖∂L/∂θ‖₁
    recorded: set[str] = field(default_factory=set)  # sites a cotangent was read for
    calls: dict[str, int] = field(default_factory=dict)  # function → reverse sweeps run
    # a tensor result: per element j of it (row-major), ‖∂L_j/∂v‖₁ per site and path;
    # `sites` and `params` are then the largest over j. One element: [] (they are it).
    components: list[dict[str, Any]] = field(default_factory=list)
    shape: tuple[int, ...] = ()  # the result's
    # a one-element result: its exact gradient in the first argument, `grad.<path>` → MPFR
    gradient: dict[str, Any] = field(default_factory=dict)

    def per_function(self) -> dict[str, Any]:
        """Σ of its sites' sensitivities, per function, in the functions' order."""
        out = {}
        for name, sites in self.functions.items():
            total = gmpy2.mpfr(0, self.bits)
            with gmpy2.context(precision=self.bits):
                for s in sites:
                    total += self.sites[s]
            out[name] = total
        return out


def reached(module: ModuleOp, entry: str) -> list[str]:
    """The functions `entry` reaches through calls and folds, in the module's order."""
    funcs = _funcs(module)
    seen, todo = {entry}, [entry]
    while todo:
        for op in funcs[todo.pop()].body.block.ops:
            callee = op.attributes.get("callee")
            if callee is not None and callee.root_reference.data not in seen:
                seen.add(callee.root_reference.data)
                todo.append(callee.root_reference.data)
    return [name for name in funcs if name in seen]


def contraction_sites(module: ModuleOp, entry: str) -> list[str]:
    """The sites of every contraction (`dot`, `contract`) that `entry` reaches, each named
    once in its own function (a `.fwd` clone keeps its forward site), in the module's
    order: what a realization fusing every contraction lists under `fma`."""
    funcs = _funcs(module)
    out: dict[str, None] = {}
    for name in reached(module, entry):
        for op in funcs[name].body.block.ops:
            if isinstance(op, (C.DotOp, C.ContractOp)):
                site = op.site.data  # type: ignore[attr-defined]
                if site.rpartition("/%")[0] in funcs:
                    out[site] = None
    return list(out)


def site_ops(func: C.FuncOp) -> list[Operation]:
    """A function's sites: its operations whose result has a differentiable type."""
    return [op for op in func.body.block.ops
            if not isinstance(op, C.ReturnOp) and op.results
            and differentiable(op.results[0].type)]


def norm1(value: Any) -> Any:
    """Σ |element| over a tensor, a tuple's items or a tree's tensors (in the current
    gmpy2 context)."""
    if isinstance(value, Tree):
        return _sum(norm1(array) for _, array in value.items())
    if isinstance(value, tuple):
        return _sum(norm1(v) for v in value)
    return _sum(abs(v) for v in np.asarray(value, dtype=object).reshape(-1))


def _sum(terms) -> Any:
    total = gmpy2.mpfr(0)
    for t in terms:
        total = total + t
    return total


class _Recorder(Interpreter):
    """The interpreter, adding the 1-norm of every marked cotangent to its sites."""

    def setup(self, sites: set[str]) -> None:
        self.totals: dict[str, Any] = {s: gmpy2.mpfr(0) for s in sites}
        self.recorded: set[str] = set()
        self.calls: dict[str, int] = {}

    def _record(self, site: str, value: Any) -> None:
        if site in self.totals:
            self.totals[site] = self.totals[site] + norm1(value)
            self.recorded.add(site)

    def call(self, func: C.FuncOp, args: list[Any], dims: Mapping[str, int] | None = None):
        name = func.sym_name.data
        if name.endswith(".bwd"):
            self.calls[name[:-4]] = self.calls.get(name[:-4], 0) + 1
        for key in ("adjoint_dy", "adjoint_dy_negated"):  # the sites whose cotangent is dy
            marks = func.attributes.get(key)
            if marks is not None:
                for site in marks.data:
                    self._record(site.data, args[1])
        return super().call(func, args, dims)

    def step(self, op: Operation, args: list[Any], dims: Mapping[str, int] | None = None,
             prefix: tuple[int, ...] | None = None) -> Any:
        value = super().step(op, args, dims, prefix)
        for key in ("adjoint", "adjoint_negated"):
            marks = op.attributes.get(key)
            if marks is not None:
                for site in marks.data:
                    self._record(site.data, value)
        return value


MAX_COMPONENTS = 4096  # reverse sweeps for one tensor result


class SensitivityError(Exception):
    """A result whose sensitivities are not defined here (a tuple, too many elements)."""


def sensitivities(module: ModuleOp, entry: str, dims: dict[str, int],
                  params: dict[str, np.ndarray], values: dict[str, np.ndarray],
                  bits: int = 128, remat: str = "store") -> Sensitivities:
    """‖∂L/∂v‖₁ at every site of the functions `entry` reaches, and ‖∂L/∂θ‖₁ per parameter
    path, from reverse sweeps of `entry.value_vjp` in MPFR at `bits`: one with dy = 1 for
    a result of one element; for a tensor result L of m elements, one per element j with
    dy = e_j (1 at j, 0 elsewhere), giving ‖∂L_j/∂v‖₁ (`components`), and as the figure of
    the site the largest over j — what bounds max_j |L̂_j − L_j| to first order through
    each site alone (docs/precision.md). `module` (PSK-Core, not differentiated) is left
    as it is."""
    module = module.clone()
    names = reached(module, entry)
    funcs = _funcs(module)
    functions = {n: [op.site.data for op in site_ops(funcs[n])] for n in names}
    Differentiator(module, remat, all_values=True).run([entry])
    prepared = E.prepare(module, entry, dims)
    try:
        shape = E.result_shape(prepared)
    except E.WeightsError as exc:
        raise SensitivityError(str(exc)) from None
    m = int(np.prod(shape)) if shape else 1
    if m > MAX_COMPONENTS:
        raise SensitivityError(f"`{entry}` returns {m} elements: their sensitivities take one "
                               f"reverse sweep each, at most {MAX_COMPONENTS}")
    numbers = MPFR(bits)
    args = E.arguments(prepared, numbers, params, values)
    sites = {s for ss in functions.values() for s in ss}
    order = [s for ss in functions.values() for s in ss]
    runs = []
    for j in range(m):
        recorder = _Recorder(module, numbers)
        recorder.setup(sites)
        seed = np.zeros(m)
        seed[j] = 1.0
        with numbers.context():
            dy = numbers.constant(1.0) if not shape else numbers.array(seed.reshape(shape))
        value, *grads = recorder.run(entry + ".value_vjp", args + [dy], prepared.dims)
        with numbers.context():
            norms = _param_norms(prepared, grads)
        runs.append(({s: recorder.totals[s] for s in order}, norms, recorder, grads))
    largest = lambda key, which: max((r[which][key] for r in runs), key=float)  # noqa: E731
    last = runs[-1][2]
    return Sensitivities(entry, bits, value, {s: largest(s, 0) for s in order}, functions,
                         {p: largest(p, 1) for p in runs[0][1]},
                         set().union(*(r[2].recorded for r in runs)), last.calls,
                         [{**r[0], **r[1]} for r in runs] if shape else [], shape,
                         E.flatten_gradient(prepared, runs[0][3][0])
                         if not shape and runs[0][3] else {})


def _param_norms(prepared: E.Entry, grads: list[Any]) -> dict[str, Any]:
    """‖∂L/∂θ‖₁ per tensor of each parameter-tree argument, keyed by path (prefixed by the
    argument's name when the entry has more than one tree)."""
    func = prepared.func
    args = [(n, t) for n, t in zip(func.arg_name_list, func.function_type.inputs.data)
            if differentiable(t)]  # the cotangents' order
    trees = [(n, g) for (n, t), g in zip(args, grads) if isinstance(t, C.ParamsAttr)]
    out = {}
    for name, grad in trees:
        assert isinstance(grad, Tree)
        for path, array in grad.items():
            out[path if len(trees) == 1 else f"{name}.{path}"] = norm1(array)
    return out


def _funcs(module: ModuleOp) -> dict[str, C.FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}


def sci(value: Any, digits: int = 4) -> str:
    """`1.4080e1`, `9.8000e-1`: the reference's figures."""
    if not math.isfinite(float(value)):
        return str(float(value))  # nan, inf, -inf
    mantissa, exponent = f"{float(value):.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def ranked(values: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Largest first; values equal in binary64 (the same cotangent read at two sites, or
    two that differ only by MPFR's last roundings) in the order of their names."""
    return sorted(values.items(), key=lambda item: (-float(item[1]), item[0]))


def report(s: Sensitivities, top: int = 30) -> str:
    """§6.2's two tables: the per-function sums, then the `top` sites."""
    width = 49
    if s.shape:
        head = (f"-- sensitivity of `{s.entry}`, a result of shape {list(s.shape)}: "
                f"max over its {len(s.components)} elements j of ‖∂L_j/∂v‖₁ at each site, "
                f"one reverse sweep per element at {s.bits} bits")
    else:
        head = (f"-- sensitivity of `{s.entry}`: ‖∂L/∂v‖₁ at each site, one reverse sweep at "
                f"{s.bits} bits")
    lines = [head, _row("module", "Σ ‖∂L/∂v‖₁", width)]
    lines += [_row(name, sci(v), width) for name, v in ranked(s.per_function())]
    lines += ["", _row("site", "‖∂L/∂v‖₁", width)]
    lines += [_row(site, sci(v), width) for site, v in ranked(s.sites)[:top]]
    return "\n".join(lines)


def _row(left: str, right: str, width: int) -> str:
    return left + " " * max(1, width - len(left) - len(right)) + right
