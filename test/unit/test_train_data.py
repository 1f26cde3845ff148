"""The data stream of a training run (presk/train/data.py): order, batches, resume, errors.

Batch contents are compared with the reader's own `read_samples` at the indices the
documented order names, and the shuffle with numpy's generator called independently
(`default_rng([seed, epoch])`, which is PCG64 over the SeedSequence of the pair).
"""

from __future__ import annotations

import json
import os
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from presk import datafile
from presk.datafile import read_header, read_samples, write_stream
from presk.frontend.elaborate import elaborate
from presk.frontend.program import DataInfo
from presk.frontend.types import TupleT
from presk.shapes import Axis, TensorType
from presk.train.data import DataError, Position, Stream, epoch_order

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "tutorial" / "data" / "pairs.psk.d"


def _pair_types(width: int) -> tuple[TupleT, TupleT]:
    """The run's sample and batch types for pairs of `ℝ[model: width]`, batched over B."""
    sample = TensorType((Axis("model", width),))
    batch = TensorType((Axis("batch", "B"), Axis("model", width)))
    return TupleT((sample, sample)), TupleT((batch, batch))


PAIR = _pair_types(4)[0]


def _info(path: Path, batch: int, seed: int | None, width: int = 4) -> DataInfo:
    sample = f"(ℝ[model: {width}], ℝ[model: {width}])"
    return DataInfo(path.name, str(path), seed, "B", batch, sample)


def _write_pairs(path: Path, count: int, width: int = 4, dtype: str = "f64") -> None:
    x = np.random.default_rng(7).standard_normal((count, width))
    write_stream(path, f"(ℝ[model: {width}], ℝ[model: {width}])", [(width,), (width,)],
                 (x, 2 * x + 1), dtype=dtype)


def _expected(path: Path, indices: np.ndarray) -> tuple[np.ndarray, ...]:
    return read_samples(path, read_header(path), [int(i) for i in indices])


def _assert_same(batch: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> None:
    assert len(batch) == len(want)
    for got, ref in zip(batch, want):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert got.tobytes() == ref.tobytes()


# --- order and contents ------------------------------------------------------------------

def test_without_shuffle_batches_are_the_file_in_order() -> None:
    with Stream.open(str(PAIRS), PAIR, 8) as stream:
        assert stream.steps_per_epoch == 32
        for i in range(32):
            batch = next(stream)
            assert batch[0].shape == (8, 4) and batch[0].flags.c_contiguous
            _assert_same(batch, _expected(PAIRS, np.arange(8 * i, 8 * i + 8)))
        assert stream.position == Position(1, 0)
        _assert_same(next(stream), _expected(PAIRS, np.arange(8)))


def test_shuffled_batches_follow_the_documented_generator() -> None:
    with Stream.open(str(PAIRS), PAIR, 8, seed=3) as stream:
        for epoch in range(3):
            perm = np.random.default_rng([3, epoch]).permutation(256)
            for i in range(32):
                _assert_same(next(stream), _expected(PAIRS, perm[8 * i:8 * i + 8]))


def test_the_shuffle_is_a_deterministic_permutation_new_each_epoch() -> None:
    orders = [epoch_order(1000, 5, e) for e in range(4)]
    for order in orders:
        np.testing.assert_array_equal(np.sort(order), np.arange(1000))
    for a in range(4):
        for b in range(a + 1, 4):
            assert not np.array_equal(orders[a], orders[b])
    np.testing.assert_array_equal(epoch_order(1000, 5, 2), orders[2])
    assert not np.array_equal(epoch_order(1000, 6, 0), orders[0])
    np.testing.assert_array_equal(epoch_order(1000, None, 3), np.arange(1000))
    generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, 1])))
    np.testing.assert_array_equal(generator.permutation(1000), orders[1])


def test_from_info_of_the_tutorial_run() -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        run = elaborate("tutorial/07_train.psk").main.trainings["run"]
        stream = Stream.from_info(run.data, run.sample_type, run.batch_type)
    finally:
        os.chdir(cwd)
    with stream:
        assert (stream.seed, stream.batch_size, stream.steps_per_epoch) == (3, 8, 32)
        x, y = next(stream)
        want = _expected(PAIRS, np.random.default_rng([3, 0]).permutation(256)[:8])
        _assert_same((x, y), want)
        np.testing.assert_allclose(y, 2 * x + 1, rtol=1e-6, atol=1e-6)  # the data's law


def test_a_one_tensor_sample_is_one_array_in_the_files_dtype(tmp_path: Path) -> None:
    path = tmp_path / "one.psk.d"
    values = np.arange(30, dtype=np.float32).reshape(10, 3)
    write_stream(path, "ℝ[feature: 3]", [(3,)], values, dtype="f32")
    feature = TensorType((Axis("feature", 3),))
    with Stream.open(str(path), feature, 4) as stream:
        batch = next(stream)
        assert isinstance(batch, np.ndarray) and batch.dtype == np.dtype("<f4")
        np.testing.assert_array_equal(batch, values[:4])


# --- the last partial batch --------------------------------------------------------------

def test_the_last_partial_batch_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "odd.psk.d"
    _write_pairs(path, 21)
    with Stream.open(str(path), PAIR, 8) as stream:
        assert stream.steps_per_epoch == 2
        seen = [next(stream) for _ in range(2)]
        assert stream.position == Position(1, 0)
        _assert_same(seen[1], _expected(path, np.arange(8, 16)))  # 16…20 never come
        _assert_same(next(stream), _expected(path, np.arange(8)))
    with Stream.open(str(path), PAIR, 8, seed=1) as stream:
        for epoch in range(2):
            kept = np.random.default_rng([1, epoch]).permutation(21)[:16]
            for i in range(2):
                _assert_same(next(stream), _expected(path, kept[8 * i:8 * i + 8]))


@pytest.mark.parametrize("seed", [1, None], ids=["shuffled", "file-order"])
@pytest.mark.parametrize("drawn", ["c", "numpy"])
def test_places_across_epochs_are_each_epochs_whole_batches(tmp_path: Path, seed,
                                                            drawn: str) -> None:
    """`Stream.places` (what a native call that runs on across epochs' ends reads): the
    places of each epoch it spans, each epoch's order cut to its whole batches (21 samples,
    B = 4: 5 batches, one sample dropped), one epoch after another; from the middle of an
    epoch, from its start, over one, two and seven epochs' ends, with the epochs' orders
    drawn in C or by numpy. Within an epoch, the epoch's order itself."""
    path = tmp_path / "odd.psk.d"
    _write_pairs(path, 21)
    whole = [epoch_order(21, seed, e)[:20] for e in range(12)]
    flat = np.concatenate(whole)  # every epoch's places, one after another
    with Stream.open(str(path), PAIR, 4, seed=seed) as stream:
        if drawn == "numpy":
            stream._filler = False  # as without the C library
        for (epoch, index), steps in [((0, 0), 3), ((0, 3), 2), ((0, 3), 3), ((1, 0), 5),
                                      ((1, 0), 6), ((1, 4), 2), ((2, 2), 11), ((2, 4), 35),
                                      ((3, 0), 40), ((3, 1), 4)]:
            order, first = stream.places(Position(epoch, index), steps)
            start = (5 * epoch + index) * 4
            got = order[first:first + 4 * steps]
            assert got.tolist() == flat[start:start + 4 * steps].tolist(), (epoch, index,
                                                                           steps)
            if index + steps <= 5:
                assert order is stream.order(epoch)  # no copy within an epoch


def test_advance_runs_on_across_epochs(tmp_path: Path) -> None:
    """`Stream.advance(n)` lands where n reads of `__next__` do, across epochs' ends."""
    path = tmp_path / "odd.psk.d"
    _write_pairs(path, 21)
    with Stream.open(str(path), PAIR, 4) as moved, Stream.open(str(path), PAIR, 4) as read:
        for n in (1, 4, 5, 6, 11, 3):
            moved.advance(n)
            for _ in range(n):
                next(read)
            assert moved.position == read.position
        with pytest.raises(ValueError):
            moved.advance(0)


def test_fewer_samples_than_one_batch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "few.psk.d"
    _write_pairs(path, 5)
    with pytest.raises(DataError, match=r"few\.psk\.d: 5 samples do not fill one batch of 8"):
        Stream.open(str(path), PAIR, 8)


# --- resume ------------------------------------------------------------------------------

def test_resume_mid_epoch_continues_with_the_same_batches() -> None:
    sample, batch = _pair_types(4)
    info = _info(PAIRS, 8, 3)
    with Stream.from_info(info, sample, batch) as whole:
        reference = [next(whole) for _ in range(3 * 32)]
    with Stream.from_info(info, sample, batch) as first:
        for _ in range(45):
            next(first)
        saved = json.loads(json.dumps(first.state()))
    assert saved == {"epoch": 1, "index": 13, "seed": 3, "batch_size": 8, "count": 256}
    with Stream.from_state(info, sample, batch, saved) as resumed:
        for want in reference[45:]:
            _assert_same(next(resumed), want)


@pytest.mark.parametrize("change, message", [
    ({"seed": 4}, "saved for seed 4; this run has seed 3"),
    ({"batch_size": 16}, "saved for batch_size 16; this run has batch_size 8"),
    ({"count": 300}, "saved for count 300; this run has count 256"),
    ({"index": 32}, "no batch 32 in epoch 1: an epoch has 32 batches"),
    ({"epoch": -1}, "`epoch` is -1, not a natural number"),
])
def test_a_state_for_other_batches_is_refused(change: dict[str, int], message: str) -> None:
    sample, batch = _pair_types(4)
    state = {"epoch": 1, "index": 13, "seed": 3, "batch_size": 8, "count": 256} | change
    with pytest.raises(DataError, match=message):
        Stream.from_state(_info(PAIRS, 8, 3), sample, batch, state)


def test_a_state_without_a_key_is_refused() -> None:
    sample, batch = _pair_types(4)
    with pytest.raises(DataError, match="lacks `index`, `count`"):
        Stream.from_state(_info(PAIRS, 8, 3), sample, batch,
                          {"epoch": 0, "seed": 3, "batch_size": 8})


# --- a file that does not fit ------------------------------------------------------------

def test_a_header_of_another_width_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "wide.psk.d"
    _write_pairs(path, 16, width=8)
    sample, batch = _pair_types(4)
    with pytest.raises(DataError) as e:
        Stream.from_info(_info(path, 8, None), sample, batch)
    assert str(e.value) == (f"{path}:2: the file declares samples of type "
                            "(ℝ[model: 8], ℝ[model: 8]), but the training run expects "
                            "(ℝ[model: 4], ℝ[model: 4]) (it declared (ℝ[model: 4], "
                            "ℝ[model: 4]) when the program was checked)")


def test_names_are_matched_as_the_elaborator_matches_them(tmp_path: Path) -> None:
    unnamed = tmp_path / "unnamed.psk.d"
    write_stream(unnamed, "(R[4], R[4])", [(4,), (4,)], (np.ones((8, 4)), np.zeros((8, 4))))
    with Stream.open(str(unnamed), PAIR, 8) as stream:
        _assert_same(next(stream), (np.ones((8, 4)), np.zeros((8, 4))))
    other = tmp_path / "other.psk.d"
    write_stream(other, "(ℝ[model: 4], ℝ[hidden: 4])", [(4,), (4,)],
                 (np.ones((8, 4)), np.zeros((8, 4))))
    with pytest.raises(DataError, match=r"declares samples of type \(ℝ\[model: 4\], "
                       r"ℝ\[hidden: 4\]\), but the training run expects"):
        Stream.open(str(other), PAIR, 8)


def test_a_header_of_another_type_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "one.psk.d"
    write_stream(path, "ℝ[model: 8]", [(8,)], np.zeros((16, 8)))
    with pytest.raises(DataError, match=r"one\.psk\.d:2: the file declares samples of type "
                       r"ℝ\[model: 8\], but the training run expects \(ℝ\[model: 4\]"):
        Stream.open(str(path), PAIR, 8)


def test_a_file_changed_after_the_program_was_checked_is_refused(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "tutorial", tmp_path / "tutorial")
    run = elaborate(str(tmp_path / "tutorial" / "07_train.psk")).main.trainings["run"]
    data = tmp_path / "tutorial" / "data" / "pairs.psk.d"
    _write_pairs(data, 256, width=5)
    with pytest.raises(DataError) as e:
        Stream.from_info(run.data, run.sample_type, run.batch_type)
    assert str(e.value) == (
        f"{run.data.resolved}:2: the file declares samples of type (ℝ[model: 5], ℝ[model: 5]), "
        "but the training run expects (ℝ[model: 4], ℝ[model: 4]) (it declared "
        "(ℝ[model: 4], ℝ[model: 4]) when the program was checked)")


def test_a_truncated_file_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.psk.d"
    _write_pairs(path, 16)
    os.truncate(path, path.stat().st_size - 10)
    with pytest.raises(DataError) as e:
        Stream.open(str(path), PAIR, 8)
    assert "\n" not in str(e.value)
    assert str(e.value) == (f"{path}: the file is truncated: it ends 54 bytes into sample 15 "
                            "of the 16 its header promises (64 bytes each)")


def test_a_file_cut_while_it_is_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cut.psk.d"
    _write_pairs(path, 16)
    stream = Stream.open(str(path), PAIR, 8)
    next(stream)
    os.truncate(path, read_header(path, [(4,), (4,)]).data_offset + 12 * 64 + 3)
    with pytest.raises(DataError, match=r"truncated: it ends 3 bytes into sample 12 of the 16"):
        next(stream)
    stream.close()
    with pytest.raises(DataError, match="the stream is closed"):
        stream.read(Position(0, 0))


# --- streaming ---------------------------------------------------------------------------

def _sparse_pairs(path: Path, count: int, width: int) -> int:
    """A data file of `count` zero samples whose data is a hole: big, yet costs no disk."""
    header = (f"presk-data/1\nsample: (ℝ[model: {width}], ℝ[model: {width}])\n"
              f"dtype: f64\ncount: {count}\nend\n").encode()
    with open(path, "wb") as f:
        f.write(header)
        f.truncate(len(header) + count * 2 * width * 8)
    return len(header)


def test_a_large_file_streams_batch_by_batch(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "large.psk.d"
    count, width, steps = 1_000_000, 256, 200
    _sparse_pairs(path, count, width)  # 4 GB of samples
    read: list[int] = []
    preadv = os.preadv

    def spy(fd: int, buffers: list[memoryview], offset: int) -> int:
        read.append(sum(len(b) for b in buffers))
        return preadv(fd, buffers, offset)

    def whole(*args: object, **kwargs: object) -> None:
        raise AssertionError("the stream read the file through a whole-file reader")

    monkeypatch.setattr(os, "preadv", spy)
    monkeypatch.setattr(datafile, "iter_samples", whole)
    monkeypatch.setattr(np, "fromfile", whole)
    tracemalloc.start()
    try:
        with Stream.open(str(path), _pair_types(width)[0], 8, seed=0) as stream:
            for _ in range(steps):
                x, y = next(stream)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert x.shape == (8, width) and not x.any()
    assert sum(read) == steps * 8 * 2 * width * 8  # the batches' samples and nothing else
    assert peak < 16 * 2**20  # one epoch's order (8 MB) and a batch, not 4 GB
