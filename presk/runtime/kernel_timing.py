"""Timing single PSK-Kernel nests natively: the measurements `presk profile calibrate`
fits the cost model to, and `--measure` sets beside its predictions.

`time_kernels(kernels)` puts each kernel (a copy, under its own layout) into a module
with a host per kernel, marked entry, that launches it `repeats` times back to back on
the same buffers, and one baseline host that launches a one-element kernel once. The
kernels go into modules of at most `chunk` (CHUNK) kernels each, each compiled (or loaded
from the native cache) once: lowering and compiling a module take time that grows faster
than its kernels (a module of 292 calibration points took 94 s, the same points in
modules of 8 took 48 s), and a chunk's cached code serves any later timing of the same
kernels. A kernel's `call` is its host's time, `base` the baseline's:
what the call from Python, the argument checks and the entry's prologue cost. `seconds`
= (call − base) / repeats, a launch with that taken out (what `--measure` sets beside a
prediction); the calibration fits the call instead (the launch cost λ and the call's
overhead are separate constants there: presk/pipeline/profile.py).

The kernels are timed in `rounds` interleaved passes (kernel 1, 2, …, n, the baseline,
then again): a burst of other work on a shared machine slows one pass of a kernel, not
all of them. Each sample is the minimum over a pass's samples (`time_call`), and a
kernel's time the minimum over passes — on a shared machine the minimum is the one
estimate that noise only raises; `median` keeps the median of the passes' minima.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import Float64Type, ModuleOp, StringAttr, UnitAttr

from ..dialects import kernel as K
from .timing import time_call


@dataclass(frozen=True)
class KernelTime:
    seconds: float  # a launch, the baseline taken out (never below 0)
    repeats: int  # launches per timed call
    call: float = 0.0  # the host's call: `repeats` launches and the call's overhead
    base: float = 0.0  # the baseline host's call
    median: float = 0.0  # the median over rounds of the call's minimum


def _baseline(n: int = 1) -> K.KernelOp:
    """A copy of n f64 elements (the baseline's: one)."""
    t = K.BufferType.get(Float64Type(), n)
    kernel = K.KernelOp("base", [t, t], 1, "copy")
    block = kernel.body.block
    loop = K.ForOp(0, n)
    block.add_op(loop)
    value = K.LoadOp(block.args[0], [loop.induction])
    loop.body.block.add_ops([value, K.StoreOp(value.result, block.args[1],
                                              [loop.induction]), K.YieldOp()])
    return kernel


CHUNK = 24
"""Kernels a timing module holds at most (see the module docstring)."""


def harness(kernels: Sequence[K.KernelOp], repeats: Sequence[int]) -> ModuleOp:
    """The timing module: kernels `t<i>`, hosts `h<i>` (entries), and `h_base`."""
    module = ModuleOp([])
    hosts = []
    for i, (kernel, n) in enumerate([*zip(kernels, repeats), (_baseline(), 1)]):
        name = f"t{i}" if i < len(kernels) else "t_base"
        copy = kernel.clone()
        copy.sym_name = StringAttr(name)
        copy.parts = None
        module.body.block.add_op(copy)
        host = K.HostOp(f"h{i}" if i < len(kernels) else "h_base", "timing",
                        list(kernel.arg_types), kernel.output_count)
        host.entry = UnitAttr()
        for _ in range(n):
            host.body.block.add_op(K.LaunchOp(name, list(host.args), f"timing/%{i}"))
        hosts.append(host)
    module.body.block.add_ops(hosts)
    return module


def _inputs(entry, rng: np.random.Generator) -> list[np.ndarray]:
    """Values in [0.5, 1.5] (every math function is defined there), as stored."""
    from ..analysis.kernel_interpret import to_storage
    return [to_storage(rng.uniform(0.5, 1.5, size=b.shape), b.element)
            for b in entry.sig.inputs]


def time_kernels(kernels: Sequence[K.KernelOp], repeats: Sequence[int], samples: int = 5,
                 min_seconds: float = 0.004, cache: bool = True,
                 progress=None, threads: str | None = None, rounds: int = 1,
                 clock=None, chunk: int = CHUNK, base_clock=None) -> list[KernelTime]:
    """Each kernel's time (see the module docstring); `progress(i)` after each kernel's
    last round; split kernels' parts started by `threads` (`pool`/`threads`, default:
    the pool); `clock` as `time_call` takes it (default: wall time), or one a kernel
    (the baseline's `base_clock`, else the first's)."""
    from .compile import native_program
    chunk = max(chunk, 1)
    programs = [native_program(harness(kernels[at:at + chunk], repeats[at:at + chunk]),
                               cache=cache, threads=threads)
                for at in range(0, max(len(kernels), 1), chunk)]
    rng = np.random.default_rng(0)
    per_round = max(samples // max(rounds, 1), 1) if rounds > 1 else samples

    def bound(i: int | None):
        program = programs[0 if i is None else i // chunk]
        entry = program.entry("h_base" if i is None else f"h{i % chunk}")
        return entry.bind(_inputs(entry, rng))

    base_step = bound(None)
    clocks = [clock] * len(repeats) if clock is None or callable(clock) else list(clock)
    clocks = clocks or [None]
    calls: list[list[float]] = [[] for _ in repeats]
    bases: list[float] = []
    for r in range(max(rounds, 1)):
        bases.append(time_call(base_step, per_round, min_seconds,
                               *[c for c in (base_clock or clocks[0],) if c]).minimum)
        for i in range(len(repeats)):
            # bound anew each round: a point's buffers are not all kept alive at once
            at = [c for c in clocks[i:i + 1] if c is not None]
            calls[i].append(time_call(bound(i), per_round, min_seconds, *at).minimum)
            if progress is not None and r == rounds - 1:
                progress(i)
    base = min(bases)
    out = []
    for n, c in zip(repeats, calls):
        call = min(c)
        out.append(KernelTime(max(call - base, 0.0) / n, n, call, base,
                              float(np.median(c))))
    return out


def split_launch_seconds(workers: int, repeats: int = 64, samples: int = 7,
                         threads: str | None = None, cache: bool = True) -> float:
    """What a split over `workers` adds to a launch: an element-wise copy of one element
    per worker, split `(0, workers)`, against the same copy unsplit — the launch's
    start and wait (the profile's spawn term), its work nil. `threads` as time_kernels'."""
    from ..transforms.plan_layout import Point
    plain = _baseline(workers)
    split = plain.clone()
    split.layout = Point((), workers).attr()
    whole, parted = time_kernels([plain, split], [repeats, repeats], samples,
                                 cache=cache, threads=threads)
    return max(parted.seconds - whole.seconds, 0.0)
