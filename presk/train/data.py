"""The data stream of a training run: `stream "f.psk.d" |> shuffle(seed = s) |> batch(B = n)`.

A `Stream` turns a `.psk.d` file (docs/data.md) into the batches the objective takes, in an
order that is a pure function of the position `(epoch, index)`:

- **Order.** Without `shuffle`, every epoch reads the file in order. With
  `shuffle(seed = s)`, epoch `e` reads the samples in the order
  `numpy.random.Generator(numpy.random.PCG64(numpy.random.SeedSequence([s, e]))).permutation(count)`
  (`epoch_order`): a new permutation each epoch, the same one in every run, and one that a
  PyTorch reference reproduces with the same two lines of numpy.
- **Batches.** Batch `i` of an epoch is the samples at places `i·B … i·B + B − 1` of that
  epoch's order, each tensor stacked along a new leading batch axis: `(x, y)` with `x` of
  shape `[B, 4]`. A file of `count` samples gives `count // B` batches an epoch; the last
  `count mod B` samples of each epoch's order are dropped (torch's `drop_last=True`),
  because the entry is compiled for one fixed `B`. With a shuffle, the dropped samples
  differ between epochs, so none is left out for good.
- **Streaming.** Opening reads the header only. A batch is read with one positioned read
  per sample (`os.preadv`, at `data_offset + i · sample_bytes`) straight into the batch's
  arrays; nothing else of the file is read or kept, so a file larger than memory trains.
  The memory a stream holds is one epoch's order (8 bytes a sample) and the batch; a
  native step that reads batches across an epoch's end adds the places its call spans
  (`places`: 8 bytes a place, at most `steps per call × B`).
- **Resume.** `state()` is a small JSON-able dict holding the position of the next batch
  and what the order depends on; `Stream.from_state` reopens the file there and refuses a
  state saved for another seed, batch size or sample count. Because the order is a pure
  function of the position, a resumed run reads exactly the batches an uninterrupted one
  would have.

The elaborator checked the type the file declared when the program was checked
(`DataInfo.file_sample`) against the run's sample type. The file may have changed since (a
regenerated file, a resumed run days later), so opening reads the header again and applies
the elaborator's own rule (`frontend.training._same_sample`, reused, not copied) to the
type it declares now; the reader checks the file's size against the header.
"""

from __future__ import annotations

import math
import os
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeAlias

import numpy as np

from . import native_order
from ..datafile import DataFileError, Header, read_header
from ..frontend.training import _same_sample as same_sample
from ..frontend.types import TupleT
from ..shapes import TensorType

if TYPE_CHECKING:
    from ..frontend.program import DataInfo
    from ..frontend.types import Type

Batch: TypeAlias = "tuple[np.ndarray, ...] | np.ndarray"
"""A batch as the objective takes it: a tuple of arrays for a tuple sample type, else one."""

STATE_KEYS = ("epoch", "index", "seed", "batch_size", "count")
_IOV_MAX = 1024
"""Buffers one `preadv` call may take (POSIX guarantees at least 16, Linux allows 1024)."""


class DataError(DataFileError):
    """A data stream that cannot feed the run: one line that names the file and says why.

    A subclass of the reader's `DataFileError`, so one `except` catches both; the reader's
    own errors surface re-raised as a DataError with the reader's message.
    """


@dataclass(frozen=True, order=True)
class Position:
    """Where a stream is: the next batch to read is batch `index` of epoch `epoch`."""

    epoch: int
    index: int


def epoch_order(count: int, seed: int | None, epoch: int) -> np.ndarray:
    """The sample indices of epoch `epoch` in the order a stream reads them.

    `seed=None` (no `shuffle`) is the file's order. Otherwise a permutation drawn by numpy's
    PCG64 seeded with the SeedSequence of `[seed, epoch]`: deterministic from the pair, and
    independent between epochs. This is the documented generator a reference reproduces.
    """
    if seed is None:
        return np.arange(count, dtype=np.int64)
    native = native_order.epoch_order(count, seed, epoch)  # the same bits, in C
    if native is not None:
        return native
    return numpy_epoch_order(count, seed, epoch)


def numpy_epoch_order(count: int, seed: int, epoch: int) -> np.ndarray:
    """`epoch_order` of a shuffled stream, drawn by numpy itself."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, epoch])))
    return rng.permutation(count)


class Stream:
    """Batches of a data file in the order of docs/training.md, read one batch at a time.

    Iterating yields batches forever, epoch after epoch: the training loop decides when to
    stop (`epochs × steps_per_epoch` steps). `read(position)` reads any batch without
    moving the stream. Close the stream (or use it as a context manager) to release the file.
    """

    def __init__(self, header: Header, fd: int, seed: int | None, batch_size: int,
                 is_tuple: bool) -> None:
        """Use `from_info` or `open`: they check the file this takes as checked."""
        self.header = header
        self.seed = seed
        self.batch_size = batch_size
        self.is_tuple = is_tuple
        self.steps_per_epoch = header.count // batch_size
        self.position = Position(0, 0)
        self._fd = fd
        self._close = weakref.finalize(self, os.close, fd)
        self._tensor_bytes = [math.prod(s) * header.itemsize for s in header.shapes]
        self._order_epoch = -1  # the epoch whose order `_order` holds (-1: none yet)
        self._order = np.empty(header.count, np.int64)  # refilled in place each epoch
        self._order_at = self._order.ctypes.data  # its address (`.ctypes` costs ~1 µs)
        self._seam = np.empty(0, np.int64)  # a call's places across epochs (`places`)
        self._seam_at = self._seam.ctypes.data
        self._filler: Callable[[int, int, int, int], bool] | None | bool = None  # C's
        # `fill_epochs` of this stream (made at its first use; False: none, numpy's path)

    # ---- opening ------------------------------------------------------------------------

    @classmethod
    def from_info(cls, info: DataInfo, sample_type: Type, batch_type: Type) -> Stream:
        """The stream of a training run's `data` item, at the start of epoch 0.

        `sample_type` and `batch_type` are the run's (`TrainingInfo.sample_type`,
        `.batch_type`); they fix the shape of a batch: a tuple of arrays when the sample is
        a tuple. Raises DataError when the file no longer declares `info.file_sample`.
        """
        _check_batch_type(sample_type, batch_type, info.batch_size)
        return cls.open(info.resolved, sample_type, info.batch_size, seed=info.shuffle_seed,
                        checked_as=info.file_sample)

    @classmethod
    def open(cls, path: str, sample_type: Type, batch_size: int, *, seed: int | None = None,
             checked_as: str | None = None) -> Stream:
        """A stream of the file at `path`, whose header must declare `sample_type`.

        The declared type is read by the language's type parser and matched by the
        elaborator's own rule (sizes equal, names equal where both are named), applied to
        the file as it is now. `checked_as` is what the file declared when the program was
        checked, named in the error when the file has changed since. Reads the header
        only; the file stays open until `close()`.
        """
        if batch_size < 1:
            raise ValueError(f"a batch holds at least one sample, not {batch_size}")
        header = _header(path)
        declared = _declared_type(header)
        if not same_sample(declared, sample_type):
            then = f" (it declared {checked_as} when the program was checked)" \
                if checked_as is not None and checked_as != str(declared) else ""
            raise DataError(f"{header.where('sample')}: the file declares samples of type "
                            f"{declared}, but the training run expects {sample_type}{then}")
        if header.count < batch_size:
            raise DataError(f"{path}: {header.count} samples do not fill one batch of "
                            f"{batch_size}: a run needs at least one full batch")
        fd = _open_checked(path, header)
        return cls(header, fd, seed, batch_size, isinstance(sample_type, TupleT))

    @classmethod
    def open_as_declared(cls, path: str, batch_size: int, *, seed: int | None = None
                         ) -> Stream:
        """A stream of the file at `path`, its samples of the type its header declares
        (no training run's type to check it against: a benchmark's batch file)."""
        return cls.open(path, _declared_type(_header(path)), batch_size, seed=seed)

    @classmethod
    def from_state(cls, info: DataInfo, sample_type: Type, batch_type: Type,
                   state: Mapping[str, Any]) -> Stream:
        """The stream of `from_info`, moved to the position a checkpoint saved (`state()`)."""
        stream = cls.from_info(info, sample_type, batch_type)
        try:
            stream.restore(state)
        except BaseException:
            stream.close()
            raise
        return stream

    def close(self) -> None:
        """Release the file; the stream reads nothing after this."""
        self._close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- where it is --------------------------------------------------------------------

    def state(self) -> dict[str, int | None]:
        """The position of the next batch and what the order depends on, for a checkpoint.

        Keys: `epoch`, `index` (the next batch), `seed` (null without shuffle),
        `batch_size`, `count` (the file's samples).
        """
        return {"epoch": self.position.epoch, "index": self.position.index, "seed": self.seed,
                "batch_size": self.batch_size, "count": self.header.count}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Move to a saved position, refusing one saved for another order of batches."""
        missing = [k for k in STATE_KEYS if k not in state]
        if missing:
            raise DataError(f"{self.header.path}: the saved data position lacks "
                            + ", ".join(f"`{k}`" for k in missing))
        mine = self.state()
        differ = [k for k in ("seed", "batch_size", "count") if state[k] != mine[k]]
        if differ:
            saved = ", ".join(f"{k} {state[k]}" for k in differ)
            now = ", ".join(f"{k} {mine[k]}" for k in differ)
            raise DataError(f"{self.header.path}: the data position was saved for {saved}; "
                            f"this run has {now}: resuming would read other batches")
        self.seek(Position(_natural(state, "epoch", self.header.path),
                           _natural(state, "index", self.header.path)))

    def seek(self, position: Position) -> None:
        """Make `position` the next batch to read."""
        if not 0 <= position.index < self.steps_per_epoch or position.epoch < 0:
            raise DataError(f"{self.header.path}: no batch {position.index} in epoch "
                            f"{position.epoch}: an epoch has {self.steps_per_epoch} batches")
        self.position = position

    # ---- reading ------------------------------------------------------------------------

    def __iter__(self) -> Stream:
        return self

    def __next__(self) -> Batch:
        """The batch at the position; then the position moves to the next one."""
        batch = self.read(self.position)
        epoch, index = self.position.epoch, self.position.index + 1
        if index == self.steps_per_epoch:
            epoch, index = epoch + 1, 0
        self.position = Position(epoch, index)
        return batch

    def order(self, epoch: int) -> np.ndarray:
        """The sample indices of an epoch in reading order, kept for the latest epoch
        asked: the same array each time, refilled in place when another epoch is asked
        for (so a native step that bound its address once reads the new epoch there; a
        caller that keeps an epoch's order must copy it)."""
        if epoch != self._order_epoch:
            self._fill_order(epoch)
        return self._order

    def _fill_order(self, epoch: int) -> None:
        """`epoch_order(count, seed, epoch)` written into `_order`, in C where it can be
        (no array made); without a shuffle every epoch's order is the file's, written once."""
        count = self.header.count
        if self.seed is None:
            if self._order_epoch < 0:
                self._order[:] = np.arange(count, dtype=np.int64)
        elif not self._draw(epoch, 1, count, self._order_at):
            self._order[:] = numpy_epoch_order(count, self.seed, epoch)
        self._order_epoch = epoch

    def _draw(self, epoch: int, epochs: int, keep: int, address: int) -> bool:
        """`native_order.fill_epochs` of this stream's count and seed (its function made
        once a stream); False, nothing written, where numpy must draw them."""
        if self._filler is None:
            self._filler = native_order.filler(self.header.count, self.seed) or False
        return bool(self._filler) and self._filler(epoch, epochs, keep, address)

    def places(self, position: Position, steps: int) -> tuple[np.ndarray, int]:
        """The sample indices of `steps` batches from `position` on, as one array the
        native step reads them from: `(order, first)`, batch j's samples at places
        `first + j·B …` of `order`. Within one epoch, that epoch's `order` itself (no
        copy). Across epochs, the stream's seam: the places the steps read of each epoch
        they span, one epoch after another, each epoch's order cut to its whole batches
        (the dropped `count mod B` never read). The epochs a call spans whole are drawn
        straight into the seam, all in one C call (`native_order.fill_epochs`); a part
        of an epoch is copied from `order` (the epoch the position is in, and the one the
        steps end in: the next call begins there). The seam is the same array from call
        to call (it grows only for a longer call), so a caller binds its address once;
        the memory is one epoch's order and the seam, not every epoch a call spans."""
        B, per_epoch = self.batch_size, self.steps_per_epoch
        epoch, index = position.epoch, position.index
        if index + steps <= per_epoch:
            return self.order(epoch), index * B
        seam, keep, need = self._seam_for(steps), per_epoch * B, steps * B
        at = 0
        if index > 0 or epoch == self._order_epoch:  # a part, or an epoch drawn already
            at = (per_epoch - index) * B
            seam[:at] = self.order(epoch)[index * B:keep]
            epoch += 1
        whole = (need - at) // keep
        if whole:
            self._fill_whole(epoch, whole, at)
            at, epoch = at + whole * keep, epoch + whole
        if at < need:
            seam[at:need] = self.order(epoch)[:need - at]
        return seam, 0

    def _seam_for(self, steps: int) -> np.ndarray:
        """The seam, with room for `steps` batches and the places a whole epoch's draw
        writes past its kept ones (`fill_epochs`)."""
        size = steps * self.batch_size + self.header.count - self.steps_per_epoch * \
            self.batch_size
        if self._seam.size < size:
            self._seam = np.empty(size, np.int64)
            self._seam_at = self._seam.ctypes.data
        return self._seam

    def _fill_whole(self, epoch: int, epochs: int, at: int) -> None:
        """Epochs `epoch …` (`epochs` of them), each cut to its whole batches, into the
        seam from place `at`: in one C call where it can be, else numpy's draws one by
        one (the file's order without a shuffle)."""
        keep = self.steps_per_epoch * self.batch_size
        if self.seed is not None and self._draw(epoch, epochs, keep, self._seam_at + 8 * at):
            return
        rows = self._seam[at:at + epochs * keep].reshape(epochs, keep)
        for k in range(epochs):
            rows[k] = self.order(epoch + k)[:keep]

    def indices(self, position: Position) -> list[int]:
        """The file's indices of the samples of the batch at `position`, in batch order."""
        first = position.index * self.batch_size
        return self.order(position.epoch)[first:first + self.batch_size].tolist()

    def read(self, position: Position) -> Batch:
        """The batch at `position`, read from the file; the stream does not move."""
        if not self._close.alive:
            raise DataError(f"{self.header.path}: the stream is closed")
        tensors = [np.empty((self.batch_size,) + s, self.header.numpy_dtype)
                   for s in self.header.shapes]
        views = [memoryview(t).cast("B") for t in tensors]
        indices = self.indices(position)
        if self.seed is None:
            self._read_run(views, indices[0], len(indices))
        else:
            self._read_each(views, indices)
        return tuple(tensors) if self.is_tuple else tensors[0]

    def _read_each(self, views: list[memoryview], indices: list[int]) -> None:
        """Read sample `indices[k]` into row k of the batch: one positioned read a sample,
        scattering its tensors straight into their arrays (no copy after the read)."""
        size, base, fd = self.header.sample_bytes, self.header.data_offset, self._fd
        parts = list(zip(views, self._tensor_bytes))
        for k, i in enumerate(indices):
            if os.preadv(fd, [v[k * b:(k + 1) * b] for v, b in parts], base + i * size) != size:
                self._truncated()

    def _read_run(self, views: list[memoryview], first: int, n: int) -> None:
        """Read the `n` consecutive samples from file index `first` into the batch's rows,
        as few positioned reads as the system's limit on buffers a call allows."""
        per_call = max(1, _IOV_MAX // len(views))
        for start in range(0, n, per_call):
            rows = range(start, min(n, start + per_call))
            buffers = [v[k * b:(k + 1) * b] for k in rows
                       for v, b in zip(views, self._tensor_bytes)]
            offset = self.header.data_offset + (first + start) * self.header.sample_bytes
            got = os.preadv(self._fd, buffers, offset)
            if got != len(rows) * self.header.sample_bytes:
                self._truncated()

    # ---- the memory map a native step gathers its batches from ----------------------

    def memory_map(self) -> np.ndarray:
        """The file's samples as read-only bytes (`count · sample_bytes`, from the first
        sample), mapped from the open descriptor: what a batch reads, without a read. The
        map lives as long as the array; a file renamed over this one does not change it."""
        import mmap
        if not self._close.alive:
            raise DataError(f"{self.header.path}: the stream is closed")
        size = self.header.data_offset + self.header.count * self.header.sample_bytes
        self.check_size()
        mapped = mmap.mmap(self._fd, size, access=mmap.ACCESS_READ)
        return np.frombuffer(mapped, np.uint8, self.header.count * self.header.sample_bytes,
                             self.header.data_offset)

    def check_size(self) -> None:
        """Refuse (DataError) a file cut shorter than its header promises since it was
        opened: a native step reads its samples through the map, where a page past the
        end would be a fault, not a short read."""
        if os.fstat(self._fd).st_size < \
                self.header.data_offset + self.header.count * self.header.sample_bytes:
            self._truncated()

    def advance(self, steps: int) -> None:
        """Move the position `steps` batches on, across epochs as `__next__` does (what
        `steps` reads of `__next__` would do, without reading)."""
        if steps < 1:
            raise ValueError(f"cannot advance {steps} batches from {self.position}")
        epochs, index = divmod(self.position.index + steps, self.steps_per_epoch)
        self.position = Position(self.position.epoch + epochs, index)

    def _truncated(self) -> None:
        """A read came back short: the file shrank after it was opened. Say where it now
        ends, in the reader's words."""
        have = os.fstat(self._fd).st_size - self.header.data_offset
        whole, part = divmod(max(have, 0), self.header.sample_bytes)
        raise DataError(f"{self.header.path}: the file is truncated: it ends {part} bytes "
                        f"into sample {whole} of the {self.header.count} its header promises "
                        f"({self.header.sample_bytes} bytes each)")


# ---- helpers ----------------------------------------------------------------------------

def _header(path: str) -> Header:
    """The file's header, with the reader's error re-raised as a DataError (one line)."""
    try:
        return read_header(path)
    except DataFileError as e:
        raise DataError(str(e)) from None


def _declared_type(header: Header) -> Type:
    """The sample type the header declares, read by the language's type parser: printed,
    it compares with `DataInfo.file_sample`, which the elaborator printed the same way."""
    from ..frontend import ast as A
    from ..frontend.diagnostics import CompileError
    from ..frontend.elaborate import Elaborator
    from ..frontend.parser import parse_type
    from ..frontend.program import FileInfo
    try:
        tree = parse_type(header.path, header.sample, header.lines.get("sample", 1))
        info = FileInfo(header.path, A.SourceFile(header.path, "", []))
        return Elaborator().type(info, tree, None)
    except CompileError as e:
        raise DataError(f"{header.where('sample')}: the sample type `{header.sample}` does "
                        f"not read: {e.diagnostic.message}") from None


def _open_checked(path: str, header: Header) -> int:
    """Open the file for positioned reads, checking it is still the file the header sized."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise DataError(f"{path}: cannot read: {e.strerror or e}") from None
    size = os.fstat(fd).st_size
    want = header.data_offset + header.count * header.sample_bytes
    if size != want:
        os.close(fd)
        raise DataError(f"{path}: the file changed while it was opened: "
                        f"{size} bytes, its header promises {want}")
    return fd


def _check_batch_type(sample_type: Type, batch_type: Type, batch_size: int) -> None:
    """The batch type must be the sample type with one more leading axis, tensor by tensor:
    the elaborator guarantees it, so a mismatch is the caller's mistake, not the user's."""
    samples, batches = _leaves(sample_type), _leaves(batch_type)
    if isinstance(sample_type, TupleT) != isinstance(batch_type, TupleT) or \
            len(samples) != len(batches) or \
            any(not b.axes or b.axes[1:] != s.axes for s, b in zip(samples, batches)):
        raise ValueError(f"batch type {batch_type} is not sample type {sample_type} "
                         f"with a leading batch axis (B = {batch_size})")


def _leaves(t: Type) -> list[TensorType]:
    if isinstance(t, TupleT):
        return [leaf for item in t.items for leaf in _leaves(item)]
    if isinstance(t, TensorType):
        return [t]
    raise ValueError(f"a sample is tensors, not {t}")


def _natural(state: Mapping[str, Any], key: str, path: str) -> int:
    value = state[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DataError(f"{path}: the saved data position's `{key}` is {value!r}, "
                        "not a natural number")
    return value
