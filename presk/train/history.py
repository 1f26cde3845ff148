"""A run's history of steps (`Trainer.history`): each step's record (step, epoch, loss,
learning rate) held in four preallocated numpy columns rather than a list of tuples.

Why columns: the native step (presk/train/native_step.py) makes up to 256 steps a call in
a few microseconds each; building a Python tuple per step cost about as much again. It
now writes each step's loss and learning rate straight into the columns (`reserve` gives
their addresses), and `commit` fills the step and epoch columns with two numpy slice
assignments (a call that runs on across epochs' ends numbers each row's epoch with one
numpy add): the Python a call costs no longer grows with its steps.

A History reads as a sequence of `StepRecord`s (built on access, the same numbers: the
columns hold the f64 values and the integers exactly), compares equal to any sequence of
the same records, and grows by `append`/`extend` as the Python-driven step and a resumed
run's log fill it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, overload

import numpy as np

_FIRST = 1024  # rows allocated at first; doubled whenever a step would not fit


class StepRecord(NamedTuple):
    """One step's row of the log."""

    step: int  # updates done after this one
    epoch: int
    loss: float  # the objective's value before the update
    lr: float


class History(Sequence[StepRecord]):
    """The records of a run's steps, in order, as columns (see the module's docstring)."""

    def __init__(self, records: Iterable[StepRecord] = ()) -> None:
        self._n = 0
        self._ramp = np.arange(64, dtype=np.int64)  # 0, 1, …: a call's steps from its first
        self._offsets = (0, np.empty(0, np.int64))  # (steps an epoch, j // it): `commit`'s
        self._grow(_FIRST)
        self.extend(records)

    def _grow(self, capacity: int) -> None:
        """Columns of `capacity` rows holding the rows so far (new arrays: a Span made
        before keeps the old ones, which still hold its rows)."""
        old = getattr(self, "_cols", None)
        self._cols = (np.empty(capacity, np.int64), np.empty(capacity, np.int64),
                      np.empty(capacity, np.float64), np.empty(capacity, np.float64))
        if old is not None:
            for new, was in zip(self._cols, old):
                new[:self._n] = was[:self._n]
        self._loss_at = self._cols[2].ctypes.data
        self._lr_at = self._cols[3].ctypes.data

    # ---- filling ----
    def reserve(self, n: int) -> tuple[int, int]:
        """Room for n more rows: the addresses (of f64s) where the next row's loss and
        learning rate go, for a native caller to write n of each; then `commit(n, …)`."""
        if self._n + n > self._cols[0].size:
            self._grow(max(2 * self._cols[0].size, self._n + n))
        return self._loss_at + 8 * self._n, self._lr_at + 8 * self._n

    def commit(self, n: int, first_step: int, epoch: int, index: int = 0,
               steps_per_epoch: int = 0) -> Span:
        """The n rows `reserve` made room for, whose losses and learning rates were
        written there: steps first_step, first_step + 1, …, all in `epoch`; or, given
        `steps_per_epoch`, the steps of a call that began at batch `index` of `epoch` and
        ran on across epochs' ends: row r in epoch `epoch + (index + r) // steps_per_epoch`."""
        steps, epochs = self._cols[0], self._cols[1]
        start, stop = self._n, self._n + n
        if n > self._ramp.size:
            self._ramp = np.arange(n, dtype=np.int64)
        np.add(self._ramp[:n], first_step, out=steps[start:stop])
        if steps_per_epoch and index + n > steps_per_epoch:
            offsets = self._epoch_offsets(steps_per_epoch, index + n)[index:index + n]
            np.add(offsets, epoch, out=epochs[start:stop])
        else:
            epochs[start:stop] = epoch
        self._n = stop
        return Span(self._cols, start, stop)

    def _epoch_offsets(self, steps_per_epoch: int, size: int) -> np.ndarray:
        """`j // steps_per_epoch` for j < size (at least), kept: one numpy add a commit
        then numbers the epochs of a call that crosses them."""
        kept = self._offsets
        if kept[0] != steps_per_epoch or kept[1].size < size:
            ramp = np.arange(max(size, 2 * steps_per_epoch), dtype=np.int64)
            kept = self._offsets = (steps_per_epoch, ramp // steps_per_epoch)
        return kept[1]

    def append(self, record: StepRecord) -> None:
        if self._n == self._cols[0].size:
            self._grow(2 * self._n)
        for col, value in zip(self._cols, record):
            col[self._n] = value
        self._n += 1

    def extend(self, records: Iterable[StepRecord]) -> None:
        for record in records:
            self.append(record)

    def clear(self) -> None:
        """Forget every row (a Span made before then reads rows written after)."""
        self._n = 0

    # ---- reading ----
    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> StepRecord: ...

    @overload
    def __getitem__(self, i: slice) -> Span: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, stride = i.indices(self._n)
            if stride != 1:
                return list(self)[i]
            return Span(self._cols, start, max(start, stop))
        return _row(self._cols, _index(i, self._n))

    def __iter__(self) -> Iterator[StepRecord]:
        return iter(Span(self._cols, 0, self._n))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"History({self._n} steps)"

    @property
    def losses(self) -> np.ndarray:
        """The losses, a read-only view (valid until the history grows or is cleared)."""
        view = self._cols[2][:self._n]
        view.flags.writeable = False
        return view


class Span(Sequence[StepRecord]):
    """Rows [start, stop) of a History's columns: what one `Trainer.advance` made. Valid
    until the history is cleared (a later step would then write over its rows)."""

    def __init__(self, cols: tuple[np.ndarray, ...], start: int, stop: int) -> None:
        self._cols, self._start, self._stop = cols, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(self)[i]
        return _row(self._cols, self._start + _index(i, len(self)))

    def __iter__(self) -> Iterator[StepRecord]:
        s, a = self._start, self._stop
        columns = (c[s:a].tolist() for c in self._cols)
        return map(StepRecord._make, zip(*columns))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)


def _index(i: int, n: int) -> int:
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise IndexError(f"step record {i} of {n}")
    return j


def _row(cols: tuple[np.ndarray, ...], j: int) -> StepRecord:
    return StepRecord(int(cols[0][j]), int(cols[1][j]), float(cols[2][j]), float(cols[3][j]))


__all__ = ["History", "Span", "StepRecord"]
