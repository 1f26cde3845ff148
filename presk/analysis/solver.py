"""The solver (reference §6.3): the cheapest type for every stored value of an entry under
a budget relative to its output, checked against the exact reference.

- **Candidates.** Every value the recording stores under all-f64 at the entry's dims: the
  site of each launch of the kernel module (a contraction and its epilogue are two), and
  each filled constant. A fused group's members other than its root are *followers*: they
  are rounded where the root computes (`site_types` of convert-psk-core-to-realize decides
  their type) and have no decision of their own. A call's or fold's result, a tuple's item
  or a parameter tree are *carried*: another site's value, no cost, and no term unless a
  reader converts it into a narrower type (below). Every
  parameter path is a decision too.
- **Rules.** A value of one element is not offered (rule 1); a value whose first
  narrowing (f64 → f32) saves less than θ = 1e-3 of the entry's all-f64 cost is not offered
  (rule 2). Its first narrowing is the value alone, or its launch (a contraction and its
  epilogue: their saving shared), or — with a cost that prices the host's conversions —
  the smallest joint move that holds it (below), whichever saves most.
- **Cost.** `CostModel.cost(realization) -> float`. `TrafficCost`: bytes per call of the
  entry, every launch's buffers (read and written), every fill's destination, times the
  runs of its host, counted on the kernel module the pipeline builds under the realization (the host's conversions are not
  launches and are not counted: a narrowed value read by a wider kernel is charged at the
  kernel's type). `TimeCost` (`presk solve --profile P`): the seconds a call takes as
  the profile's cost model predicts them, every launch at its planned point and the
  host's conversions, copies and fills included — so a parameter converted on every call
  is worth narrowing where its readers compute.
- **Joint moves** (a cost that prices conversions: `TimeCost`, `TrafficCost(...,
  conversions=True)`). Narrowing a value alone makes the host convert it for each reader
  still wider (a narrowed weight widened on every call for its f64 sites), and narrowing
  a reader alone makes the host convert what it reads: a first narrowing then prices as a
  loss while the weight and its readers narrowed together save (the residual stack of
  test/fixtures/residual_stack.psk). A decision's joint group is it, its launch's
  partners, and the decisions of its type at the other end of each conversion its move
  alone adds (presk/analysis/conversions.py `converted_reads`: a follower by its group's
  root, a call's result by the value its callee returns, an input by the site that
  unpacks it); the smallest joint move that holds it grows that group from every member
  until narrowing the whole adds no such conversion. The greedy offers, beside each
  decision alone and each launch, the joint group of each decision whose move alone saves
  nothing. The default bytes cost prices no conversion and offers no joint move.
- **Estimate.** Σ s · r(type) over the decisions and the followers, s = ‖∂L/∂v‖₁ (MPFR
  reverse sweeps; for a tensor result the largest over its elements) and r the envelope's
  largest rounding error of the site's values in the type (0 for f64; u(type) · max|v|
  when the envelope has no rounding for it). A value the recording reads through a
  narrowing convert (presk/analysis/conversions.py: an f64 call result read by an f32
  op, an input read in f32) is charged at the narrowest type it is read in — a decision
  or a carried value alike ("carried, read in f32 by <reader>"), and that term counts in
  its reader's share when the measurement makes the solver widen.
- **Greedy.** Moves f64 → f32 and f32 → bf16 (bf16 is stored, computed in f32) of a
  decision, a launch or a joint group, the best saving per unit of estimate added first (a
  move adding nothing first of all), taken while the estimate stays under the absolute
  budget (budget · |L|, L measured in MPFR) and the move saves something. A lazy greedy:
  a move's saving is recomputed at the current realization before it is taken.
- **Measure.** The kernel interpreter under the candidate against the MPFR value; while
  the error exceeds the absolute budget, the decision with the largest share of the
  estimate is widened by one type.
- **Relaxation floor.** Every offered decision at the narrowest type its own term allows
  under the whole budget, taken alone: the cost of that realization. No feasible
  realization narrows a value further than its own term allows, so when narrowing never
  adds traffic (no conversion outweighs what it saves) no feasible realization costs less.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .realization import Realization

THETA = 1e-3
NARROWER = {"f64": "f32", "f32": "bf16"}
WIDER = {"bf16": "f32", "f32": "f64"}
UNIT_ROUNDOFF = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "bf16": 2.0 ** -8}


class SolveError(Exception):
    """A budget or an input the solver cannot use: one line for the user."""


# ---- the cost ----

class CostModel(Protocol):
    """`unit` names what `cost` counts; a model may say by `conversions = True` that it
    prices the host's conversions (the solver then offers joint moves)."""

    unit: str

    def cost(self, realization: Realization) -> float: ...


def traffic(kernel_module, conversions: bool = False) -> float:
    """Bytes read and written per call of the entry by the launches (each kernel's
    buffers, in their types) and fills; the host's conversions and copies only when
    `conversions` (they are not launches: a reader's conversion is charged to its kernel's
    arguments in the converted type)."""
    from ..dialects import kernel as K
    from ..emit.kernel_listing import host_runs
    kernels = K.kernels(kernel_module)
    total = 0
    for name, runs in host_runs(kernel_module).items():
        if not runs:
            continue
        host = K.hosts(kernel_module)[name]
        total += _block_traffic(host.body.block, runs, kernels, K, conversions)
    return float(total)


def _block_traffic(block, times: int, kernels, K, conversions: bool) -> int:
    total = 0
    for op in block.ops:
        if isinstance(op, K.LaunchOp):
            total += times * sum(t.bytes for t in kernels[op.callee_name].arg_types)
        elif conversions and isinstance(op, (K.ConvertOp, K.CopyOp)):
            total += times * (op.source.type.bytes + op.dest.type.bytes)
        elif isinstance(op, K.FillOp):
            total += times * op.dest.type.bytes
        elif isinstance(op, K.FoldOp):
            total += _block_traffic(op.body.block, times * max(op.upper.data - op.lower.data, 0),
                                    kernels, K, conversions)
    return total


class Recordings:
    """The entry recorded down to PSK-Kernel under each realization the solver tries, once
    each (the cost and the estimate read the same recording). The first recording is
    verified, the others not (`unverified`: they differ from it in types only, and are
    priced and read, never run)."""

    def __init__(self, core_module, entry: str, dims: dict[str, int]):
        self.core, self.entry, self.dims = core_module, entry, dict(dims)
        self._cache: dict[tuple, Any] = {}

    def __len__(self) -> int:
        return len(self._cache)

    def get(self, realization: Realization):
        key = _key(realization)
        if key not in self._cache:
            from ..dialects.common import unverified
            from ..pipeline import kernel_pipeline
            with unverified() if self._cache else nullcontext():
                self._cache[key] = kernel_pipeline(self.core, self.entry, self.dims,
                                                   realization)
        return self._cache[key]


class _RecordedCost(ABC):
    """A cost read from the kernel module under the realization, cached by realization;
    `_price(kernel_module)` is the kind's."""

    unit = ""

    def __init__(self, core_module, entry: str, dims: dict[str, int],
                 recordings: Recordings | None = None):
        self.recordings = recordings or Recordings(core_module, entry, dims)
        self._cache: dict[tuple, float] = {}

    @property
    def pipelines(self) -> int:
        return len(self.recordings)

    def cost(self, realization: Realization) -> float:
        key = _key(realization)
        if key not in self._cache:
            self._cache[key] = self._price(self.recordings.get(realization).kernel)
        return self._cache[key]

    @abstractmethod
    def _price(self, kernel_module) -> float:
        """The cost of one call under the kernel module a realization recorded."""

    def threads(self, realization: Realization) -> int:
        """The most workers a launch divides over as the cost runs the realization (its
        name's threading): the kernels at their default layouts."""
        from ..transforms.kernel_split import threads_of
        return threads_of(self.recordings.get(realization).kernel)


class TrafficCost(_RecordedCost):
    """Bytes of traffic per call of the entry, from the kernel module under the
    realization (cached by realization)."""

    unit = "bytes"

    def __init__(self, core_module, entry: str, dims: dict[str, int],
                 conversions: bool = False, recordings: Recordings | None = None):
        super().__init__(core_module, entry, dims, recordings)
        self.conversions = conversions

    def _price(self, kernel_module) -> float:
        return traffic(kernel_module, self.conversions)


class TimeCost(_RecordedCost):
    """Seconds per call of the entry, predicted by a machine profile: each launch at its
    nest's planned (cheapest) point and the host's conversions, copies and fills, from
    the kernel module under the realization (presk/pipeline/plan.py `call_seconds`)."""

    unit = "s"
    conversions = True

    def __init__(self, core_module, entry: str, dims: dict[str, int], profile,
                 recordings: Recordings | None = None, workers: int | None = None):
        super().__init__(core_module, entry, dims, recordings)
        self.profile, self.workers = profile, workers

    def _price(self, kernel_module) -> float:
        from ..pipeline.plan import call_seconds
        return call_seconds(kernel_module, self.profile, self.workers)

    def threads(self, realization: Realization) -> int:
        """At the plan the profile makes: every kernel at its cheapest point."""
        from ..pipeline.plan import planned_threads
        return planned_threads(self.recordings.get(realization).kernel, self.profile,
                               self.workers)


def _recordings(model, core_module, entry: str, dims: dict[str, int]) -> Recordings:
    """The recordings of a cost model passed in when they are of this entry at these dims,
    else new ones: the estimate's reads and the cost then record each realization once
    between them (and across the solves that share the model), not once each."""
    rec = getattr(model, "recordings", None)
    if isinstance(rec, Recordings) and rec.core is core_module and rec.entry == entry \
            and rec.dims == dims:
        return rec
    return Recordings(core_module, entry, dims)


def conversion_links(realize_module, paths: set[str], inputs: dict[str, str],
                     roots: dict[str, str]) -> set[tuple[str, str]]:
    """(reader, value) of every conversion a recording reads a value through, narrowing
    or widening, each by the decision it is: a fused follower by its group's root
    (`roots`), a call's result by the value its callee returns, an input by the site that
    unpacks it (`inputs`; `paths`: the entry's parameter paths); a value not traced is
    left out."""
    from .conversions import converted_reads
    return {(roots.get(r.reader, r.reader), inputs.get(r.value, r.value))
            for r in converted_reads(realize_module, paths, results=True) if r.kind}


def _key(r: Realization) -> tuple:
    return (tuple(sorted((k, v) for k, v in r.sites.items() if v != "f64")),
            tuple(sorted((k, v) for k, v in r.params.items() if v != "f64")), tuple(r.fma))


# ---- what the solver decides ----

@dataclass
class Decision:
    key: str  # a site or a parameter path
    kind: str  # "site" or "param"
    op: str  # the operation's text, or "a parameter, by its path"
    elements: int
    max_abs: float
    s: float  # ‖∂L/∂v‖₁
    rounding: dict[str, float]  # type → r
    type: str = "f64"
    offered: bool = True
    rule: int | None = None  # 1 or 2 when not offered
    first_saving: float = 0.0  # what its first narrowing (f64 → f32) saves: rule 2
    read: str | None = None  # the narrowest type a reader converts it into, if narrower

    def term(self, t: str | None = None) -> float:
        """s·r at its type, or at the narrower type a reader converts it into."""
        t = t or self.type
        return self.s * self.rounding[narrower(t, self.read) if t == self.type else t]


def narrower(a: str, b: str | None) -> str:
    order = {"bf16": 0, "f32": 1, "f64": 2}
    return a if b is None or order[a] <= order[b] else b


@dataclass
class Move:
    number: int
    key: str
    frm: str
    to: str
    saved: float
    added: float
    estimate: float  # after it


@dataclass
class Other:
    """A follower (rounded where its leader computes) or a carried value."""

    site: str
    op: str
    role: str  # "follows <site>", "carried" or "carried, read in <type> by <site>"
    type: str
    max_abs: float
    s: float
    term: float


@dataclass
class Solution:
    entry: str
    dims: dict[str, int]
    budget: float  # relative
    magnitude: float  # |L|
    absolute: float  # budget · |L|
    decisions: list[Decision]
    others: list[Other]
    moves: list[Move]
    cost: float
    cost_f64: float
    proposal: float  # the cost before any widening
    floor: float
    estimate: float
    measured: float
    widenings: list[tuple[str, str, str]]  # (key, from, to)
    f64_measured: float
    unit: str
    realization: Realization
    stored: int = 0  # stored values (decisions that are sites)
    name: str = ""  # the realization's name with its threading as the cost runs it
    reverse: Any = None  # with `grad`: the reverse sweep's choice (reverse_sweep.py)

    @property
    def inside(self) -> bool:
        return self.measured <= self.absolute

    def terms(self) -> dict[str, float]:
        out = {d.key: d.term() for d in self.decisions}
        out.update({o.site: o.term for o in self.others})
        return out


@contextmanager
def narrowed(group: list[Decision]) -> Iterator[None]:
    """Each decision of `group` one type narrower, for the `with` block's reads."""
    old = [d.type for d in group]
    for d in group:
        d.type = NARROWER[d.type]
    try:
        yield
    finally:
        for d, t in zip(group, old):
            d.type = t


class JointMoves:
    """The joint moves of a cost that prices the host's conversions (the module
    docstring): a decision with the decisions at the other end of each conversion its
    move alone adds. `realization()` is the decisions' current one; `conversions(r)` the
    (reader, value) pairs a realization converts (`conversion_links`), read once each."""

    def __init__(self, decisions: list[Decision], partners: dict[str, list[str]],
                 realization: Callable[[], Realization],
                 conversions: Callable[[Realization], set[tuple[str, str]]]):
        self.decisions, self.partners = decisions, partners
        self.realization, self._conversions = realization, conversions
        self._links: dict[tuple, set[tuple[str, str]]] = {}

    def conversions(self, real: Realization) -> set[tuple[str, str]]:
        key = _key(real)
        if key not in self._links:
            self._links[key] = self._conversions(real)
        return self._links[key]

    def group(self, d: Decision, member: Callable[[Decision], bool],
              whole: bool = False) -> list[Decision]:
        """`d`, its launch's partners, and the decisions at the other end of each
        conversion narrowing `d` alone adds (the readers a narrowed value is widened for,
        the values a narrowed reader converts), those of `d`'s type that `member` accepts:
        narrowed together, they convert none of them. `whole`: grown the same way from
        every member until narrowing the group adds no such conversion (the smallest
        joint move that holds `d`)."""
        group, before = [d], self.conversions(self.realization())
        while True:
            keys = {g.key for g in group}
            with narrowed(group):
                added = self.conversions(self.realization()) - before
            ends = {r if v in keys else v for r, v in added if (r in keys) != (v in keys)}
            ends.update(p for g in group for p in self.partners.get(g.key, ()))
            more = [e for e in self.decisions if e.key in ends and e.key not in keys
                    and e.type == d.type and member(e)]
            group += more
            if not (whole and more):
                return group

    def groups(self, losing: list[Decision],
               tried: list[list[Decision]]) -> list[list[Decision]]:
        """The joint group of each of `losing` (decisions whose move alone saves nothing:
        a move that saves alone is its own way in), each once and none already `tried`."""
        known = {frozenset(g.key for g in group) for group in tried}
        out = []
        for d in losing:
            group = self.group(d, lambda e: e.offered)
            if frozenset(g.key for g in group) not in known:
                known.add(frozenset(g.key for g in group))
                out.append(group)
        return out

    def judge(self, model: CostModel, least: float) -> None:
        """Rule 2 on joint moves, at all-f64: raise each decision's `first_saving` below
        `least` to the most a joint move that holds it saves — the smallest one (grown
        from it), or one grown from another decision already. A decision in a move that
        saves `least` is offered whichever it is, so its own is not grown."""
        cost_f64 = model.cost(self.realization())
        best: dict[str, float] = {}
        for d in self.decisions:
            if d.rule == 1 or max(d.first_saving, best.get(d.key, -math.inf)) >= least:
                continue
            group = self.group(d, lambda e: e.rule != 1, whole=True)
            with narrowed(group):
                saving = cost_f64 - model.cost(self.realization())
            for g in group:
                best[g.key] = max(best.get(g.key, -math.inf), saving)
        for d in self.decisions:
            d.first_saving = max(d.first_saving, best.get(d.key, -math.inf))


# ---- the analysis of the entry ----

def _rounding(record, max_abs: float) -> dict[str, float]:
    out = {"f64": 0.0}
    for t in ("f32", "bf16"):
        r = None
        if record is not None and t in record.rounding:
            r = record.rounding[t].max_error
        out[t] = float(r) if r is not None else UNIT_ROUNDOFF[t] * max_abs
    return out


def _core_ops(core_module, names) -> dict[str, Any]:
    from ..dialects import core as C
    out = {}
    for f in core_module.ops:
        if isinstance(f, C.FuncOp) and f.sym_name.data in names:
            for op in f.body.block.ops:
                if not isinstance(op, C.ReturnOp) and "site" in op.attributes:
                    out[op.site.data] = op
    return out


def _op_text(op) -> str:
    from ..emit.core_listing import format_op
    text = format_op(op)
    return text.split(" = ", 1)[1] if " = " in text else text


def stored_values(kernel_module) -> tuple[dict[str, int], dict[str, str]]:
    """The values a kernel module stores (site → elements of one value) and the fused
    followers (member site → its group's root). A contraction and its epilogue, one
    launch, are two stored values (`launch_partners` pairs them)."""
    from ..dialects import kernel as K
    kernels = K.kernels(kernel_module)
    stored: dict[str, int] = {}
    followers: dict[str, str] = {}
    for op in kernel_module.walk():
        if isinstance(op, K.LaunchOp):
            outs = kernels[op.callee_name].arg_types[-kernels[op.callee_name].output_count:]
            size = outs[0].size if outs else 1
            root = op.site.data
            if op.fused is not None:
                for s in op.store_sites:  # (two with psk-kernel-fuse-siblings' stores)
                    stored.setdefault(s, size)
                for s in op.site_list:
                    if s not in op.store_sites:
                        followers[s] = root
            else:
                for s in op.site_list:
                    stored.setdefault(s, size)
        elif isinstance(op, K.FillOp) and op.site is not None:
            stored.setdefault(op.site.data, op.dest.type.size)
    return stored, followers


def launch_partners(kernel_module) -> dict[str, list[str]]:
    """Sites computed by one launch that is not a fusion group (a contraction and its
    epilogue): each → the others."""
    from ..dialects import kernel as K
    out: dict[str, list[str]] = {}
    for op in kernel_module.walk():
        if isinstance(op, K.LaunchOp) and op.fused is None and len(op.site_list) > 1:
            for s in op.site_list:
                out[s] = [t for t in op.site_list if t != s]
    return out


def measure_error(result: dict[str, np.ndarray], exact: Any) -> float:
    """The largest |kernel − MPFR| over the result's elements, computed in MPFR."""
    return max(element_errors(result, exact), default=0.0)


def element_errors(result: dict[str, np.ndarray], exact: Any) -> list[float]:
    """|kernel − MPFR| of every element of the result (its tensors in order, each
    row-major), computed in MPFR; a NaN computed is an infinite error."""
    import gmpy2
    from .entry import flatten_result
    ref = flatten_result(exact)
    out: list[float] = []
    with gmpy2.context(precision=256):
        for path, value in result.items():
            e = np.asarray(ref[path], dtype=object).reshape(-1)
            k = np.asarray(value, dtype=np.float64).reshape(-1)
            out += [math.inf if math.isnan(a) else float(abs(gmpy2.mpfr(float(a)) - b))
                    for a, b in zip(k, e)]
    return out


def _magnitude(exact: Any) -> float:
    from .entry import flatten_result
    m = 0.0
    for v in flatten_result(exact).values():
        for x in np.asarray(v, dtype=object).reshape(-1):
            m = max(m, abs(float(x)))
    return m


def read_types(realize_module, paths: set[str], inputs: dict[str, str],
               known) -> dict[str, tuple[str, str]]:
    """Each value the recording reads narrower than it stores it (a site or a parameter
    path; an input by the site that unpacks it, `inputs`) → the narrowest type it is read
    in and the first reader reading it so. A value `known` does not accept (no site the
    sensitivities know) is charged at its reader instead."""
    from .conversions import narrowing_reads
    out: dict[str, tuple[str, str]] = {}
    for r in narrowing_reads(realize_module, paths):
        key = inputs.get(r.value, r.value) if r.kind else ""
        key = key if known(key) else r.reader
        if key not in out or narrower(r.to, out[key][0]) != out[key][0]:
            out[key] = (r.to, r.reader)
    return out


# ---- the solver ----

def solve(core_module, entry: str, dims: dict[str, int], envelope, budget: float,
          params: dict[str, np.ndarray] | None = None, values: dict[str, np.ndarray] | None = None,
          seed: int = 0, bits: int = 128, cost_model: CostModel | None = None,
          theta: float = THETA, max_rounds: int = 64, profile=None,
          fma: bool = False, grad: bool = False) -> Solution:
    from ..pipeline import run_kernel
    from ..conversion.core_to_realize import site_types
    from ..dialects import core as C
    from . import entry as E
    from .conversions import input_sites
    from .sensitivity import contraction_sites, reached, sensitivities

    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise SolveError(f"--budget {budget}: a positive number, relative to the output")
    prepared = E.prepare(core_module, entry, dict(dims))
    dims = dict(prepared.dims)
    if params is None:
        params = E.weights(prepared, seed, None)
    if values is None:
        values = E.inputs(prepared, seed, None)
    sens = sensitivities(core_module, entry, dims, params, values, bits)
    if grad and not sens.gradient:
        raise SolveError(f"--grad: `{entry}` has no gradient in a parameter tree to measure "
                         "(its result is one element and its first argument the parameters)")
    magnitude = _magnitude(sens.value)
    absolute = budget * magnitude
    recordings = _recordings(cost_model, core_module, entry, dims)
    if cost_model is None and profile is not None:
        cost_model = TimeCost(core_module, entry, dims, profile, recordings)
    model = cost_model or TrafficCost(core_module, entry, dims, recordings=recordings)

    names = reached(core_module, entry)
    # `fma`: every candidate fuses the entry's contractions (measured and priced so)
    fused = tuple(contraction_sites(core_module, entry)) if fma else ()
    ops = _core_ops(core_module, names)
    base = recordings.get(Realization(entry=entry))
    stored, followers = stored_values(base.kernel)
    partners = launch_partners(base.kernel)

    # the decisions: stored sites in the functions' order, then the parameters
    order = [s for n in names for s in sens.functions.get(n, [])]
    order += [s for s in stored if s not in order]
    decisions: list[Decision] = []
    for site in order:
        if site not in stored:
            continue
        rec = envelope.sites.get(site)
        m = float(rec.max_abs) if rec is not None else 0.0
        decisions.append(Decision(site, "site", _op_text(ops[site]) if site in ops else "",
                                  stored[site], m, float(sens.sites.get(site, 0.0)),
                                  _rounding(rec, m)))
    for path in (f.path for f in prepared.fields):
        rec = envelope.params.get(path)
        m = float(rec.max_abs) if rec is not None else float(np.max(np.abs(params[path])))
        decisions.append(Decision(path, "param", "a parameter, by its path",
                                  int(np.size(params[path])), m,
                                  float(sens.params.get(path, 0.0)), _rounding(rec, m)))
    by_key = {d.key: d for d in decisions}

    def realization() -> Realization:
        return Realization(entry=entry,
                           sites={d.key: d.type for d in decisions
                                  if d.kind == "site" and d.type != "f64"},
                           params={d.key: d.type for d in decisions
                                   if d.kind == "param" and d.type != "f64"}, fma=fused)

    def with_type(d: Decision, t: str) -> Realization:
        old, d.type = d.type, t
        try:
            return realization()
        finally:
            d.type = old

    funcs = {f.sym_name.data: f for f in core_module.ops if isinstance(f, C.FuncOp)}
    paths = {f.path for f in prepared.fields}
    inputs = input_sites(core_module, entry)

    def reads(real: Realization) -> dict[str, tuple[str, str]]:
        return read_types(recordings.get(real).realize, paths, inputs,
                          lambda key: key in by_key or key in sens.sites)

    def follower_terms() -> list[Other]:
        real = realization()
        read = reads(real)
        for d in decisions:  # a decision read narrower is charged at that type
            d.read = read[d.key][0] if d.key in read else None
        types: dict[str, str] = {}
        for n in names:
            types.update(site_types(funcs[n], real))
        out = []
        for site in order:
            if site in by_key:
                continue
            rec = envelope.sites.get(site)
            m = float(rec.max_abs) if rec is not None else 0.0
            s = float(sens.sites.get(site, 0.0))
            text = _op_text(ops[site]) if site in ops else ""
            if site in followers:
                t = types.get(site, "f64")
                out.append(Other(site, text, f"follows {followers[site]}", t, m, s,
                                 s * _rounding(rec, m)[t]))
            elif site in read:
                t, reader = read[site]
                out.append(Other(site, text, f"carried, read in {t} by {reader}", t, m, s,
                                 s * _rounding(rec, m)[t]))
            elif site in sens.sites:
                out.append(Other(site, text, "carried", "f64", m, s, 0.0))
        return out

    def estimate() -> float:
        others = follower_terms()  # first: it sets what each decision is read in
        return math.fsum([d.term() for d in decisions] + [o.term for o in others])

    cost_f64 = model.cost(realization())

    # rules 1 and 2
    for d in decisions:
        if d.elements <= 1:
            d.offered, d.rule = False, 1
    for d in decisions:
        if d.rule == 1:
            continue
        d.first_saving = cost_f64 - model.cost(with_type(d, "f32"))
        if d.first_saving <= 0 and d.key in partners:  # the launch narrows as a whole
            together = with_type(d, "f32")
            together.sites.update({p: "f32" for p in partners[d.key]})
            d.first_saving = (cost_f64 - model.cost(together)) / (1 + len(partners[d.key]))
    # a cost that prices the host's conversions makes a narrowing alone pay for converting
    # what it reads or what reads it: its moves may be joint (JointMoves)
    joint: JointMoves | None = None
    if getattr(model, "conversions", False):
        joint = JointMoves(decisions, partners, realization,
                           lambda real: conversion_links(recordings.get(real).realize, paths,
                                                         inputs, followers))
        joint.judge(model, theta * cost_f64)
    for d in decisions:
        if d.rule != 1 and d.first_saving < theta * cost_f64:
            d.offered, d.rule = False, 2

    # the greedy (lazy: a move's saving is recomputed before it is taken)
    moves: list[Move] = []
    current_est = estimate()
    current_cost = cost_f64

    def evaluate(group: list[Decision]) -> tuple[float, float, float] | None:
        if any(not d.offered or d.type not in NARROWER for d in group):
            return None
        with narrowed(group):
            est = estimate()
            c = model.cost(realization())
        return current_cost - c, est - current_est, est

    def groups() -> list[list[Decision]]:
        """Each decision alone, and a launch's sites together when of one type."""
        out = [[d] for d in decisions]
        seen = set()
        for d in decisions:
            if d.key in partners and d.key not in seen:
                group = [d] + [by_key[p] for p in partners[d.key] if p in by_key]
                seen.update(g.key for g in group)
                if len({g.type for g in group}) == 1 and len(group) > 1:
                    out.append(group)
        return out

    def ratio(saved: float, added: float) -> float:
        return math.inf if added <= 0 else saved / added

    def score(candidates: list[list[Decision]]) -> tuple[list[tuple], list[Decision]]:
        """Each candidate move that saves and keeps the estimate under the budget, scored;
        and the decisions whose move alone saves nothing."""
        scored, losing = [], []
        for group in candidates:
            r = evaluate(group)
            if r is None:
                continue
            saved, added, est = r
            if saved <= 0 and len(group) == 1:
                losing.append(group[0])
            if saved > 0 and est <= absolute:
                scored.append((ratio(saved, added), saved, len(group),
                               " + ".join(g.key for g in group), added, est, group))
        return scored, losing

    while True:
        candidates = groups()
        scored, losing = score(candidates)
        if joint is not None:
            scored += score(joint.groups(losing, candidates))[0]
        if not scored:
            break
        scored.sort(key=lambda x: (-x[0], -x[1], x[2], x[3]))
        _, saved, _, key, added, est, group = scored[0]
        frm = group[0].type
        for d in group:
            d.type = NARROWER[d.type]
        current_cost = model.cost(realization())
        current_est = est
        moves.append(Move(len(moves) + 1, key, frm, group[0].type, saved, added, est))

    proposal = current_cost

    # measure, and widen the largest share while the measurement misses
    def measure(real: Realization) -> float:
        run = run_kernel(core_module, entry, dims, params, values, real)
        return measure_error(run.result, sens.value)

    f64_measured = measure(Realization(entry=entry, fma=fused))
    measured = measure(realization()) if moves else f64_measured
    widenings: list[tuple[str, str, str]] = []
    while measured > absolute and len(widenings) < max_rounds:
        below_f64 = [d for d in decisions if d.type != "f64"]
        if not below_f64:
            break
        terms = {o.site: o for o in follower_terms()}
        # a decision's share: its term, its followers' and those of the values it reads
        # narrower (widening it reads them as they are)
        def share(d: Decision) -> float:
            return d.term() + sum(o.term for o in terms.values()
                                  if o.role in (f"follows {d.key}", f"carried, read in "
                                                f"{o.type} by {d.key}"))
        d = max(below_f64, key=lambda d: (share(d), d.key))
        frm, d.type = d.type, WIDER[d.type]
        widenings.append((d.key, frm, d.type))
        measured = measure(realization())

    final = realization()
    cost = model.cost(final)

    # the relaxation floor: each offered decision at its narrowest type allowed alone
    saved_types = {d.key: d.type for d in decisions}
    for d in decisions:
        d.type = "f64"
        if d.offered:
            for t in ("f32", "bf16"):
                if d.s * d.rounding[t] <= absolute:
                    d.type = t
                else:
                    break
    floor = min(model.cost(realization()), cost)
    for d in decisions:
        d.type = saved_types[d.key]

    others = follower_terms()
    reverse = None
    if grad:  # the reverse sweep: narrowed where the measured gradient allows
        from .reverse_sweep import solve_reverse
        final, reverse = solve_reverse(core_module, entry, dims, final, sens.gradient,
                                       budget, params, values, fma)
    if isinstance(model, _RecordedCost):
        name = final.summary(model.threads(final))
    else:  # a cost of the caller's: the kernels at their default layouts
        from ..pipeline.record import realization_name
        name = realization_name(final, recordings.get(final).kernel)
    return Solution(entry, dims, budget, magnitude, absolute, decisions, others, moves, cost,
                    cost_f64, proposal, floor, estimate(), measured, widenings, f64_measured,
                    getattr(model, "unit", "bytes"), final,
                    stored=sum(1 for d in decisions if d.kind == "site"), name=name,
                    reverse=reverse)


def write_realization(solution: Solution, path: str) -> None:
    """`presk-realization/1`, atomically (a temporary file, then a rename)."""
    from .realization import save_realization
    save_realization(solution.realization, path)
    assert os.path.exists(path)
