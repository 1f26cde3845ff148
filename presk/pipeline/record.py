"""Recording an entry: PSK-Core → (psk-differentiate) → convert-psk-core-to-realize → psk-fuse
→ convert-psk-realize-to-kernel, the registered passes run in this order on a copy of the
Core module — `recording_passes` is the one list, which `presk --print-pipeline` prints
and `presk-opt -p` runs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..gc_pause import paused
from .errors import InvalidInput, InvalidProgram
from .passes import make_pass, run_passes

if TYPE_CHECKING:
    from xdsl.passes import ModulePass

    from ..analysis.realization import Realization

FUSE_LIMIT = 8  # psk-fuse's default: at most this many steps a group


@dataclass
class Pipeline:
    realize: Any  # the PSK-Realize module (fused unless fuse=False)
    kernel: Any  # the PSK-Kernel module
    realization_name: str  # `all-f64+sequential`, `f64+sequential+9sites+4params`


def realization_name(real: Realization, kernel_module) -> str:
    """The realization's name as its kernels run: its types and its threading
    (`f64+sequential+9sites+4params`; `f64+2threads+…` when a launch of the module, at the
    layouts it has — the defaults or a plan's — divides over two workers). The one name
    `presk dump --stage kernel`, run, export, memory, plan and solve print."""
    from ..transforms.kernel_split import threads_of
    return real.summary(threads_of(kernel_module))


def load_realization(spec) -> Realization:
    """A Realization from None (all f64), a path, `@path`, inline JSON, or a Realization."""
    from ..analysis.realization import Realization, RealizationError
    from ..analysis.realization import load_realization as load
    if spec is None or isinstance(spec, Realization):
        return spec or Realization()
    try:
        return load(spec)
    except RealizationError as exc:
        raise InvalidInput(f"presk: {exc}") from None


def differentiate(module, entries: list[str], remat: str) -> None:
    """Replace every grad, and differentiate `entries`: psk-differentiate, in place."""
    from ..transforms.differentiate import DifferentiationError
    try:
        run_passes(module, differentiate_passes(entries, remat))
    except DifferentiationError as exc:
        raise InvalidProgram(f"presk: error: {exc}") from None


def differentiate_passes(entries: list[str], remat: str = "store",
                         all_values: bool = False) -> list[ModulePass]:
    """psk-differentiate: every grad replaced, and `entries` differentiated (none: only
    the grads); `all_values`: every value's cotangent (the sensitivity analysis's sweep)."""
    return [make_pass("psk-differentiate", remat=remat, entries=",".join(entries),
                      all_values=all_values)]


def recording_passes(entry: str, dims: dict[str, int], realization=None, fuse: bool = True,
                     grad: bool = False, remat: str = "store",
                     fuse_limit: int = FUSE_LIMIT,
                     fuse_reductions: bool = False) -> list[ModulePass]:
    """The passes from PSK-Core to the entry's fused PSK-Realize: with `grad`,
    psk-differentiate first and the value and gradient recorded. `realization`: None, a
    path, `@path`, inline JSON, or a Realization (given to the pass as its JSON).
    `fuse_reductions`: psk-inline before psk-fuse (every call's callee inlined, so fusion
    crosses calls: a residual add, an activation join the product's epilogue) and
    psk-fuse-reduce after it (a reduction with its element-wise producer and consumers in
    one nest); off by default: the reference's launch counts are those of element-wise
    fusion."""
    from ..analysis.realization import Realization
    spec = json.dumps(realization.to_json()) if isinstance(realization, Realization) \
        else realization
    passes = differentiate_passes([entry], remat) if grad else []
    passes.append(make_pass("convert-psk-core-to-realize", entry=entry, realize=spec,
                            dims=" ".join(f"{k}={v}" for k, v in dims.items()), grad=grad))
    if grad:  # a fold's loop stacks each step's results; those nothing reads go
        passes.append(make_pass("psk-realize-drop-unread"))
    if fuse:
        if fuse_reductions:  # fusion across calls: the callees' ops inlined first
            passes.append(make_pass("psk-inline"))
        passes.append(make_pass("psk-fuse", limit=fuse_limit))
        if fuse_reductions:
            passes.append(make_pass("psk-fuse-reduce"))
    return passes


def kernel_passes(entry: str, dims: dict[str, int], realization=None, fuse: bool = True,
                  grad: bool = False, remat: str = "store",
                  plan: str | None = None, fuse_reductions: bool = False) -> list[ModulePass]:
    """The recording passes, then convert-psk-realize-to-kernel and psk-kernel-dedup
    (fused, psk-kernel-fuse-siblings; psk-plan-layout when a plan, `@path`, is given)."""
    passes = [*recording_passes(entry, dims, realization, fuse, grad, remat,
                                fuse_reductions=fuse_reductions),
              make_pass("convert-psk-realize-to-kernel"), make_pass("psk-kernel-dedup")]
    if fuse:
        passes.append(make_pass("psk-kernel-fuse-siblings"))
    if plan:
        passes.append(make_pass("psk-plan-layout", plan=plan))
    return passes


def load_plan(spec):
    """A Plan from `spec` (a Plan, `@path`, a path, inline JSON); InvalidInput, one line."""
    from ..transforms.plan_layout import Plan, PlanError
    from ..transforms.plan_layout import load_plan as load
    if spec is None or isinstance(spec, Plan):
        return spec
    try:
        return load(spec)
    except PlanError as exc:
        raise InvalidInput(f"presk: {exc}") from None


def planned(pipe: Pipeline, plan, entry: str, dims: dict[str, int], grad: bool,
            real: Realization) -> Pipeline:
    """`pipe` with the plan's layouts on its kernels, once the plan is for this recording
    (its realization's types: the threading is the plan's own), named by them."""
    from ..analysis.realization import types_of_name
    from ..transforms.plan_layout import PlanError, apply_plan
    plan = load_plan(plan)
    if plan is None:
        return pipe
    if plan.entry != entry or plan.dims != dims or plan.grad != grad or \
            types_of_name(plan.realization) != real.types_name():
        what = lambda e, d, g, r: (f"`{e}` at {', '.join(f'{k}={v}' for k, v in d.items())}"  # noqa: E731
                                   f"{' with its gradient' if g else ''} under {r}")
        raise InvalidInput(f"presk: the plan was made for "
                           f"{what(plan.entry, plan.dims, plan.grad, plan.realization)}, not "
                           f"{what(entry, dims, grad, pipe.realization_name)}")
    try:
        apply_plan(pipe.kernel, plan)
    except PlanError as exc:
        raise InvalidInput(f"presk: {exc}") from None
    pipe.realization_name = realization_name(real, pipe.kernel)
    return pipe


def record_entry(core_module, entry: str, dims: dict[str, int], realization=None,
                 fuse: bool = True, grad: bool = False, remat: str = "store",
                 fuse_limit: int = FUSE_LIMIT, fuse_reductions: bool = False):
    """(the entry recorded in PSK-Realize, the Realization): the recording passes run on a
    copy of `core_module` (left unchanged). With `grad`, what is recorded is
    `entry.value_vjp`: inputs the entry's, then the cotangent seed; outputs `result` and
    `grad.<path>` (presk.conversion.core_to_realize.record_value_and_gradient)."""
    from ..analysis.realization import RealizationError
    from ..conversion.core_to_realize import RecordError
    from ..transforms.differentiate import DifferentiationError
    real = load_realization(realization)
    passes = recording_passes(entry, dims, realization, fuse, grad, remat, fuse_limit,
                              fuse_reductions)
    try:
        return run_passes(core_module.clone(), passes), real
    except DifferentiationError as exc:
        raise InvalidProgram(f"presk: error: {exc}") from None
    except (RecordError, RealizationError) as exc:
        raise InvalidInput(f"presk: {exc}") from None


def kernel_pipeline(core_module, entry: str, dims: dict[str, int], realization=None,
                    fuse: bool = True, grad: bool = False, remat: str = "store",
                    plan=None, fuse_reductions: bool = False) -> Pipeline:
    """Record `entry` at `dims` under `realization` (None: all f64; a Realization, a path,
    `@path` or inline JSON), fuse, and convert to PSK-Kernel (`kernel_passes`); `plan` (a
    Plan, `@path`) sets the kernels' layouts (psk-plan-layout)."""
    from ..conversion.realize_to_kernel import KernelConversionError, realize_to_kernel
    with paused():  # presk/gc_pause.py
        realize, real = record_entry(core_module, entry, dims, realization, fuse, grad, remat,
                                     fuse_reductions=fuse_reductions)
        try:
            # What convert-psk-realize-to-kernel, psk-kernel-dedup (and, fused,
            # psk-kernel-fuse-siblings) apply, into a new module: the Realize one is kept
            # (the listing, the inputs' names read it).
            kernel = realize_to_kernel(realize, siblings=fuse)
        except KernelConversionError as exc:
            raise InvalidProgram(f"presk: error: {exc}") from None
        pipe = Pipeline(realize, kernel, realization_name(real, kernel))
        return planned(pipe, plan, entry, dims, grad, real)
