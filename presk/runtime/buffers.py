"""Buffers the native code reads and writes: numpy arrays in the storage of their element
type (f64 → float64, f32 → float32, bf16 → uint16 bits, as in the kernel interpreter) whose
data starts on a 64-byte boundary.

The calling convention (presk/kernel_abi/calling.py) requires only the arena to be
aligned, but outputs and arenas allocated here are all aligned to `ARENA_ALIGN` so that
aligned vector loads and stores never split a cache line. Conversions between values and
storage are the interpreter's (`to_storage`, `to_f64`), re-exported here.
"""

from __future__ import annotations

import numpy as np

from ..analysis.kernel_interpret import STORAGE, to_f64, to_storage
from ..kernel_abi.calling import ARENA_ALIGN, BufferSig

__all__ = ["aligned_empty", "empty", "is_aligned", "storage_dtype", "to_f64",
           "to_storage"]


def storage_dtype(element: str) -> np.dtype:
    """The numpy dtype that stores `element` (`f64`, `f32`, `bf16`)."""
    return np.dtype(STORAGE[element])


def aligned_empty(nbytes: int, align: int = ARENA_ALIGN) -> np.ndarray:
    """`nbytes` uninitialized bytes (uint8) starting on a multiple of `align`. (numpy
    gives an array of no elements a pointer of its own choosing: with `nbytes` 0 the
    address is not aligned, and nothing may be read there anyway.)"""
    raw = np.empty(nbytes + align, dtype=np.uint8)
    offset = (-raw.ctypes.data) % align
    return raw[offset:offset + nbytes]


def empty(buf: BufferSig) -> np.ndarray:
    """An uninitialized, aligned, C-contiguous array for the buffer `buf`."""
    dtype = storage_dtype(buf.element)
    return aligned_empty(buf.size * dtype.itemsize).view(dtype).reshape(buf.shape)


def is_aligned(a: np.ndarray, align: int = ARENA_ALIGN) -> bool:
    """Whether `a`'s data starts on a multiple of `align`."""
    return a.ctypes.data % align == 0
