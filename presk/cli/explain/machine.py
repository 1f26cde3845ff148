"""§7–§11: fusion, the machine and the layout plan, the kernels and the host, the targets,
and what one run measured."""

from __future__ import annotations

import os

from . import pictures
from .context import C_DIR, PLAN, PYTORCH_DIR, Explain, Section
from .markdown import listing, plural, shown, table


def fusion(ex: Explain) -> Section:
    """§7: the fusion groups and why each element-wise value reaches memory."""
    o = ex.options
    cmd = ex.command("dump", o.file, "--stage", "realize", "--entry", o.entry, *ex.dim_flags(),
                     *ex.realize_flags())
    body = ["PSK-Realize groups the element-wise operations that can share one loop nest: an "
            "intermediate inside a group never reaches memory. `iN` is a group's input N, "
            "`sN` its step N. A value joins its reader's group when every reader is in that "
            "group, is element-wise and of the same shape, and the group stays under its size "
            "limit.", ""]
    out, _, why = ex.runner.attempt(cmd)
    body += shown(out, why)
    return Section("7", "Fusion", body, [cmd])


def plan_command(ex: Explain, *extra: str):
    o = ex.options
    threads = ["--threads", str(o.threads)] if o.threads else []
    return ex.command("plan", o.file, "--entry", o.entry, *ex.dim_flags(), *ex.realize_flags(),
                      "--profile", o.profile, *threads, *ex.opt_flags(), *extra)


def machine(ex: Explain) -> Section:
    """§8: the profile's machine and model, the plan table, every nest's reasons."""
    from ..plan_cmd import plan_printed
    o = ex.options
    body = ["Each nest has a space of layouts (vector lanes, a split over workers, for a "
            "contraction a register tile). The plan takes the point the profile's cost model "
            "predicts fastest; \"within 1 + u\" counts the points the model cannot tell from "
            "the best.", ""]
    if not o.profile:
        body += ["Not run: no `--profile` was given. The plan prices every layout by a machine "
                 "profile's cost model (`presk profile calibrate` measures one, "
                 "`test/fixtures/profile-frozen.json` is a frozen one); without it every "
                 "kernel keeps its default layout, and §9–§13 compile that.", ""]
        return Section("8", "The machine and the layout plan", body)
    cmd = plan_command(ex, "--out", PLAN)
    out, report, why = ex.runner.attempt(cmd, plan_printed)
    if out is None:
        body += [f"Not run: {why}", ""]
        return Section("8", "The machine and the layout plan", body, [cmd])
    ex.notes["plan"] = report
    m, model = report.profile.machine, report.profile.model
    body += ["The profile describes the machine as the cost model sees it, and holds the "
             "constants fitted on its calibration.", ""]
    body += table(["Machine", "Value"], [
        ["Workers", f"{m.workers} ({m.workers_from})"],
        ["L1, private", f"{m.l1 // 1024} KiB"], ["L2", f"{m.l2 // 1024} KiB"],
        ["L3", f"{m.l3 // 1024} KiB, shared by {m.l3_shared_by} workers"],
        ["Vector registers", f"{m.vector_registers} × {m.vector_bytes} bytes"],
        ["Cache line", f"{m.cache_line} bytes"]])
    bw = ", ".join(f"{model.bandwidth[k] / 1e9:.0f}" for k in ("l2", "l3", "mem")
                   if k in model.bandwidth)
    body += table(["Layout model", "Value"], [
        ["A launch (λ)", f"{model.launch * 1e9:.2f} ns"],
        ["Starting a split launch (spawn)", f"{model.spawn * 1e6:.1f} µs"],
        ["Bandwidth from L2, L3, memory", f"{bw} GB/s"],
        ["Terms combined by", f"a p-norm, p = {model.p:.3f}"],
        ["Its error on the calibration (u)", f"{model.u:.3f} median, {model.u90:.3f} p90"],
        ["Rank correlation on the calibration", f"{model.rho:.3f}"],
        ["Points", f"{model.points}, {model.held_out} held out ({model.fit})"]])
    body += ["The plan, as `presk plan` prints it: each launch's operands, the points of its "
             "space, the best prediction and the layout chosen; then, per nest, the chosen "
             "point, its two runners-up and the best point that splits, each prediction in "
             "its terms (µs).", ""]
    body += listing(out)
    every = plan_command(ex, "--cost")
    cost, _, _ = ex.runner.attempt(every)
    if cost is not None:
        ex.listings["plan-cost.txt"] = cost + "\n"
        body += [f"Every point's prediction, as `presk plan --cost` prints them, in "
                 f"`listings/plan-cost.txt` ({plural(cost.count(chr(10)) + 1, 'line')}).", ""]
    body += ["The reference's tutorial plan has 10 nests; ours has "
             f"{len(report.nests)}: a product's reading `add` is its epilogue, one kernel "
             "(`dot+add`), so `Linear.apply/%5` is no nest of its own."
             if any(n.epilogue for n in report.nests) else
             f"{plural(len(report.nests), 'nest')} in all.", ""]
    return Section("8", "The machine and the layout plan", body, [cmd, every])


def kernels(ex: Explain) -> Section:
    """§9: PSK-Kernel, each kernel under the sites that launch it, and the host."""
    from ..kernel_cmds import kernel_printed
    o = ex.options
    cmd = ex.command("dump", o.file, "--stage", "kernel", "--entry", o.entry, *ex.dim_flags(),
                     *ex.realize_flags(), *ex.plan_flags())
    body = ["PSK-Kernel is the loop nests the backends run: one kernel per distinct nest, "
            "under its type and its layout. The host program launches them, converting a "
            "value where a kernel reads it in another type.", ""]
    out, pipe, why = ex.runner.attempt(cmd, kernel_printed)
    if out is None:
        body += [f"Not run: {why}", ""]
        return Section("9", "The kernels and the host", body, [cmd])
    from ...emit.kernel_listing import count
    counts = count(pipe.kernel)
    ex.notes["kernel"] = pipe
    ex.notes["counts"] = counts
    body += listing(out)
    return Section("9", "The kernels and the host", body, [cmd])


def host(ex: Explain, section: Section) -> None:
    """§9's host, once §10 has written the C program: its model.c, as written."""
    path = os.path.join(ex.path(C_DIR), "model.c")
    if "c" not in ex.options.targets or not os.path.exists(path):
        section.body += ["The host is not shown: it is the C export's `model.c`, and "
                         "`--target` did not name c (or its export did not run, §10).", ""]
        return
    ex.notes["host"] = path
    with open(path, encoding="utf-8") as fh:
        text = fh.read().rstrip("\n")
    section.body += ["The host, as the C export writes it (`$DOC/artifacts/c/model.c`, §10): "
                     "a function per Presk function, a fold a loop, each launch under the "
                     "site it computes and each conversion where a kernel reads a value in "
                     "another type.", ""] + listing(text)


def targets(ex: Explain) -> Section:
    """§10: native, the C program (and its `make check`), the PyTorch module."""
    from ..export_c import exported
    o = ex.options
    body = []
    cmds = []
    counts = ex.notes.get("counts")
    if "native" in o.targets:
        n = f"each of the {counts.kernels} kernels" if counts else "each kernel"
        body += [f"**Native.** The LLVM backend (llvmlite) compiles {n} to machine code in "
                 "process, and the host program of §9 runs them.", ""]
    if "c" in o.targets:
        cmd = ex.command("export", o.file, "--target", "c", "--entry", o.entry,
                         *ex.dim_flags(), *ex.realize_flags(), *ex.plan_flags(),
                         *(["--threads", str(o.threads)] if o.threads else []),
                         *ex.weights_flags(), *ex.opt_flags(), "-o", C_DIR)
        cmds.append(cmd)
        out, result, why = ex.runner.attempt(cmd, exported)
        body += ["**C.** `presk export --target c` writes the entry as a C program that "
                 "computes the native backend's bits, with the native run's inputs and "
                 "outputs: `make -C $DOC/artifacts/c check` builds it and compares them, bit "
                 "for bit.", ""]
        if out is None:
            body += [f"Not run: {why}", ""]
        else:
            ex.notes["c"] = result
            body += listing(out)
    if "pytorch" in o.targets:
        cmd = ex.command("export", o.file, "--target", "pytorch", "-o", PYTORCH_DIR)
        cmds.append(cmd)
        out, _, why = ex.runner.attempt(cmd)
        body += ["**PyTorch.** `presk export --target pytorch` writes one module per file:", ""]
        body += shown(out, why)
    if not body:
        body = ["Not run: `--target` named no target.", ""]
    from .training import training
    body += training(ex)
    return Section("10", "Targets", body, cmds)


def measured(ex: Explain) -> Section:
    """§11: only with --measure — the one section that changes from run to run."""
    o = ex.options
    body = ["What one run measured on this machine: the realization natively, a call timed, "
            "each nest's time beside the model's prediction. The one section that changes "
            "from run to run.", ""]
    if not o.measure:
        body += ["Not measured: `--measure` was not given. Every other section is "
                 "deterministic; this one would hold times.", ""]
        return Section("11", "Measured", body)
    cmds = [ex.command("run", o.file, "--entry", o.entry, *ex.dim_flags(), "--engine",
                       "native", *ex.realize_flags(), *ex.plan_flags(), *ex.weights_flags(),
                       "--time")]
    out, _, why = ex.runner.attempt(cmds[0])
    body += shown(out, why)
    if o.profile:
        from ..plan_cmd import plan_printed
        cmds.append(plan_command(ex, "--measure"))
        out, report, why = ex.runner.attempt(cmds[1], plan_printed)
        body += shown(out, why)
        if report is not None:
            body += pictures.kernel_times(ex, report)
    return Section("11", "Measured", body, cmds)
