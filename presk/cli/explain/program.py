"""§1–§5: the program as written, elaborated, in PSK-Core, differentiated, optimized."""

from __future__ import annotations

import os

from .context import Explain, Section
from .markdown import listing, plural, shown, table


def source(ex: Explain) -> Section:
    """§1: the entry's file and every file it imports, numbered, as the compiler reads them."""
    body = ["The entry's file and the files it imports, as the compiler reads them.", ""]
    base = os.path.dirname(ex.options.file)
    for f in reversed(ex.program.files):  # the main file first, as a reader starts
        name = _shown_path(f.path, ex.options.file, base)
        with open(f.path, encoding="utf-8") as fh:
            text = fh.read().rstrip("\n")
        width = len(str(text.count("\n") + 1))
        body += [f"`{name}`", ""]
        body += listing("\n".join(f"{i:>{width + 2}}  {line}".rstrip()
                                  for i, line in enumerate(text.split("\n"), 1)))
    check = ex.command("check", ex.options.file)
    out = ex.runner.run(check)
    body += [f"Diagnostics, as `presk check` reports them:", ""] + listing(out)
    return Section("1", "The source", body, [check])


def _shown_path(path: str, main: str, base: str) -> str:
    """A file's path as the command line names it: relative to where the user ran explain."""
    rel = os.path.relpath(path)
    return rel if not rel.startswith("..") else os.path.join(base, os.path.basename(path))


def elaboration(ex: Explain) -> Section:
    """§2: the elaborated program, its summary, and the entry's parameters at these dims."""
    elab = ex.command("dump", ex.options.file, "--stage", "elab")
    summary = ex.command("check", ex.options.file, "--summary")
    body = ["Elaboration resolves the imports, binds the constants, instantiates every module "
            "with its dimensions, and checks shapes, regularity classes and effects. Its output "
            "is the program with every instance named and every parameter's shape known.", ""]
    body += listing(ex.runner.run(elab))
    body += ["Types, regularity and effects, as `presk check --summary` prints them:", ""]
    body += listing(ex.runner.run(summary))
    fields = entry_parameters(ex)
    if fields:
        total = sum(n for _, _, n in fields)
        ex.notes["reals"] = total
        body += [f"The parameters of `{ex.options.entry}`, its first argument: "
                 f"{plural(len(fields), 'tensor')}, {total} reals at these dimensions.", ""]
        body += table(["Parameter", "Type", "Reals"], [[p, t, n] for p, t, n in fields])
    else:
        ex.notes["reals"] = 0
        body += [f"`{ex.options.entry}` takes no parameter tree: its first argument is not "
                 "`params …`, so nothing of it is a weight.", ""]
    return Section("2", "Elaboration", body, [elab, summary])


def entry_parameters(ex: Explain) -> list[tuple[str, str, int]]:
    """(path, shape, reals) of the entry's parameter tree at the run's dims, in its order."""
    import math

    from ...analysis import entry as E
    entry = E.prepare(ex.core, ex.options.entry, ex.dims)
    return [(f.path, "ℝ" + str(list(f.shape)), math.prod(f.shape)) for f in entry.fields]


def core(ex: Explain) -> Section:
    """§3: PSK-Core of the functions the entry reaches."""
    cmd = ex.command("dump", ex.options.file, "--stage", "core", "--entry", ex.options.entry)
    body = ["PSK-Core is the program in A-normal form: one typed operation per line, the "
            "parameter trees explicit, a `stack{L}` a fold.", "",
            "A site is named `<function>/%<n>`, n the number of its variable, whether the let "
            "has a source name (`ms`) or not (`%5`). That name is the thread every later "
            "section follows: the envelope, the sensitivities and the realization are keyed "
            "by it, a nest is named by the site it computes, and the C program comments each "
            "launch with it.", ""]
    body += listing(ex.runner.run(cmd))
    return Section("3", "PSK-Core", body, [cmd])


def _grads(ex: Explain) -> list[str]:
    """The reached functions that take a gradient (`grad` in PSK-Core)."""
    from ...dialects import core as C
    funcs = {op.sym_name.data: op for op in ex.core.ops if isinstance(op, C.FuncOp)}
    return [n for n in ex.reached if any("grad" in o.name.split(".")[-1]
                                        for o in funcs[n].body.block.ops)]


def differentiation(ex: Explain) -> Section:
    """§4: the grads the entry calls, and the reverse sweep the precision analysis runs."""
    o = ex.options
    body = ["Differentiation turns each `grad` into a reverse sweep: a `.vjp` that runs the "
            "function forward, keeps what the sweep needs (`--remat store`) or recomputes it "
            "(`--remat recompute`), and propagates the cotangents back.", ""]
    grads = _grads(ex)
    if grads:
        body += [f"`{o.entry}` reaches {plural(len(grads), 'function')} that take a gradient "
                 f"({', '.join(f'`{g}`' for g in grads)}): its compiled program holds their "
                 f"reverse sweeps, under `--remat {o.remat}`.", ""]
    else:
        body += [f"`{o.entry}` calls no `grad`, so its compiled program holds no derivative.",
                 ""]
    vjp = ex.command("dump", o.file, "--stage", "vjp", "--entry", o.entry, "--remat", o.remat)
    out, _, why = ex.runner.attempt(vjp)
    if out is None:
        body += [f"The entry's reverse sweep: not run: {why}", ""]
        return Section("4", "Differentiation", body, [vjp])
    ex.listings["sensitivity-sweep.txt"] = out + "\n"
    head = out.split("\n", 1)[0]
    body += ["The precision analysis differentiates the entry once more, for its own use: the "
             "sensitivities of §6.2 are read off one reverse sweep at the exact reference's "
             "precision, this `.vjp` with the adjoint of every intermediate kept. It is not "
             "part of the compiled program.", "", head, "",
             f"The sweep's program in `listings/sensitivity-sweep.txt` "
             f"({plural(out.count(chr(10)) + 1, 'line')}).", ""]
    return Section("4", "Differentiation", body, [vjp])


def egraph(ex: Explain) -> Section:
    """§5: with --opt the rewrites the optimizer used; without, what it would do."""
    o = ex.options
    body = ["The optimizer saturates an e-graph of each function with the rewrite rules and "
            "extracts the cheapest form under its cost model.", ""]
    if not o.profile:
        body += ["Not run: `--opt` is " + ("on" if o.opt else "off") + ", and without "
                 "`--profile` the optimizer prices time by this machine's cached profile, "
                 "which the document cannot name reproducibly; give `--profile` to see its "
                 "rewrites.", ""]
        return Section("5", "The e-graph optimizer", body)
    cmd = ex.command("dump", o.file, "--stage", "opt", "--entry", o.entry, *ex.dim_flags(),
                     "--profile", o.profile, "--no-times")
    if not o.opt:
        body += ["Not run: `--opt` is off; every later section compiles the program as "
                 "written. What it would do, as `presk dump --stage opt` prints it:", ""]
    else:
        body += ["Run (`--opt`): every later section compiles the optimized program. Its "
                 "rewrites, as `presk dump --stage opt` prints them:", ""]
    out, _, why = ex.runner.attempt(cmd)
    body += shown(out, why)
    return Section("5", "The e-graph optimizer", body, [cmd])
