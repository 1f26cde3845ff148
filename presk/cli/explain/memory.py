"""§13: what one call of the entry needs in memory, and the training step when the entry is
a training run's objective."""

from __future__ import annotations

from . import pictures
from .context import Explain, Section
from .markdown import shown
from .training import training_run


def training_objective(ex: Explain) -> bool:
    """The entry is the objective of the main file's training run."""
    return training_run(ex) is not None


def memory(ex: Explain) -> Section:
    from ...pipeline import load_core
    from ...pipeline.memory import memory_report
    o = ex.options
    body = ["What one call of the entry needs in memory, counted from the program at its "
            "dimensions and its realization's types, never a process's resident size. Each "
            "buffer the call makes is live from its first write to its last read; the "
            "inputs, which its caller holds, are counted apart.", ""]
    base = ("memory", o.file, "--entry", o.entry, *ex.dim_flags(), *ex.realize_flags())
    cmds = [ex.command(*base, *ex.plan_flags()), ex.command(*base, "--symbolic")]
    if training_objective(ex):
        cmds.append(ex.command("memory", o.file, "--step", *ex.dim_flags(),
                               *ex.realize_flags()))
    texts = {0: "", 1: "The same as polynomials in the entry's dimensions: every axis of a "
             "buffer is a linear form in the dims, so its bytes are a polynomial, "
             "interpolated from recordings on a grid and checked at a point off it.",
             2: "The entry is the objective of the file's training run, so the step "
             "`presk train` makes from it is counted too, under both values of `--remat`: "
             "kept for the backward is the term `--remat` moves."}
    core, _ = load_core(o.file)
    ex.notes["memory"] = memory_report(core, o.entry, ex.dims, ex.realization_spec(), False,
                                       o.remat, ex.plan_spec())
    for i, cmd in enumerate(cmds):
        if texts[i]:
            body += [texts[i], ""]
        out, _, why = ex.runner.attempt(cmd)
        body += shown(out, why)
        if i == 0:
            body += pictures.live_bytes(ex)
    if not training_objective(ex):
        body += [f"No training step: `{o.entry}` is no training run's objective.", ""]
    return Section("13", "Memory", body, cmds)
