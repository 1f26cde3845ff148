"""`presk export FILE --target pytorch -o DIR`: one Python module per .psk file, written by
presk/emit/pytorch.py, each file replaced atomically (a temporary file, then a rename), so
that an interrupted export never leaves a half-written module behind."""

from __future__ import annotations

import argparse
import os

from ..analysis.artifact import write_atomic
from ..pipeline import load_core
from .common import UsageError, reported, warn

TRAIN_FILE, INIT_FILE = "train.py", "init.safetensors"  # presk/emit/pytorch_train.py's


@reported
def run(args: argparse.Namespace) -> int:
    from ..emit.pytorch import ExportError, pytorch_export, summary_line
    from .optimize_cmds import optimized
    module, program = load_core(args.file, warn)
    optimized(module, args, args.entry)
    stem = os.path.splitext(os.path.basename(args.file))[0]
    realized = _realized(args, module, program) if args.realize else None
    try:
        export = pytorch_export(module, stem, program=program, realized=realized)
    except ExportError as exc:
        raise UsageError(f"presk export: {args.file}: {exc}") from None
    files = dict(export.sources)
    if getattr(args, "train", False):
        files |= _training(args, module, program, realized)
    write_files(files, args.output)
    print(summary_line(export, args.output))
    if getattr(args, "train", False):
        print(f"  and {TRAIN_FILE} (the training run for torchrun: `torchrun "
              f"--nproc_per_node=N {os.path.join(args.output, TRAIN_FILE)} --out DIR`) with "
              f"the initial weights {INIT_FILE} (seed {args.seed})")
    return 0


def _training(args: argparse.Namespace, module, program, realized) -> dict[str, object]:
    """--train: DIR/train.py for torchrun and DIR/init.safetensors, the weights `presk
    train --seed` starts from."""
    from ..analysis import entry as E
    from ..emit.pytorch import ExportError
    from ..emit.pytorch_train import train_script
    from ..pipeline import prepare
    runs = program.main.trainings if program is not None else {}
    if len(runs) != 1:
        what = "no `training` run" if not runs else f"several runs ({', '.join(runs)})"
        raise UsageError(f"presk export: --train: {args.file} has {what}")
    run = next(iter(runs.values()))
    name = realized.name if realized is not None else "all-f64"
    try:
        script = train_script(program, run, name, args.seed)
    except ExportError as exc:
        raise UsageError(f"presk export: {args.file}: {exc}") from None
    weights = E.weights(prepare(module, run.objective.name, dict(run.dims)), args.seed, None)
    return {TRAIN_FILE: script, INIT_FILE: _safetensors(weights)}


def _safetensors(tensors) -> bytes:
    from safetensors.numpy import save
    return save(dict(tensors))


def _realized(args: argparse.Namespace, module, program):
    """--realize: the entry (--entry, else the realization's, else the training run's
    objective) recorded at --dim (else the training run's batch dims)."""
    from ..pipeline import load_realization, parse_dims
    from ..pipeline.export import pytorch_realized
    runs = program.main.trainings if program is not None else {}
    run = next(iter(runs.values())) if len(runs) == 1 else None
    entry = args.entry or load_realization(args.realize).entry or (
        run.objective.name if run is not None else None)
    if entry is None:
        raise UsageError("presk export: --realize: name the entry it was solved for with "
                         "--entry")
    dims = parse_dims(args.dim)
    if not dims and run is not None and run.objective.name == entry:
        dims = dict(run.dims)
    return pytorch_realized(module, entry, dims, args.realize)


def write_files(files: dict[str, str | bytes], directory: str) -> None:
    """Create `directory` and write each file into it through a temporary file."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"presk export: -o {directory}: exists and is not a directory")
    try:
        os.makedirs(directory, exist_ok=True)
        for name, text in files.items():
            write_atomic(os.path.join(directory, name), text)
    except OSError as exc:
        raise UsageError(f"presk export: -o {directory}: cannot write "
                         f"({exc.strerror or exc})") from None
