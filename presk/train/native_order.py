"""An epoch's order computed in C, the same permutation numpy computes (docs/training.md):
`np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))
.permutation(count)`, bit for bit (presk/train/epoch_order.c says how).

Why: numpy's three objects and the permutation cost about 11 µs an epoch, most of it
Python-level set-up around 256 draws; the tutorial's epoch of 32 native steps takes about
90 µs, so the order was an eighth of an epoch (and evicted the step's code from the
caches). The C function does the same arithmetic in under 2 µs.

The library is built by the C compiler once per source, as the worker pool's is
(presk/runtime/c_library.py: `$CC` or `cc`, kept beside the native cache). Without a compiler,
or where it fails, `epoch_order` returns None and the caller uses numpy: the same order
either way (test/unit/test_native_order.py compares them over many seeds, epochs and
counts). `PRESK_NATIVE_ORDER=off` asks for numpy.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("epoch_order.c")
CFLAGS = ["-O2", "-std=gnu99", "-fPIC", "-shared"]
_MASK32 = 0xFFFFFFFF


@lru_cache(maxsize=1)
def _orders_function():
    """`presk_epoch_orders` of epoch_order.c (one epoch or many a call: Python calls no
    other), its library built if needed and loaded once; None without it."""
    from ..runtime.c_library import built
    from ..runtime.cache import switched_off
    if switched_off("PRESK_NATIVE_ORDER"):
        return None
    target = built("presk_epoch_order", {SOURCE.name: SOURCE.read_text(encoding="utf-8")},
                   SOURCE.name, CFLAGS)
    if target is None:
        return None
    try:
        orders = ctypes.CDLL(str(target)).presk_epoch_orders
    except (OSError, AttributeError):
        return None
    orders.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 5 + [ctypes.c_void_p]
    orders.restype = None
    return orders


def entropy_words(*values: int) -> list[int]:
    """numpy's SeedSequence entropy of a list of non-negative ints: each value as its
    little-endian 32-bit words (0 as one word), concatenated (`_coerce_to_uint32_array`)."""
    out: list[int] = []
    for v in values:
        if v < 0:
            raise ValueError(f"a seed's entropy is a non-negative int, not {v}")
        if v == 0:
            out.append(0)
        while v > 0:
            out.append(v & _MASK32)
            v >>= 32
    return out


def epoch_order(count: int, seed: int, epoch: int) -> np.ndarray | None:
    """The permutation of `count` samples numpy draws for (seed, epoch), as int64; None
    when the C library is not available, or for more than 2³² samples (numpy's 64-bit
    draws, which the tests cannot compare at that size): the caller then asks numpy."""
    out = (ctypes.c_int64 * count)()  # numpy's `.ctypes.data` alone costs about 1 µs
    if not fill_epochs(count, seed, epoch, 1, count, ctypes.addressof(out)):
        return None
    return np.frombuffer(out, np.int64)  # a writable int64 array over `out` (its base)


def fill_epochs(count: int, seed: int, first: int, epochs: int, keep: int,
                address: int) -> bool:
    """Write the orders of epochs `first … first + epochs − 1`, each cut to its first
    `keep` places, one after another at `address`, in one C call; the memory there must
    hold `epochs · keep + count − keep` int64s (each epoch's dropped places are drawn,
    then written over by the next). False, nothing written, where `epoch_order` would
    return None."""
    fill = filler(count, seed)
    return fill is not None and fill(first, epochs, keep, address)


def filler(count: int, seed: int) -> Callable[[int, int, int, int], bool] | None:
    """`fill_epochs` of one stream's count and seed as a function of (first, epochs, keep,
    address): its checks and the seed's words done once, so that the call a native
    training step makes each time it crosses epochs is the C call alone; None where
    `epoch_order` would return None. The function returns False for an epoch past 2⁶³
    (the C takes it as an int64)."""
    fn = _orders_function()
    if fn is None or count > _MASK32:  # beyond, numpy draws 64-bit words: its path here
        return None
    words = entropy_words(seed)
    entropy, n = (ctypes.c_uint32 * len(words))(*words), len(words)

    def fill(first: int, epochs: int, keep: int, address: int) -> bool:
        if first < 0 or first + epochs > 2**63:
            return False
        fn(entropy, n, first, epochs, count, keep, address)
        return True
    return fill


def available() -> bool:
    """Whether the C epoch order can be had in this process."""
    return _orders_function() is not None


__all__ = ["available", "entropy_words", "epoch_order", "fill_epochs", "filler"]
