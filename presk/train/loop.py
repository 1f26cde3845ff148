"""The training loop of a `training run`: the objective's value and gradient as native code
(presk/train/objective.py), the optimizer's update (presk/train/optim.py), the data stream
(presk/train/data.py), checkpoints (presk/train/checkpoint.py) and a log.

One step: the next batch of the stream; `loss, grads = objective(params, batch)`; the
optimizer updates the parameters in place (f64 master copies; the objective rounds them
into its buffers' types). Every `checkpoint every N steps` a checkpoint holds the
parameters, the optimizer's state, the step and the stream's position, so that a run
resumed from it computes the same bits as one never stopped.

A run writes into its directory: `log.csv` (step, epoch, loss, lr), the checkpoints
(`ckpt/` or the directory the run names), and at the end `loss.png`.
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..analysis import entry as E
from ..analysis.artifact import write_atomic
from ..frontend.program import TrainingInfo
from ..pipeline.record import load_realization
from .checkpoint import Checkpoint, CheckpointError, check_fits, latest, save
from .data import Stream
from .history import History, StepRecord
from .objective import NativeObjective
from .native_optim import native_from_info
from .native_step import STEPS_PER_CALL, NativeStep, native_step
from .optim import Optimizer

CALL_SECONDS = 0.05
"""About the most time one native call of `Trainer.advance` takes: the progress bar, Ctrl-C
and `stop()` act between calls, so a model whose step takes milliseconds makes fewer than
`steps_per_call` steps a call (the tutorial's 2.5 µs steps never reach it). Measured as
the calling thread's CPU time, the least a step took in any call so far, so that a call
preempted by other work does not shorten the next ones."""

LOG = "log.csv"
PLOT = "loss.png"
LOG_FIELDS = ("step", "epoch", "loss", "lr")


@dataclass
class Trainer:
    """A run, ready to step: its objective compiled, its parameters, optimizer and stream."""

    training: TrainingInfo
    objective: NativeObjective
    stream: Stream
    optimizer: Optimizer
    params: dict[str, np.ndarray]
    total: int  # steps the run makes in all
    directory: str
    checkpoint_dir: str | None
    step: int = 0
    history: History = field(default_factory=History)
    laid_out: bool = False  # the objective reads and writes the optimizer's arrays
    meta: dict[str, object] = field(default_factory=dict)
    steps_per_call: int = STEPS_PER_CALL  # the native step's most steps a call; 0: none
    native: NativeStep | None = None  # the step in one native call, where it applies
    _made_group: object = field(default=None, repr=False)  # the group whose buffers exist
    _fastest: float = field(default=math.inf, repr=False)  # a native step's least seconds
    _call_steps: int = field(default=1, repr=False)  # the steps CALL_SECONDS hold at that

    @classmethod
    def create(cls, core_module, training: TrainingInfo, directory: str, *, seed: int = 0,
               weights: str | None = None, realization=None, remat: str = "store",
               epochs: int | None = None, steps: int | None = None,
               plan=None, steps_per_call: int = STEPS_PER_CALL) -> Trainer:
        objective = NativeObjective(core_module, training.objective.name, training.dims,
                                    realization, remat, plan=plan)
        stream = Stream.from_info(training.data, training.sample_type, training.batch_type)
        total = steps if steps is not None else \
            (epochs if epochs is not None else training.epochs) * stream.steps_per_epoch
        params = E.weights(objective.prepared, seed, weights)
        ckpt = None
        if training.checkpoint_every:
            ckpt = os.path.join(directory, training.checkpoint_dir or "ckpt")
        # The realization's types name the run (`all-f64`, `f64+9sites+4params`), not its
        # threading: a split never changes bits, so a run resumes under another thread
        # count, and the PyTorch export's train.py (whose kernels are torch's) writes the
        # same name in its checkpoints.
        meta = {"run": training.name, "objective": training.objective.name, "seed": seed,
                "remat": remat, "total": total,
                "realization": load_realization(realization).types_name()}
        trainer = cls(training, objective, stream, native_from_info(training.optimizer, total),
                      params, total, directory, ckpt, meta=meta,
                      steps_per_call=steps_per_call)
        trainer.lay_out()
        return trainer

    def lay_out(self) -> None:
        """Compile the optimizer's update (now, not in the first step) and, where every
        parameter and gradient buffer of the objective has the parameters' dtype, keep the
        parameters in the optimizer's arrays and let the native code read them and write
        the gradient there: a step then copies only the batch."""
        groups = self.optimizer.prepare(self.params)
        self.laid_out = len(groups) == 1 and self.objective.can_bind(groups[0].p.dtype)
        if self.laid_out:
            grp = groups[0]
            self.params = dict(grp.views)
            self.objective.bind(grp.views, self.optimizer.grad_views(grp))
        self.native = None
        if len(groups) == 1 and self.steps_per_call > 0:
            self.native = native_step(self.objective, self.optimizer, groups, self.stream,
                                      self.steps_per_call, rounded=not self.laid_out)
            if self.native is not None:  # the native step updates the group's p in place
                self.params = dict(groups[0].views)

    # ---- resuming ----
    def resume(self, warn: Callable[[str], None]) -> Checkpoint | None:
        """Continue from the newest whole checkpoint of the run's directory, if any."""
        if self.checkpoint_dir is None:
            return None
        ck = latest(self.checkpoint_dir, warn)
        if ck is None:
            return None
        check_fits(ck, self.params)
        for path, value in ck.params.items():
            np.copyto(self.params[path], value)
        try:
            self.optimizer.load_state(ck.optimizer)
        except ValueError as exc:
            raise CheckpointError(f"{ck.path}: {exc}") from None
        self.lay_out()  # loading the state drops the optimizer's arrays
        self.stream.restore(ck.data)
        self.step = ck.step
        return ck

    # ---- stepping ----
    def one_step(self) -> StepRecord:
        epoch = self.stream.position.epoch
        batch = self.stream.__next__()
        values = list(batch) if isinstance(batch, tuple) else [batch]
        lr = self.optimizer.lr_at(self.optimizer.steps)
        if self.laid_out:
            loss = self.objective.call_bound(values)
            self.optimizer.step_laid_out()
        else:
            loss, grads = self.objective(self.params, values)
            self.optimizer.step(self.params, grads)
        self.step += 1
        record = StepRecord(self.step, epoch, loss, lr)
        self.history.append(record)
        return record

    def advance(self, limit: int) -> Sequence[StepRecord]:
        """Up to `limit` steps (at least one), as many in one native call as the step
        program takes (`steps_per_call`) and `CALL_SECONDS` hold at the fastest step
        timed so far (the first call makes one step: its time is not known yet), across
        epochs' ends (the call reads its batches from `Stream.places`: the epochs'
        orders side by side); one `one_step` where there is no native step, or for an
        SGD momentum buffer's first step (a copy). The bits are one_step's, step for
        step, however the steps fall into calls. The native step writes each step's
        loss and learning rate into the history's columns (no Python object a step); the
        records made, each with its own epoch, come back as a Span of the history.

        Why across epochs: the Python around a call (the size check, the orders, the
        history's commit, the stream's move) cost about 14 µs; a call that stopped at
        each epoch's end paid it every 32 steps on the tutorial, not every k."""
        native, opt = self.native, self.optimizer
        if native is None:
            return [self.one_step()]
        grp = opt._groups[0]
        if grp is not self._made_group and not self._make_buffers(grp):
            return [self.one_step()]  # SGD momentum's first step copies the gradient
        stream, history = self.stream, self.history
        where = stream.position
        n = min(limit, native.k, self._call_steps)
        stream.check_size()
        order, first = stream.places(where, n)
        into = history.reserve(n)
        began = time.thread_time()  # CPU time: a call preempted by other work is not slow
        native.run(n, opt.steps, first, order, into)
        per_step = (time.thread_time() - began) / n
        if per_step < self._fastest:  # the least: a cold first call only takes longer
            self._fastest = per_step
            self._call_steps = max(1, int(CALL_SECONDS / per_step)) if per_step > 0 \
                else native.k
        opt.steps += n
        stream.advance(n)
        records = history.commit(n, self.step + 1, where.epoch, where.index,
                                 stream.steps_per_epoch)
        self.step += n
        return records

    def _make_buffers(self, grp) -> bool:
        """Whether the native step can take the group's next step: its optimizer buffers
        exist (AdamW's fresh moments are zeros, as made: made here) — not an SGD momentum
        buffer's first step. Asked once a group (`lay_out` makes new ones), not a call."""
        buffers = self.native.geometry.buffers
        if any(grp.fresh[b] for b in buffers):
            if self.native.geometry.optimizer == "sgd":
                return False
            for name in buffers:
                self.optimizer._made(grp, name)
        self._made_group = grp
        return True

    def due(self) -> bool:
        every = self.training.checkpoint_every
        return bool(every) and self.step % every == 0

    def checkpoint(self, loss: float | None = None) -> str | None:
        """Write a checkpoint of the run as it stands (None without a checkpoint place)."""
        if self.checkpoint_dir is None:
            return None
        meta = dict(self.meta, loss=loss)
        return save(self.checkpoint_dir, Checkpoint(
            self.step, {k: v.copy() for k, v in self.params.items()},
            self.optimizer.state(), self.stream.state(), meta))


def run_steps(trainer: Trainer, log: LogWriter,
              on_step: Callable[[StepRecord], None] | None = None,
              stop: Callable[[], bool] | None = None) -> bool:
    """Step the run to its end: the log appended before each checkpoint it is due (so the
    log always covers the checkpoints), then the rest of the log and a last checkpoint
    (when the last step was not one). `on_step(record)` is told the last step of each
    `advance` (up to `steps_per_call` steps; the progress bar shows the latest only).
    `stop()`, asked before each advance, ends the loop early: False is returned and
    nothing more is written (the caller checkpoints)."""
    every = trainer.training.checkpoint_every
    while trainer.step < trainer.total:
        if stop is not None and stop():
            return False
        limit = trainer.total - trainer.step
        if every:
            limit = min(limit, every - trainer.step % every)
        records = trainer.advance(limit)
        if trainer.due():
            log.flush(trainer.history)
            trainer.checkpoint(records[-1].loss)
        if on_step is not None:
            on_step(records[-1])
    if stop is not None and stop():
        return False
    log.flush(trainer.history)
    if trainer.history and not trainer.due():
        trainer.checkpoint(trainer.history[-1].loss)
    return True


def saved_total(directory: str, training: TrainingInfo) -> int | None:
    """The length (`total`) the newest whole checkpoint of a run directory was made for:
    a resumed run keeps it (its schedule depends on it) unless told otherwise."""
    ck = latest(os.path.join(directory, training.checkpoint_dir or "ckpt"), lambda m: None)
    total = ck.meta.get("total") if ck is not None else None
    return total if isinstance(total, int) else None


def check_same_run(saved: dict, now: dict) -> None:
    """Refuse (CheckpointError) to resume a checkpoint under another run, objective,
    realization or length: the rest of the run would not be the run that was stopped."""
    for key in ("run", "objective", "realization", "total"):
        if key in saved and saved[key] != now.get(key):
            raise CheckpointError(f"the checkpoint was made with {key} {saved[key]!r}, "
                                  f"this run has {now.get(key)!r}")


def resume_run(trainer: Trainer, warn: Callable[[str], None]) -> Checkpoint:
    """Continue the run of the trainer's directory from its newest whole checkpoint (each
    newer one refused is reported by `warn`): its parameters, optimizer state and data
    position, and its log up to the checkpoint. A CheckpointError (no checkpoint, one made
    for another run), DataError or LogError says why it cannot."""
    ck = trainer.resume(warn)
    if ck is None:
        raise CheckpointError(f"{trainer.directory} holds no checkpoint to resume from")
    check_same_run(ck.meta, trainer.meta)
    log_path = os.path.join(trainer.directory, LOG)
    if os.path.exists(log_path):
        trainer.history = History(read_log(log_path, upto=ck.step))
    return ck


# --------------------------------------------------------------------------------------
# The log and the curve
# --------------------------------------------------------------------------------------


def read_log(path: str, upto: int | None = None) -> list[StepRecord]:
    """The log's steps (the first `upto` of them). Rows past those a checkpoint covers may
    be cut short by a kill: a resumed run reads only the ones its checkpoint covers, which
    were whole before the checkpoint was written."""
    records: list[StepRecord] = []
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None or list(reader.fieldnames) != list(LOG_FIELDS):
                raise LogError(f"{path}: its header is not {','.join(LOG_FIELDS)}")
            for row in reader:
                if upto is not None and len(records) == upto:
                    break
                records.append(_record(row, path, reader.line_num, len(records) + 1))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise LogError(f"{path}: cannot read ({exc})") from None
    if upto is not None and len(records) < upto:
        raise LogError(f"{path}: holds {len(records)} steps, the checkpoint is at step "
                       f"{upto}")
    return records


class LogError(Exception):
    """A `log.csv` that does not read (one line naming the file and the row)."""


def _record(row: dict, path: str, line: int, step: int) -> StepRecord:
    try:
        record = StepRecord(int(row["step"]), int(row["epoch"]), float(row["loss"]),
                            float(row["lr"]))
    except (KeyError, TypeError, ValueError):
        raise LogError(f"{path}: line {line} is not a step's row "
                       f"({','.join(LOG_FIELDS)})") from None
    if record.step != step:
        raise LogError(f"{path}: line {line} is step {record.step}, not {step}")
    return record


def write_log(path: str, records: Sequence[StepRecord]) -> None:
    """The whole log, atomically (a resumed run rewrites it up to its checkpoint)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LOG_FIELDS)
    w.writerows(_row(r) for r in records)
    write_atomic(path, buf.getvalue().encode())


class LogWriter:
    """Appends the steps not written yet to `log.csv` (at each checkpoint and at the end),
    after rewriting the file once with the steps it starts from."""

    def __init__(self, path: str, history: Sequence[StepRecord]):
        self.path, self.written = path, len(history)
        write_log(path, history)

    def flush(self, history: Sequence[StepRecord]) -> None:
        with open(self.path, "a", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(
                _row(r) for r in history[self.written:])
        self.written = len(history)


def _row(r: StepRecord) -> list[object]:
    return [r.step, r.epoch, repr(r.loss), repr(r.lr)]


def plot(records: Sequence[StepRecord], path: str, title: str) -> None:
    """The loss curve as a PNG (matplotlib, no display needed): every step's loss, faint,
    and each epoch's mean at its last step, bold — a batch's loss is noisy."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot([r.step for r in records], [r.loss for r in records], linewidth=0.8, alpha=0.35,
            label="each step")
    ends, means = epoch_means(records)
    ax.plot(ends, means, linewidth=2, marker="o", markersize=3, label="epoch mean")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    write_atomic(path, buf.getvalue())


def epoch_means(records: Sequence[StepRecord]) -> tuple[list[int], list[float]]:
    """(each epoch's last step, the mean loss of its steps), in order."""
    ends: list[int] = []
    losses: list[list[float]] = []
    epoch = None
    for r in records:
        if r.epoch != epoch:
            epoch = r.epoch
            ends.append(r.step)
            losses.append([])
        ends[-1] = r.step
        losses[-1].append(r.loss)
    return ends, [sum(x) / len(x) for x in losses]
