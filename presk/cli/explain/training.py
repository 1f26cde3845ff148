"""§10's training run: when the entry is the objective of the file's training run, the run is
made (`presk train`, quiet, into a scratch directory) and its loss curve drawn.

The run's own summary line states its speed, which changes from run to run, so `presk train`
is named in the prose and not among the section's commands (each of those prints, verbatim,
what the document holds); its log, which is the same on every run (the bits of a step do not
depend on the machine), is copied to $DOC/listings/train-log.csv and the curve drawn from it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from .context import Explain
from . import pictures
from .markdown import sci, table

LOG = "train-log.csv"


def training_run(ex: Explain) -> str | None:
    """The name of the main file's training run whose objective is the entry, if any."""
    runs = ex.program.main.trainings if ex.program is not None else {}
    return next((name for name, t in sorted(runs.items())
                 if t.objective.name == ex.options.entry), None)


def training(ex: Explain) -> list[str]:
    """§10's paragraph on the training run: a table of its figures and its loss curve."""
    run = training_run(ex)
    if run is None:
        return []
    o = ex.options
    head = (f"**Training.** `{o.entry}` is the objective of the training run `{run}`, which "
            f"`presk train {o.file} --run {run}` makes natively (the step in one native call, "
            "docs/training.md).")
    if not o.train:
        return [head, "", "Not run: `--no-train` (so no loss curve is drawn).", ""]
    scratch = tempfile.mkdtemp(prefix="presk-explain-train-")
    try:
        argv = ["train", o.file, "--run", run, "--out", os.path.join(scratch, "run"),
                "--quiet", "--remat", o.remat, *ex.weights_flags()]
        _, _, why = ex.runner.attempt(ex.command(*argv))
        if why is not None:
            return [head, "", f"Not run: {why}", ""]
        with open(os.path.join(scratch, "run", "log.csv"), encoding="utf-8") as fh:
            ex.listings[LOG] = fh.read()
        from ...train.loop import read_log
        records = read_log(os.path.join(scratch, "run", "log.csv"))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    made = (f" Made here from the weights of the parameters table, with `--remat {o.remat}`;"
            f" its log, one row a step, is `$DOC/listings/{LOG}`.")
    return [head + made, "", *_figures(records),
            *pictures.loss_curve(ex, records)]


def _figures(records) -> list[str]:
    """The run's steps, epochs, and its loss at the ends, each epoch's mean at the ends."""
    if not records:
        return ["Not drawn: the run logged no step.", ""]
    from ...train.loop import epoch_means
    _, means = epoch_means(records)
    rows = [["steps", str(len(records))], ["epochs", str(len(means))],
            ["loss at step 1", sci(records[0].loss)],
            [f"loss at step {records[-1].step}", sci(records[-1].loss)],
            ["the first epoch's mean", sci(means[0])], ["the last epoch's mean", sci(means[-1])]]
    return table(["The run", "Value"], rows)

