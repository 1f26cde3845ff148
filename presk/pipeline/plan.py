"""`presk plan`: for each nest of a recorded entry, the point of its layout space the
profile's cost model predicts fastest (presk/transforms/plan_layout.py for the space and
the artifact, presk/analysis/cost_model.py for the prices), and — with `measure` — each
chosen point timed natively beside its prediction.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..analysis.cost_model import Priced, price
from ..analysis.profile import Profile
from .errors import InvalidInput
from .record import kernel_pipeline, load_realization, realization_name


@dataclass
class NestChoice:
    """A nest's priced space, cheapest first, and what the plan records of it."""

    kernel: str
    site: str
    title: str
    operands: tuple[tuple[int, ...], ...]  # inputs, then outputs
    inputs: int  # how many of the operands are inputs
    launches: int
    priced: list[Priced]
    epilogue: bool  # a contraction finishing with its element-wise reader (dot+add, …)
    measured: float | None = None  # seconds a launch of the chosen point, with --measure

    @property
    def chosen(self) -> Priced:
        return self.priced[0]

    def within(self, u: float) -> int:
        """The points the model cannot tell from the best: predicted ≤ best·(1 + u)."""
        best = self.chosen.seconds
        return sum(1 for p in self.priced if p.seconds <= best * (1 + u))

    def shown(self) -> list[tuple[int, Priced]]:
        """The chosen point, its two runners-up and the best split point (rank, point)."""
        rows = list(enumerate(self.priced[:3], 1))
        split = next(((i, p) for i, p in enumerate(self.priced, 1) if p.point.split > 1),
                     None)
        if split is not None and split[0] > 3:
            rows.append(split)
        return rows


@dataclass
class PlanReport:
    plan: object  # presk.transforms.plan_layout.Plan
    nests: list[NestChoice]
    profile: Profile
    workers: int
    workers_from: str
    kernel_module: object = None
    notes: list[str] = field(default_factory=list)

    @property
    def points(self) -> int:
        return sum(len(n.priced) for n in self.nests)


def workers_of(threads: int | None, profile: Profile) -> tuple[int, str]:
    """The workers a split may use: --threads, else PRESK_THREADS, else the profile's."""
    if threads is not None:
        if threads < 1:
            raise InvalidInput(f"presk: --threads is 1 or more, not {threads}")
        return threads, f"--threads {threads}"
    env = os.environ.get("PRESK_THREADS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise InvalidInput(f"presk: PRESK_THREADS is a number of threads ≥ 1, not "
                               f"`{env}`")
        return int(env), f"PRESK_THREADS={env}"
    return profile.machine.workers, "the profile's workers"


def resident_bytes(kernel_module) -> int:
    """The bytes one call of the entry touches: its arguments and its arena."""
    from ..kernel_abi.arena import entry_signatures
    return max((s.call_bytes for s in entry_signatures(kernel_module)), default=0)


def make_plan(core_module, entry: str, dims: dict[str, int], profile: Profile,
              profile_name: str, realization=None, grad: bool = False,
              remat: str = "store", threads: int | None = None) -> PlanReport:
    """Record the entry, price every point of every nest, and take the cheapest."""
    from ..dialects import kernel as K
    from ..transforms.plan_layout import (Plan, PlannedNest, apply_plan, first_sites,
                                          layout_space, operand_sizes)
    workers, source = workers_of(threads, profile)
    from ..emit.kernel_listing import count
    pipe = kernel_pipeline(core_module, entry, dims, realization, grad=grad, remat=remat)
    sites = first_sites(pipe.kernel)
    per_call = count(pipe.kernel).by_kernel
    nests = []
    for k in pipe.kernel.ops:
        if not isinstance(k, K.KernelOp) or k.sym_name.data not in sites:
            continue
        site = sites[k.sym_name.data][0]
        launches = sum(per_call.get(k.sym_name.data, {}).values())
        priced = price(k, layout_space(k, workers), profile.machine, profile.model,
                       resident_bytes(pipe.kernel))
        nests.append(NestChoice(k.sym_name.data, site, k.title.data, operand_sizes(k),
                                len(k.input_args), launches, priced,
                                k.title.data.startswith(("dot+", "contract+"))))
    plan = Plan(entry, dict(dims), grad, pipe.realization_name, workers,
                [PlannedNest(n.kernel, n.site, n.title, n.operands, n.chosen.point,
                             n.launches, n.chosen.seconds) for n in nests], profile_name)
    # the plan's name carries the plan's threading: its kernels at the chosen points
    apply_plan(pipe.kernel, plan)
    plan.realization = realization_name(load_realization(realization), pipe.kernel)
    return PlanReport(plan, nests, profile, workers, source, pipe.kernel)


def measure_plan(report: PlanReport) -> None:
    """Time each nest's chosen point natively, as the calibration times its points
    (`time_points`): `NestChoice.measured`."""
    from ..dialects import kernel as K
    from .profile import time_points
    kernels = {k.sym_name.data: k for k in report.kernel_module.ops
               if isinstance(k, K.KernelOp)}
    variants = []
    for n in report.nests:
        v = kernels[n.kernel].clone()
        v.layout = n.chosen.point.attr()
        variants.append(v)
    repeats = [int(min(32, max(1, 20e-6 / max(n.chosen.seconds, 1e-9)))) for n in report.nests]
    for n, t in zip(report.nests, time_points(variants, repeats)):
        n.measured = t.seconds


def measured_errors(report: PlanReport) -> tuple[float, float, float] | None:
    """(median, 90th percentile) of |predicted − measured| / measured over the measured
    nests, and Spearman's ρ between them."""
    from .profile import errors
    pairs = [(n.chosen.seconds, n.measured) for n in report.nests
             if n.measured is not None and n.measured > 0]
    if not pairs:
        return None
    pred, meas = (np.array(v) for v in zip(*pairs))
    return errors(pred, meas)


# --------------------------------------------------------------------------------------
# A call's predicted time (the solver's cost under a profile)
# --------------------------------------------------------------------------------------


def _moved_elements(op) -> tuple[int, dict[str, int], tuple[int, ...]]:
    """A host convert/copy/fill as a nest: (elements, loads and stores by type, bytes)."""
    from ..dialects import kernel as K
    dest = op.dest.type
    n = dest.size
    loads = {"f64": 0, "f32": 0, "bf16": 0}
    loads[K.type_name(dest.element)] += n
    sizes = [dest.bytes]
    if not isinstance(op, K.FillOp):
        loads[K.type_name(op.source.type.element)] += n
        sizes.append(op.source.type.bytes)
    return n, loads, tuple(sizes)


def host_op_seconds(op, profile: Profile, resident: int = 0) -> float:
    """A host conversion, copy or fill priced as the element-wise nest it is (a load, a
    store and, for a conversion, one op an element), as written."""
    from ..analysis.cost_model import Counts, combine, constants, features, terms
    from ..dialects import kernel as K
    from ..transforms.plan_layout import Point
    n, loads, sizes = _moved_elements(op)
    arith = {"f64": 0.0, "f32": float(n) if isinstance(op, K.ConvertOp) else 0.0}
    counts = Counts(arith, {"f64": 0.0, "f32": 0.0}, 0.0, {k: float(v) for k, v in
                    loads.items()}, sizes, None, n)
    x = features(counts, Point(), profile.machine, resident, profile.model.tile_width)
    return float(combine(terms(x, constants(profile.model)), profile.model.p))


def host_work(kernel_module):
    """Each launch, conversion, copy and fill of one call of the entry, with how many
    times the call runs it (its host's runs times its folds' trips): (op, times)."""
    from ..dialects import kernel as K
    from ..emit.kernel_listing import host_runs

    def block(b, times: int):
        for op in b.ops:
            if isinstance(op, (K.LaunchOp, K.ConvertOp, K.CopyOp, K.FillOp)):
                yield op, times
            elif isinstance(op, K.FoldOp):
                yield from block(op.body.block, times * max(op.upper.data - op.lower.data, 0))

    hosts = K.hosts(kernel_module)
    for name, runs in host_runs(kernel_module).items():
        if runs:
            yield from block(hosts[name].body.block, runs)


def cheapest_points(kernel_module, profile: Profile, workers: int | None = None
                    ) -> dict[str, Priced]:
    """Each kernel's cheapest point of its layout space (the plan's), priced."""
    from ..dialects import kernel as K
    from ..transforms.plan_layout import layout_space
    workers = workers or profile.machine.workers
    resident = resident_bytes(kernel_module)
    return {name: price(k, layout_space(k, workers), profile.machine, profile.model,
                        resident)[0] for name, k in K.kernels(kernel_module).items()}


def planned_threads(kernel_module, profile: Profile, workers: int | None = None) -> int:
    """The most workers a launch divides over when every kernel runs at its cheapest
    point: the threading of the realization's name under the plan the profile makes."""
    from ..dialects import kernel as K
    from ..transforms.kernel_split import split_of
    kernels = K.kernels(kernel_module)
    return max((split_of(kernels[n], p.point.attr())
                for n, p in cheapest_points(kernel_module, profile, workers).items()),
               default=1)


def call_seconds(kernel_module, profile: Profile, workers: int | None = None) -> float:
    """The predicted time of one call of the entry: every launch at its kernel's
    cheapest point (the plan's), and the host's conversions, copies and fills, each times
    the runs of its host."""
    from ..dialects import kernel as K
    best = {n: p.seconds for n, p in cheapest_points(kernel_module, profile, workers).items()}
    resident = resident_bytes(kernel_module)
    return sum(times * (best[op.callee_name] if isinstance(op, K.LaunchOp)
                        else host_op_seconds(op, profile, resident))
               for op, times in host_work(kernel_module))


def host_phases(kernel_module, profile: Profile) -> dict[str, tuple[int, float]]:
    """The host's own work in a call by kind (`conversions`, `copies`, `fills`): how
    many it runs and the model's predicted seconds for them."""
    from ..dialects import kernel as K
    resident = resident_bytes(kernel_module)
    names = {K.ConvertOp: "conversions", K.CopyOp: "copies", K.FillOp: "fills"}
    out = {n: (0, 0.0) for n in names.values()}
    for op, times in host_work(kernel_module):
        if (name := names.get(type(op))) is not None:
            n, t = out[name]
            out[name] = (n + times, t + times * host_op_seconds(op, profile, resident))
    return out


# --------------------------------------------------------------------------------------
# A program's kernels measured (`presk run --measure`)
# --------------------------------------------------------------------------------------


@dataclass
class KernelMeasure:
    kernel: str
    site: str
    launches: int  # a call's launches
    predicted: float  # seconds a launch at its layout
    measured: float
    bare_call: float  # seconds of the timing harness's bare call (one one-element launch)


def measure_kernels(kernel_module, profile: Profile) -> list[KernelMeasure]:
    """Each kernel of the module, at the layout it has, predicted by the profile and
    timed natively as the calibration times its points (`time_points`)."""
    from ..dialects import kernel as K
    from ..emit.kernel_listing import count
    from ..transforms.plan_layout import Point, first_sites
    from .profile import time_points
    sites = first_sites(kernel_module)
    per_call = count(kernel_module).by_kernel
    resident = resident_bytes(kernel_module)
    kernels = [k for k in kernel_module.ops if isinstance(k, K.KernelOp)
               and k.sym_name.data in sites and k.parts is None]
    predicted = [price(k, [Point.of(k.layout)], profile.machine, profile.model,
                       resident)[0].seconds for k in kernels]
    repeats = [int(min(32, max(1, 20e-6 / max(p, 1e-9)))) for p in predicted]
    times = time_points(kernels, repeats)
    return [KernelMeasure(k.sym_name.data, sites[k.sym_name.data][0],
                          sum(per_call.get(k.sym_name.data, {}).values()), p, t.seconds,
                          t.base)
            for k, p, t in zip(kernels, predicted, times)]
