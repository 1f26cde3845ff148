"""A training run's objective as native code: its value and gradient at the run's batch
size, compiled once (or taken from the on-disk cache), called once per step.

The entry is `objective.value_vjp` recorded down to PSK-Kernel under the realization, as
`presk run --grad --engine native` records it (presk/pipeline/call.py `entry_call`):
inputs the parameters by path (`θ.blocks.proj.w`), the batch (`batch.0`, `batch.1`) and
the cotangent seed (1); outputs `result` and `grad.<path>`. Its buffers are allocated and
bound once (`NativeEntry.bind`), so a step is: the parameters and the batch copied into
their input buffers, rounded to nearest even into each buffer's type (a plain copy for
f64); one ctypes call; the loss and the gradient read from the output buffers (widened to
f64 exactly). No Python between the launches of a step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
import numpy as np

from ..analysis import entry as E
from ..analysis.kernel_interpret import to_f64, to_storage
from ..runtime.bound_call import BoundCall


@dataclass
class Slot:
    """One input buffer of the entry and where its values come from."""

    name: str  # the entry's argument name: `θ.w`, `batch.0`, `d%7`
    buffer: np.ndarray  # bound to the native entry (its storage type)
    element: str  # f64, f32, bf16

    def fill(self, values: np.ndarray) -> None:
        if self.element == "f64":
            np.copyto(self.buffer, values)
        else:
            np.copyto(self.buffer, to_storage(values, self.element))


class NativeObjective:
    """`loss, grads = objective(params, batch)`: params by path (f64 arrays), batch a
    sequence of arrays in the order of the objective's batch argument; grads by path."""

    def __init__(self, core_module, objective: str, dims: dict[str, int], realization=None,
                 remat: str = "store", cache: bool = True, plan=None,
                 fuse_reductions: bool = False):
        from ..pipeline import compile_call, entry_call
        self.prepared = E.prepare(core_module, objective, dims)
        params = {f.path: np.zeros(f.shape) for f in self.prepared.fields}
        values = {n: np.zeros(s) for n, s in self.prepared.inputs.items()}
        self.call = entry_call(core_module, objective, dims, params, values, realization,
                               True, True, remat, plan=plan,
                               fuse_reductions=fuse_reductions)
        self.program, self.entry = compile_call(self.call, cache)
        # the entry's own input buffers, in its types (an input the lowering narrowed to
        # f32 is one: psk-kernel-hoist-input-converts); the slots write into them
        inputs = self.entry.check_inputs(self.call.inputs)
        self._step: BoundCall = self.entry.bind(inputs)
        self.outputs: list[np.ndarray] = self._step.outputs
        self.slots = [Slot(sig.name, b, sig.element)
                      for sig, b in zip(self.entry.sig.inputs, inputs)]
        self._param_slots = {s.name.partition(".")[2]: s for s in self.slots
                             if s.name.partition(".")[2] in params}
        self._batch_slots = [s for s in self.slots if s.name in values]
        self.paths = [f.path for f in self.prepared.fields]

    @property
    def batch_names(self) -> list[str]:
        return [s.name for s in self._batch_slots]

    def __call__(self, params: Mapping[str, np.ndarray], batch: Sequence[np.ndarray]
                 ) -> tuple[float, dict[str, np.ndarray]]:
        for path, slot in self._param_slots.items():
            slot.fill(params[path])
        for slot, values in zip(self._batch_slots, batch):
            slot.fill(values)
        self._step()
        out = dict(zip(self.call.output_names, self.outputs))
        loss = float(to_f64(out["result"]))
        return loss, {p: to_f64(out[f"grad.{p}"]) for p in self.paths}

    # ---- reading and writing the caller's arrays in place ----
    def can_bind(self, dtype: np.dtype) -> bool:
        """Whether every parameter buffer and every gradient output is stored in `dtype`
        (then `bind` can hand the caller's arrays to the native code itself)."""
        want = {np.dtype(np.float64): "f64", np.dtype(np.float32): "f32"}.get(np.dtype(dtype))
        grads = {f"grad.{p}" for p in self.paths}
        outs = [b for b in self.entry.sig.outputs if b.name in grads]
        return want is not None and len(outs) == len(self.paths) and all(
            s.element == want for s in [*self._param_slots.values(), *outs])

    def bind(self, params: Mapping[str, np.ndarray], grads: Mapping[str, np.ndarray]
             ) -> None:
        """From now on the native code reads the parameters from `params` and writes the
        gradient into `grads` (C-contiguous arrays of the buffers' type, by path), so that
        a step (`call_bound`) copies only the batch."""
        bound = {id(s) for s in self._param_slots.values()}
        inputs = [params[s.name.partition(".")[2]] if id(s) in bound else s.buffer
                  for s in self.slots]
        outputs = [grads[n[len("grad."):]] if n.startswith("grad.") else o
                   for n, o in zip(self.call.output_names, self.outputs)]
        self._step = self.entry.bind(inputs, outputs)
        self._result = self.outputs[self.call.output_names.index("result")]

    @property
    def bound_call(self) -> tuple[int, int, int]:
        """(the entry's address, its argv, its arena) as `bind` bound them: what a native
        caller (presk/train/native_step.py) calls the objective with."""
        return self._step.function, self._step.argv, self._step.arena

    @property
    def result_buffer(self) -> np.ndarray:
        """The bound output the loss is written to."""
        names = self.call.output_names
        return self._step.outputs[names.index("result")]

    @property
    def batch_slots(self) -> list[Slot]:
        """The batch's input buffers, in the order of the objective's batch argument."""
        return self._batch_slots

    def rounded_buffers(self) -> tuple[dict[str, Slot], dict[str, Slot]]:
        """By parameter path: the input buffer its value is rounded into (`__call__`'s
        `fill`) and the output buffer its gradient is read from (widened by `to_f64`), as
        bound now: what a native step converts itself when the objective cannot read the
        f64 master copies (`can_bind`)."""
        elements = {b.name: b.element for b in self.entry.sig.outputs}
        outs = dict(zip(self.call.output_names, self._step.outputs))
        grads = {p: Slot(f"grad.{p}", outs[f"grad.{p}"], elements[f"grad.{p}"])
                 for p in self.paths}
        return dict(self._param_slots), grads

    def call_bound(self, batch: Sequence[np.ndarray]) -> float:
        """The loss at the bound parameters; the gradient is in the bound arrays."""
        for slot, values in zip(self._batch_slots, batch):
            slot.fill(values)
        self._step()
        return float(self._result)


__all__ = ["NativeObjective", "Slot"]
