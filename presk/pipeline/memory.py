"""What one call of an entry needs in memory, for `presk memory` and the Python API.

The entry is recorded and lowered (`kernel_pipeline`), its host walked without computing
(presk/kernel_abi/lives.py `record_trace`), and counted (presk/analysis/memory.py `count`);
beside the count, the arenas the backends allocate for it and the placement they use.

  memory_trace(core_module, entry, dims, realization=None, grad=False, remat="store",
               plan=None) -> (Trace, Pipeline)
  memory_report(core_module, entry, dims, realization=None, grad=False, remat="store",
                plan=None) -> MemoryReport
  launch_packing(kernel_module) -> {kernel: bytes one launch packs beside the arena}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidInput
from .record import Pipeline, kernel_pipeline


@dataclass
class Packing:
    """What launches allocate beside the arena as native code runs them: a tiled kernel
    copies each operand it reads along j with j not last (malloc'd, j-last, freed at the
    launch's end; every part of a split kernel packs its own). `by_kernel` the bytes one
    launch of each such kernel packs; `peak` the most live at once with the buffers (the
    count's live bytes plus the launch's packing), at `peak_step`."""

    by_kernel: dict[str, int]
    peak: int
    peak_step: int

    @property
    def most(self) -> int:
        return max(self.by_kernel.values(), default=0)


@dataclass
class MemoryReport:
    count: Any  # presk.analysis.memory.Count
    placed: int  # the placed arena (presk.kernel_abi.placement), beside the inputs
    rounded_peak: int  # the live peak with every arena buffer in its slot (calling.slot)
    native_arena: int  # what the native backend allocates
    c_arena: int  # <FN>_ARENA_BYTES of `presk export --target c`
    realization_name: str
    packing: Packing
    planned: bool  # the kernels in a plan's layouts (presk-plan/1)


def memory_trace(core_module, entry: str, dims: dict[str, int], realization=None,
                 grad: bool = False, remat: str = "store",
                 plan=None) -> tuple[Any, Pipeline]:
    """The entry's recorded host walked (the `Trace`), and the pipeline that made it (its
    kernels in `plan`'s layouts when one is given)."""
    from ..kernel_abi.lives import MemoryCountError, record_trace
    pipe = kernel_pipeline(core_module, entry, dims, realization, grad=grad, remat=remat,
                           plan=plan)
    try:
        return record_trace(pipe.kernel), pipe
    except MemoryCountError as exc:
        raise InvalidInput(f"presk memory: {exc}") from None


def launch_packing(kernel_module) -> dict[str, int]:
    """The bytes one launch of each kernel packs (0 left out), as the native pipeline
    lowers it: each tiled nest's packed operands (presk/kernel_abi/tiles.py; the copies
    are emitted by presk/conversion/kernel_to_std/tile_contraction.py), once per part when psk-kernel-split
    divides the kernel (run here on copies of the kernels that pack and split)."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp

    from ..kernel_abi.tiles import packed_bytes
    from ..dialects import kernel as K
    from ..transforms.kernel_split import KernelSplitPass

    out = {name: packed_bytes(k) for name, k in K.kernels(kernel_module).items()}
    out = {name: n for name, n in out.items() if n}
    split = [k for name, k in K.kernels(kernel_module).items()
             if name in out and k.layout.split.data]
    if split:
        module = ModuleOp([k.clone() for k in split])
        KernelSplitPass().apply(Context(), module)
        kernels = K.kernels(module)
        for k in split:
            parts = kernels[k.sym_name.data].parts
            if parts is not None:
                out[k.sym_name.data] = sum(packed_bytes(kernels[p.root_reference.data])
                                           for p in parts)
    return out


def _packing(trace, live: list[int], kernel_module) -> Packing:
    from ..dialects import kernel as K
    by_kernel = launch_packing(kernel_module)
    total = [n + (by_kernel.get(s.op.callee_name, 0) if isinstance(s.op, K.LaunchOp) else 0)
             for n, s in zip(live, trace.steps)]
    peak = max(total, default=0)
    return Packing(by_kernel, peak, total.index(peak) if total else 0)


def memory_report(core_module, entry: str, dims: dict[str, int], realization=None,
                  grad: bool = False, remat: str = "store", plan=None) -> MemoryReport:
    """The count of one call, the arenas native and C allocate, the placement, and what
    the launches pack beside the arena; the kernels in `plan`'s layouts when one is given
    (a Plan or `@plan.json`, made by `presk plan` for this recording)."""
    from ..analysis.memory import count
    from ..emit.c_program import entry_c
    from ..kernel_abi.calling import slot
    from ..kernel_abi.lives import live_bytes
    from ..kernel_abi.placement import place
    trace, pipe = memory_trace(core_module, entry, dims, realization, grad, remat, plan)
    name = trace.entry.sym_name.data
    from ..runtime.compile import native_signatures
    native = {s.host: s.arena_bytes for s in native_signatures(pipe.kernel)}[name]
    rounded = live_bytes(trace, lambda b: b.kind == "made", size=lambda b: slot(b.bytes))
    counted = count(trace)
    return MemoryReport(counted, place(trace).need[name], max(rounded, default=0),
                        native, entry_c(pipe.kernel).sig.arena_bytes,
                        pipe.realization_name, _packing(trace, counted.live, pipe.kernel),
                        plan is not None)
