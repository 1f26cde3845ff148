"""presk/train/history.py: a run's step records as columns read as the list of records."""

from __future__ import annotations

import ctypes

import numpy as np

from presk.train.history import History, StepRecord


def _records(n: int, start: int = 1) -> list[StepRecord]:
    rng = np.random.default_rng(0)
    return [StepRecord(start + i, i // 7, float(rng.normal()), float(rng.random()))
            for i in range(n)]


def test_append_extend_read_back_the_same_records_past_growth() -> None:
    want = _records(2500)  # past the first 1024 rows: the columns grow twice
    h = History(want[:10])
    h.extend(want[10:2000])
    for r in want[2000:]:
        h.append(r)
    assert len(h) == 2500 and h == want and list(h) == want
    assert h[0] == want[0] and h[-1] == want[-1] and h[1234] == want[1234]
    assert list(h[2490:]) == want[2490:] and h[::2] == want[::2]
    assert h.losses.tolist() == [r.loss for r in want]
    h.clear()
    assert len(h) == 0 and not h and h == []


def test_reserve_and_commit_take_what_a_native_caller_wrote() -> None:
    h = History(_records(1020))
    losses, lrs = [0.1 * i for i in range(9)], [1.0 / (i + 1) for i in range(9)]
    loss_at, lr_at = h.reserve(9)  # 1029 rows: the columns grow, the addresses follow
    ctypes.memmove(loss_at, np.array(losses).ctypes.data, 72)
    ctypes.memmove(lr_at, np.array(lrs).ctypes.data, 72)
    span = h.commit(9, 1021, 4)
    want = [StepRecord(1021 + i, 4, losses[i], lrs[i]) for i in range(9)]
    assert len(span) == 9 and span == want and span[-1] == want[-1]
    assert h[1020:] == want and len(h) == 1029 and h[:1020] == _records(1020)


def test_commit_across_epochs_numbers_each_rows_epoch() -> None:
    """A native call that began at batch `index` of an epoch and ran on across epochs'
    ends (7 steps an epoch): each row's epoch, from the call's first; without
    `steps_per_epoch`, every row in the one epoch given."""
    h = History()
    for first, epoch, index, n in [(1, 0, 0, 7), (8, 1, 0, 9), (17, 2, 2, 12), (29, 4, 0, 1),
                                   (30, 4, 1, 30)]:
        h.reserve(n)
        h.commit(n, first, epoch, index, 7)
    steps = [r.step for r in h]
    assert steps == list(range(1, 60))
    assert [r.epoch for r in h] == [(s - 1) // 7 for s in steps]
    h.reserve(3)
    span = h.commit(3, 60, 9)  # one epoch: the old form
    assert [r.epoch for r in span] == [9, 9, 9]
