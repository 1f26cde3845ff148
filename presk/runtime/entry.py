"""Calling one entry of a native module from Python.

An entry is `void presk_entry_<host>(void **argv, void *arena)` (presk/kernel_abi/calling.py). Native
code trusts its pointers: a buffer of the wrong type, shape or layout would be read out
of bounds or misread silently. `NativeEntry.__call__` therefore checks every input
against the `EntrySig` and names the first that does not match; `bind` checks once and
returns a call with no Python work left (a builtin's call: presk/runtime/bound_call.py),
for timing loops and training steps.
"""

from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from ..kernel_abi.calling import BufferSig, EntrySig
from ..emit.llvm import JitModule
from ..limits import require_memory
from .bound_call import BoundCall, bound_call
from .buffers import aligned_empty, empty, storage_dtype

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class RuntimeCallError(Exception):
    """Arguments a native entry cannot be called with (their number, dtype, shape or
    layout)."""


def describe(a: np.ndarray) -> str:
    """`float64[4, 4]`."""
    return f"{a.dtype}[{', '.join(str(s) for s in a.shape)}]"


def describe_sig(buf: BufferSig) -> str:
    """`f32[4, 4]`."""
    return f"{buf.element}[{', '.join(str(s) for s in buf.shape)}]"


def check_buffer(role: str, buf: BufferSig, a: object) -> np.ndarray:
    """`a` when it is a C-contiguous array of `buf`'s storage dtype and shape, else a
    RuntimeCallError naming the argument."""
    if not isinstance(a, np.ndarray):
        raise RuntimeCallError(f"{role} `{buf.name}` is a {type(a).__name__}, the entry "
                               f"takes a numpy array {describe_sig(buf)}")
    if a.dtype != storage_dtype(buf.element) or a.shape != buf.shape:
        raise RuntimeCallError(f"{role} `{buf.name}` is {describe(a)}, the entry takes "
                               f"{describe_sig(buf)}"
                               + (" (bf16 is stored as uint16 bits)"
                                  if buf.element == "bf16" else ""))
    if not a.flags.c_contiguous:
        raise RuntimeCallError(f"{role} `{buf.name}` is not C-contiguous "
                               f"(np.ascontiguousarray makes a copy that is)")
    if role == "output" and not a.flags.writeable:
        raise RuntimeCallError(f"output `{buf.name}` is read-only")
    return a


def _rounded(buf: BufferSig, a: object) -> object:
    """An input the lowering narrowed, given in its caller's type, rounded into the
    entry's (as the host's convert did: to nearest even); anything else as it is."""
    if buf.given is not None and isinstance(a, np.ndarray) and \
            a.dtype == storage_dtype(buf.given) and a.shape == buf.shape:
        with np.errstate(over="ignore"):  # f64 → f32, numpy's cast: nearest even, as fptrunc
            return a.astype(storage_dtype(buf.element), order="C")
    return a


def _check_count(role: str, sigs: Sequence[BufferSig], given: Sequence[object],
                 host: str) -> None:
    if len(given) != len(sigs):
        names = ", ".join(b.name for b in sigs)
        raise RuntimeCallError(f"the entry `{host}` takes {len(sigs)} {role}s ({names}), "
                               f"got {len(given)}")


class NativeEntry:
    """One entry of a loaded module, with its own arena: `entry(inputs)` → outputs.
    Not reentrant (the arena is shared by its calls); make one per thread."""

    def __init__(self, jit: JitModule, sig: EntrySig) -> None:
        self.jit = jit
        self.sig = sig
        self.function = _ENTRY_TYPE(jit.address(sig.symbol))
        require_memory(sig.call_bytes, f"a call of `{sig.host}` (its buffers and arena)")
        self.arena = aligned_empty(max(sig.arena_bytes, 1))  # a real, aligned address

    def check_inputs(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The inputs checked; one the lowering narrowed (`given`) may come in its given
        type, and is then rounded to nearest even into the entry's (a new array)."""
        _check_count("input", self.sig.inputs, inputs, self.sig.host)
        return [check_buffer("input", b, _rounded(b, a))
                for b, a in zip(self.sig.inputs, inputs)]

    def check_outputs(self, outputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        _check_count("output", self.sig.outputs, outputs, self.sig.host)
        return [check_buffer("output", b, a) for b, a in zip(self.sig.outputs, outputs)]

    def __call__(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Runs the entry on `inputs` (checked) into new aligned outputs."""
        arrays = self.check_inputs(inputs)
        outputs = [empty(b) for b in self.sig.outputs]
        argv = (ctypes.c_void_p * len(self.sig.args))(
            *[a.ctypes.data for a in arrays + outputs])
        self.function(ctypes.addressof(argv), self.arena.ctypes.data)
        return outputs

    def bind(self, inputs: Sequence[np.ndarray],
             outputs: Sequence[np.ndarray] | None = None) -> BoundCall:
        """A zero-argument call of the entry on `inputs` into `outputs` (new aligned
        arrays when not given; read them from the returned call's `outputs`). The
        arguments are checked and argv is built once: a call costs what a builtin's call
        costs (presk/runtime/bound_call.py). The call keeps the arrays alive; do not
        resize them."""
        arrays = self.check_inputs(inputs)
        outs = (self.check_outputs(outputs) if outputs is not None
                else [empty(b) for b in self.sig.outputs])
        argv = (ctypes.c_void_p * len(self.sig.args))(
            *[a.ctypes.data for a in arrays + outs])
        return bound_call(ctypes.cast(self.function, ctypes.c_void_p).value, argv,
                          self.arena.ctypes.data, sum(a.size for a in arrays + outs), outs,
                          (arrays, self))
