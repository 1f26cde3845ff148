"""`presk train FILE`: run a program's `training run` natively, with a progress bar, a CSV
log, checkpoints, resuming, and the loss curve; `presk train --plot DIR` redraws a run's
curve from its log.

A run writes into one directory (`--out`, by default `runs/<file>-<run>/`): `log.csv`,
the checkpoints (the run's `checkpoint every N steps to "dir/"`, inside it), `loss.png`.
`--resume DIR` continues the run of DIR from its newest whole checkpoint, to the same bits
as a run never stopped. Ctrl-C writes a checkpoint and exits with code 130.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from .common import UsageError, add_plan_argument, positive_whole_number, reported, warn
from .optimize_cmds import add_opt, optimized


def add_train(sub: Any) -> None:
    p = sub.add_parser("train", help="run a program's training run natively (progress, log, "
                       "checkpoints, resume, loss curve)")
    p.add_argument("file", nargs="?", help="the program's main .psk file")
    p.add_argument("--run", dest="run_name", metavar="NAME",
                   help="the training run to make (needed when the file has several)")
    p.add_argument("--epochs", type=positive_whole_number, help="epochs instead of the run's")
    p.add_argument("--steps", type=positive_whole_number, help="stop after this many steps in all")
    p.add_argument("--out", metavar="DIR", help="the run's directory (default runs/<file>-<run>)")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the run of DIR from its newest whole checkpoint")
    p.add_argument("--remat", choices=["store", "recompute"], default="store",
                   help="what the gradient's forward sweep keeps for the reverse one")
    p.add_argument("--realize", metavar="REALIZATION",
                   help="the realization of the objective (a path, @path or inline JSON)")
    add_plan_argument(p)
    p.add_argument("--seed", type=int, default=0, help="seed of the initial weights")
    p.add_argument("--weights", help="initial weights: a safetensors file keyed by path")
    p.add_argument("--steps-per-call", type=_natural, default=None, metavar="K",
                   help="the native step's most steps a call (default 256, across "
                   "epochs' ends; 0: the step driven from Python, one native call each "
                   "for the objective and the update); checkpoints, the log and Ctrl-C "
                   "act between calls")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--plot", metavar="DIR", help="only redraw DIR/loss.png from DIR/log.csv")
    add_opt(p)
    p.set_defaults(run=cmd_train)


def _natural(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number ≥ 0")
    return int(text)


@reported
def cmd_train(args: argparse.Namespace) -> int:
    if args.plot:
        return _replot(args.plot)
    if not args.file:
        raise UsageError("presk train: give the program's .psk file (or --plot DIR)")
    from ..train.loop import LOG
    program, core, training = _load(args)
    directory = args.resume or args.out or os.path.join(
        "runs", f"{os.path.splitext(os.path.basename(args.file))[0]}-{training.name}")
    if args.resume:
        _resume_length(args, training, directory)
    trainer = _trainer(args, core, training, directory)
    log_path = os.path.join(directory, LOG)
    if args.resume:
        from ..train.checkpoint import CheckpointError
        from ..train.data import DataError
        from ..train.loop import LogError, resume_run
        try:
            ck = resume_run(trainer, lambda m: print(f"presk train: {m}", file=sys.stderr))
        except (CheckpointError, DataError, LogError) as exc:
            raise UsageError(f"presk train: {exc}") from None
        print(f"presk train: resuming `{training.name}` at step {ck.step} of {trainer.total}")
    return _run(args, trainer, log_path)


def _resume_length(args: argparse.Namespace, training, directory: str) -> None:
    """A resumed run keeps the length it was started with: from its newest checkpoint
    unless --epochs or --steps say otherwise."""
    from ..train.loop import saved_total
    if args.steps is None and args.epochs is None:
        args.steps = saved_total(directory, training)


def _load(args: argparse.Namespace):
    from ..pipeline import elaborate_program, lower_to_core
    program = elaborate_program(args.file, warn)
    runs = program.main.trainings
    if not runs:
        raise UsageError(f"presk train: {args.file} has no `training` run")
    if args.run_name is None and len(runs) > 1:
        raise UsageError(f"presk train: {args.file} has several runs ({', '.join(runs)}): "
                         "choose one with --run")
    name = args.run_name or next(iter(runs))
    if name not in runs:
        raise UsageError(f"presk train: no training run `{name}` (the runs: "
                         f"{', '.join(runs)})")
    core = lower_to_core(program, args.file)
    optimized(core, args)  # no entry: the cost is time alone (docs/egraph.md)
    return program, core, runs[name]


def _trainer(args, core, training, directory: str):
    from ..analysis.weights import WeightsError
    from ..train.checkpoint import checkpoints
    from ..train.data import DataError
    from ..train.loop import STEPS_PER_CALL, Trainer
    if args.resume and not os.path.isdir(directory):
        raise UsageError(f"presk train: {directory}: no such run directory")
    try:
        trainer = Trainer.create(core, training, directory, seed=args.seed,
                                 weights=args.weights, realization=args.realize,
                                 remat=args.remat, epochs=args.epochs, steps=args.steps,
                                 plan=args.plan, steps_per_call=STEPS_PER_CALL
                                 if args.steps_per_call is None else args.steps_per_call)
    except (DataError, WeightsError) as exc:
        raise UsageError(f"presk train: {exc}") from None
    if not args.resume and trainer.checkpoint_dir and checkpoints(trainer.checkpoint_dir):
        raise UsageError(f"presk train: {directory} holds a run already: continue it with "
                         f"--resume {directory}, or give another --out")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"presk train: {directory}: cannot create ({exc.strerror})") from None
    return trainer


def _run(args: argparse.Namespace, trainer, log_path: str) -> int:
    from ..train.checkpoint import CheckpointError
    from ..train.data import DataError
    from ..train.loop import PLOT, LogWriter, plot, run_steps
    log = LogWriter(log_path, trainer.history)
    start, first = time.perf_counter(), trainer.step
    try:
        with _Progress(trainer, args.quiet) as bar, _StopOnInterrupt() as stop:
            if not run_steps(trainer, log, bar.update, lambda: stop.requested):
                return _interrupted(trainer, log)
        elapsed = time.perf_counter() - start
    except (CheckpointError, DataError) as exc:  # e.g. the data file cut short meanwhile
        log.flush(trainer.history)
        raise UsageError(f"presk train: {exc} (at step {trainer.step}; the last checkpoint "
                         "stands)") from None
    curve = os.path.join(trainer.directory, PLOT)
    plot(trainer.history, curve, f"{trainer.training.name}: {trainer.training.objective.name}")
    _summary(trainer, elapsed, first, log_path, curve)
    return 0


class _StopOnInterrupt:
    """Ctrl-C (SIGINT) asks the loop to stop after the step it is in, so that no step,
    checkpoint or log line is cut in two; a second Ctrl-C interrupts at once."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> _StopOnInterrupt:
        import signal
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc: object) -> None:
        import signal
        signal.signal(signal.SIGINT, self._previous)


def _interrupted(trainer, log) -> int:
    log.flush(trainer.history)
    path = trainer.checkpoint(trainer.history[-1].loss if trainer.history else None)
    where = f"; checkpoint {path}" if path else " (the run names no checkpoint place)"
    print(f"presk train: interrupted at step {trainer.step} of {trainer.total}{where}; "
          f"continue with --resume {trainer.directory}", file=sys.stderr)
    return 130


def _summary(trainer, elapsed: float, first: int, log_path: str, curve: str) -> None:
    h = trainer.history
    done = trainer.step - first
    rate = done / max(elapsed, 1e-9)
    from ..train.loop import epoch_means
    _, means = epoch_means(h)
    print(f"trained `{trainer.training.name}`: {trainer.step} steps ({done} now, "
          f"{rate:,.0f} steps/s); loss {h[0].loss:.6g} at step 1 → {h[-1].loss:.6g} at step "
          f"{h[-1].step}; epoch mean {means[0]:.6g} → {means[-1]:.6g}")
    print(f"  log {log_path}, curve {curve}"
          + (f", checkpoints {trainer.checkpoint_dir}" if trainer.checkpoint_dir else ""))


def _replot(directory: str) -> int:
    from ..train.loop import LOG, PLOT, plot, read_log
    path = os.path.join(directory, LOG)
    try:
        records = read_log(path)
    except (OSError, KeyError, ValueError) as exc:
        raise UsageError(f"presk train: {path}: cannot read the log ({exc})") from None
    if not records:
        raise UsageError(f"presk train: {path}: the log holds no step")
    curve = os.path.join(directory, PLOT)
    plot(records, curve, os.path.basename(os.path.normpath(directory)))
    print(f"presk train: {curve} redrawn from {len(records)} steps")
    return 0


class _Progress:
    """A rich progress bar on stderr (epoch, step, loss, steps/s, ETA), redrawn at most
    ten times a second so that it costs the steps nothing; nothing with --quiet."""

    def __init__(self, trainer, quiet: bool):
        self.trainer, self.quiet = trainer, quiet
        self.last = 0.0

    def __enter__(self) -> _Progress:
        if self.quiet:
            return self
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeRemainingColumn)
        self.progress = Progress(
            TextColumn("epoch {task.fields[epoch]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), TextColumn("{task.fields[rate]} steps/s"),
            TimeRemainingColumn(), console=Console(stderr=True), transient=False)
        self.progress.__enter__()
        self.task = self.progress.add_task("train", total=self.trainer.total,
                                           completed=self.trainer.step, epoch=0, loss="–",
                                           rate="–")
        self.start, self.first = time.perf_counter(), self.trainer.step
        return self

    def update(self, record) -> None:
        if self.quiet:
            return
        now = time.perf_counter()
        if now - self.last < 0.1 and self.trainer.step < self.trainer.total:
            return
        self.last = now
        rate = (self.trainer.step - self.first) / max(now - self.start, 1e-9)
        self.progress.update(self.task, completed=self.trainer.step, epoch=record.epoch,
                             loss=f"{record.loss:.5g}", rate=f"{rate:,.0f}")

    def __exit__(self, *exc: object) -> None:
        if not self.quiet:
            self.progress.__exit__(*exc)
