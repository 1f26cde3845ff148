"""The epoch order computed in C (presk/train/native_order.py, epoch_order.c) is numpy's
permutation of docs/training.md, element for element: over seeds of one, two and three
32-bit words (0, small, 2³², 2⁶⁴ + 1, …), epochs from 0 to past 2³², and counts from 0 to
100 000 (rejection draws at every mask width up to 2¹⁷); `Stream.order` and
`data.epoch_order` give it; without the library (`PRESK_NATIVE_ORDER=off`) numpy does."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from presk.train import data, native_order

SEEDS = (0, 1, 3, 7, 12345, 2**31 - 1, 2**32 - 1, 2**32, 2**32 + 5, 2**40 + 3, 2**64 + 1,
         12345678901234567890123)
EPOCHS = (0, 1, 2, 9, 1000, 2**32 + 1)
COUNTS = (0, 1, 2, 3, 5, 8, 255, 256, 257, 1000)


def numpy_order(count: int, seed: int, epoch: int) -> np.ndarray:
    """The documented generator, written out here (not data.numpy_epoch_order)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))
    return rng.permutation(count)


needs_library = pytest.mark.skipif(not native_order.available(),
                                   reason="no C compiler: the epoch order is numpy's")


@needs_library
def test_every_seed_epoch_and_count_is_numpys() -> None:
    for seed, epoch, count in itertools.product(SEEDS, EPOCHS, COUNTS):
        got = native_order.epoch_order(count, seed, epoch)
        want = numpy_order(count, seed, epoch)
        assert got is not None and got.dtype == np.int64 and got.shape == (count,)
        assert np.array_equal(got, want), (seed, epoch, count)


@needs_library
def test_many_epochs_and_a_large_count() -> None:
    for epoch in range(300):
        assert np.array_equal(native_order.epoch_order(97, 3, epoch), numpy_order(97, 3, epoch))
    for seed in (0, 3, 2**33):
        assert np.array_equal(native_order.epoch_order(100_000, seed, 4),
                              numpy_order(100_000, seed, 4))


def test_entropy_words_are_numpys() -> None:
    from numpy.random.bit_generator import _coerce_to_uint32_array  # type: ignore
    for a, b in itertools.product(SEEDS, EPOCHS):
        assert native_order.entropy_words(a, b) == _coerce_to_uint32_array([a, b]).tolist()
    with pytest.raises(ValueError):
        native_order.entropy_words(-1)


def test_stream_order_is_numpys() -> None:
    """data.epoch_order (what Stream.order reads) with or without the library."""
    for seed, epoch in itertools.product((3, 2**40), (0, 5)):
        got = data.epoch_order(256, seed, epoch)
        assert got.dtype == np.int64 and got.flags.writeable and got.flags.c_contiguous
        assert np.array_equal(got, numpy_order(256, seed, epoch))
    assert np.array_equal(data.epoch_order(10, None, 3), np.arange(10))


def test_without_the_library_numpy_draws_it() -> None:
    code = ("import numpy as np; from presk.train import data, native_order; "
            "assert not native_order.available(); "
            "a = data.epoch_order(300, 3, 2); "
            "b = np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 2])))"
            ".permutation(300); assert np.array_equal(a, b); print('ok')")
    env = dict(os.environ, PRESK_NATIVE_ORDER="off")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


@needs_library
def test_fill_epochs_is_each_epochs_order_cut_and_laid_end_to_end() -> None:
    """`fill_epochs` (one C call for the epochs a native training call spans whole): epoch
    after epoch, each numpy's permutation cut to `keep` places, over seeds and first
    epochs of one and two words; the memory past the last epoch's places is the room its
    dropped ones are drawn into, nothing before the address is written."""
    for seed, first, count, keep in [(3, 0, 256, 256), (0, 9, 21, 20), (2**40 + 3, 5, 97, 90),
                                     (12345678901234567890123, 2**32 - 2, 10, 7)]:
        epochs = 4
        out = np.full(1 + epochs * keep + count - keep, -1, np.int64)
        assert native_order.fill_epochs(count, seed, first, epochs, keep,
                                        out.ctypes.data + 8)
        assert out[0] == -1
        want = np.concatenate([numpy_order(count, seed, first + k)[:keep]
                               for k in range(epochs)])
        assert np.array_equal(out[1:1 + epochs * keep], want), (seed, first, count, keep)
