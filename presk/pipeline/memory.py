"""What one call of an entry needs in memory, for `presk memory` and the Python API.

The entry is recorded and lowered (`kernel_pipeline`), its host walked without computing
(presk/kernel_abi/lives.py `record_trace`), and counted (presk/analysis/memory.py `count`);
beside the count, the arenas the backends allocate for it and the placement they use.

  memory_trace(core_module, entry, dims, realization=None, grad=False, remat="store")
      -> (Trace, Pipeline)
  memory_report(core_module, entry, dims, realization=None, grad=False, remat="store")
      -> MemoryReport
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import InvalidInput
from .record import Pipeline, kernel_pipeline


@dataclass
class MemoryReport:
    count: Any  # presk.analysis.memory.Count
    placed: int  # the placed arena (presk.kernel_abi.placement), beside the inputs
    rounded_peak: int  # the live peak with every arena buffer rounded to 64 bytes
    native_arena: int  # what the native backend allocates
    c_arena: int  # <FN>_ARENA_BYTES of `presk export --target c`
    realization_name: str


def memory_trace(core_module, entry: str, dims: dict[str, int], realization=None,
                 grad: bool = False, remat: str = "store") -> tuple[Any, Pipeline]:
    """The entry's recorded host walked (the `Trace`), and the pipeline that made it."""
    from ..kernel_abi.lives import MemoryCountError, record_trace
    pipe = kernel_pipeline(core_module, entry, dims, realization, grad=grad, remat=remat)
    try:
        return record_trace(pipe.kernel), pipe
    except MemoryCountError as exc:
        raise InvalidInput(f"presk memory: {exc}") from None


def memory_report(core_module, entry: str, dims: dict[str, int], realization=None,
                  grad: bool = False, remat: str = "store") -> MemoryReport:
    """The count of one call, the arenas native and C allocate, and the placement."""
    from ..analysis.memory import count
    from ..emit.c_program import entry_c
    from ..kernel_abi.arena import entry_signatures
    from ..kernel_abi.calling import align
    from ..kernel_abi.lives import live_bytes
    from ..kernel_abi.placement import place
    trace, pipe = memory_trace(core_module, entry, dims, realization, grad, remat)
    name = trace.entry.sym_name.data
    native = {s.host: s.arena_bytes for s in entry_signatures(pipe.kernel)}[name]
    rounded = live_bytes(trace, lambda b: b.kind == "made", size=lambda b: align(b.bytes))
    return MemoryReport(count(trace), place(trace).need[name], max(rounded, default=0),
                        native, entry_c(pipe.kernel).sig.arena_bytes,
                        pipe.realization_name)
