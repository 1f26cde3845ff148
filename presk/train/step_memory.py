"""The memory of one training step as `presk train` makes it (presk/train/loop.py
`Trainer.one_step`), counted, never measured: `presk memory --step`.

A step is three calls: the schedule (`lr_at`: Python floats, no array), the objective's
value and gradient (`E.value_vjp` as native code, counted from its recorded host by
presk/analysis/memory.py), and the optimizer's update (presk/train/native_optim.py: one
native element-wise call per dtype group, in place). Across them the loop holds arrays the
training code allocates once: the parameters' f64 master copies (`Trainer.params`), the
optimizer's groups (`_Group`: `p`, `g`, `tmp`, `tmp2` and the moments, each the group's
elements in its dtype), the update's scalar buffer, and the objective's bound input and
output buffers. Each figure below is read from those classes and the recorded program.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..analysis.memory import Count
from ..kernel_abi.lives import Trace, live_at
from .native_optim import NativeAdamW, NativeSGD
from .native_step import OWN_TYPES, STEPS_PER_CALL, STREAM_TYPES, step_buffer_bytes

MASTER = np.dtype(np.float64)  # E.weights: the loop's parameters are f64
_NATIVE = {"adamw": NativeAdamW, "sgd": NativeSGD}


@dataclass
class Holdings:
    """What the loop holds across a step, in bytes, by what holds it."""

    objective_params: int  # the objective's θ inputs, in their storage types
    batch_and_seed: int  # its other inputs: the batch and the cotangent seed
    batch_and_seed_native: int  # the same as native code takes them (`native_inputs`)
    narrowed: tuple[str, ...]  # of which passed in f32 (the caller rounds them)
    objective_outputs: int  # its bound outputs: the value and the gradient
    gradient: int  # of which the gradient
    master: int  # Trainer.params, f64 (0 when laid out or with a native step: they are
    # the group's `p`)
    group_p: int
    group_g: int
    scratch: int  # the group's `tmp` and `tmp2`
    moments: int
    scalars: int  # the native update's scalar buffer
    step_buffers: int  # the native step's ctl, hyper, losses and lrs (0: no native step)
    laid_out: bool
    moment_names: tuple[str, ...]

    @property
    def loop(self) -> int:
        """The optimizer's and the loop's own arrays."""
        return (self.master + self.group_p + self.group_g + self.scratch + self.moments
                + self.scalars + self.step_buffers)


@dataclass
class Call:
    name: str
    peak: int  # its own peak of live bytes
    with_loop: int  # and what the loop holds meanwhile


@dataclass
class StepCount:
    remat: str
    count: Count  # the objective's value_vjp
    holdings: Holdings
    kept: int  # made by the forward sweep, live where the reverse sweep starts
    kept_at_peak: int
    grad_at_peak: int  # the gradient's outputs written by the peak
    calls: list[Call]

    @property
    def peak(self) -> Call:
        return max(self.calls, key=lambda c: c.with_loop)


def holdings(trace: Trace, optimizer_kind: str,
             steps_per_call: int = STEPS_PER_CALL) -> Holdings:
    """The arrays `Trainer.create` and the optimizer's `lay_out` allocate for `trace`'s
    objective (one f64 group: the loop's parameters are all f64), and the native step's
    (presk/train/native_step.py) where it applies."""
    params = [b for b in trace.buffers if b.kind == "input" and b.name.startswith("θ.")]
    others = [b for b in trace.buffers if b.kind == "input" and not b.name.startswith("θ.")]
    outs = [b for b in trace.buffers if b.kind == "output"]
    grads = [b for b in outs if b.name.startswith("grad.")]
    n = sum(b.elements for b in params) * MASTER.itemsize
    laid_out = all(b.element == "f64" for b in params + grads)  # NativeObjective.can_bind
    # native_step's own test: the parameters and gradients f64, f32 or bf16, the batch and
    # loss f64 or f32 (then Trainer.params are the group's `p`, rounded into the
    # objective's buffers if need be)
    read = [b for b in others if b.name.startswith("batch.")] + \
        [b for b in outs if b.name == "result"]
    native = bool(steps_per_call) and all(b.element in OWN_TYPES for b in params + grads) \
        and all(b.element in STREAM_TYPES for b in read)
    cls = _NATIVE[optimizer_kind]
    native_bytes, narrowed = native_inputs(trace)
    return Holdings(sum(b.bytes for b in params), sum(b.bytes for b in others),
                    native_bytes, narrowed,
                    sum(b.bytes for b in outs), sum(b.bytes for b in grads),
                    0 if laid_out or native else n, n, n, 2 * n, len(cls.BUFFERS) * n,
                    len(cls.SCALARS) * MASTER.itemsize,
                    step_buffer_bytes(optimizer_kind, steps_per_call) if native else 0,
                    laid_out, tuple(cls.BUFFERS))


def native_inputs(trace: Trace) -> tuple[int, tuple[str, ...]]:
    """The bytes of the objective's inputs other than θ as native code takes them — what
    the trainer's objective allocates — and the names of those the lowering narrowed
    (psk-kernel-hoist-input-converts: read only in f32, passed in f32, the caller's data
    rounded when it binds them). Every other figure counts the recorded program."""
    from ..runtime.compile import native_signatures
    name = trace.entry.sym_name.data
    module = trace.entry.parent_op()
    assert module is not None
    (sig,) = [s for s in native_signatures(module) if s.host == name]
    others = [b for b in sig.inputs if not b.name.startswith("θ.")]
    return sum(b.nbytes for b in others), tuple(b.name for b in others if b.given)


def reverse_start(trace: Trace) -> int:
    """The first step of the entry's reverse sweep (its `.bwd` host called from it)."""
    for i, s in enumerate(trace.steps):
        f = s.frame
        while f.parent is not None and f.parent.parent is not None:
            f = f.parent
        if f.parent is not None and f.host.sym_name.data.endswith(".bwd"):
            return i
    return len(trace.steps)


def _kept(trace: Trace, start: int, at: int) -> int:
    """Bytes made before `start` (the forward sweep) and live at step `at`."""
    return sum(b.bytes for b in live_at(trace, at)
               if b.kind == "made" and b.intervals and b.intervals[0][0] < start)


def step_count(c: Count, remat: str, optimizer_kind: str,
               steps_per_call: int = STEPS_PER_CALL) -> StepCount:
    h = holdings(c.trace, optimizer_kind, steps_per_call)
    start = reverse_start(c.trace)
    kept = _kept(c.trace, start, start) if start < len(c.trace.steps) else 0
    grad_at_peak = sum(b.bytes for b in live_at(c.trace, c.peak_step)
                       if b.kind == "output" and b.name.startswith("grad."))
    bound = h.objective_params + h.batch_and_seed_native  # the objective's inputs, bound
    name = c.trace.entry.sym_name.data
    # the update's own arrays: the f64 gradient the objective returns (`to_f64` copies),
    # alive until the group's `g` has them; none when the native code writes `g` itself
    returned = 0 if h.laid_out or h.step_buffers else h.group_g  # (a native step widens)
    # the objective's outputs are bound once (allocated whole all run), where the call's
    # count has them live from their first write: count them whole beside the call's own
    outputs_at_peak = sum(b.bytes for b in live_at(c.trace, c.peak_step) if b.kind == "output")
    held = c.peak - outputs_at_peak + bound + h.objective_outputs + h.loop
    calls = [Call(name, c.peak, held),
             Call("lr_at", 0, h.loop + bound + h.objective_outputs),
             Call("optimizer.step", returned, returned + h.loop + bound + h.objective_outputs)]
    return StepCount(remat, c, h, kept, _kept(c.trace, start, c.peak_step), grad_at_peak,
                     calls)
