"""The document's front: the parameters (each with where it comes from), the artifacts with
their checksums, and §0, the summary — each row a fact, a decision, a bound, an estimate or a
measurement, and the section that shows it."""

from __future__ import annotations

from .context import Explain, Section
from .markdown import plural, sci, table

TARGET_NAMES = {"native": "native (LLVM, llvmlite)", "c": "C", "pytorch": "PyTorch"}


def _given(flag: str | None, default: str) -> str:
    return flag if flag else default


def parameters(ex: Explain) -> Section:
    from ... import __version__
    o = ex.options
    consts = [f"{c.name} = {c.value}" for f in ex.program.files for c in f.consts.values()]
    dims = ", ".join(f"{k} = {v}" for k, v in ex.dims.items())
    sol = ex.notes.get("solution")
    if o.budget is None:
        real = ("all f64", "no --budget")
    elif sol is None:
        real = ("all f64: the solve did not run (§6.3)", f"--budget {o.budget_text}")
    else:
        real = (f"solved under a budget of {o.budget_text} relative to the output",
                f"--budget {o.budget_text}")
    price = "time, by the profile's cost model" if (o.solve_price == "time" and o.profile) \
        else "bytes moved a call"
    rows = [
        ["Program", f"`{o.file}`", "the command line"],
        ["Entry", f"`{o.entry}`", f"--entry {o.entry}"],
        ["Dimensions", dims or "none", " ".join(f"--dim {d}" for d in o.dims) or "no --dim"],
        ["Constants", ", ".join(consts) or "none", "the files'"],
        ["Weights", f"`{o.weights}`" if o.weights else "the initialization, seed 0",
         f"--weights {o.weights}" if o.weights else "no --weights"],
        ["Realization", *real],
        ["The solver's price", price, f"--solve-price {o.solve_price}"],
        ["Exact reference", f"MPFR at {o.bits} bits", f"--bits {o.bits}"],
        ["Machine", f"the profile `{o.profile}`" if o.profile else "none: no layout plan",
         f"--profile {o.profile}" if o.profile else "no --profile"],
        ["Threads", str(o.threads) if o.threads else "the profile's workers",
         f"--threads {o.threads}" if o.threads else "no --threads"],
        ["Differentiation", f"--remat {o.remat}", "the command line"],
        ["Optimizer (e-graph)", "on" if o.opt else "off", "--opt" if o.opt else "no --opt"],
        ["Targets", ", ".join(TARGET_NAMES[t] for t in o.targets),
         "--target " + ",".join(o.targets)],
        ["Measurement", "on (§11)" if o.measure else "off", "--measure" if o.measure
         else "no --measure"],
    ]
    body = table(["Parameter", "Value", "Where it comes from"], rows)
    body += [f"Compiler: presk {__version__}. Each section ends with the commands that print "
             "what it shows; `$DOC` is this document's directory, which holds every file it "
             "names, and the commands run from the directory the program was named from.", ""]
    return Section("params", "The parameters", body)


def artifacts(ex: Explain, sums: dict[str, str]) -> list[str]:
    """The artifacts table: path, provenance, SHA-256 (a directory: of its lines in
    SHA256SUMS, which `sha256sum -c` checks file by file)."""
    import hashlib
    o = ex.options
    rows = []
    if o.profile:
        rows.append(["the machine profile", f"`{o.profile}`, copied to "
                     "`$DOC/artifacts/profile.json`", "given", sums.get("profile.json", "—")])
    if o.weights:
        rows.append(["the weights", f"`{o.weights}`", "given", "—"])
    what = {"envelope.json": "the envelope", "realization.json": "the realization",
            "plan.json": "the layout plan", "c": "the C program", "pytorch": "the PyTorch module"}
    for name, label in what.items():
        files = {k: v for k, v in sums.items() if k == name or k.startswith(name + "/")}
        if not files:
            continue
        if name in files:
            digest = files[name]
        else:
            lines = "".join(f"{v}  {k}\n" for k, v in sorted(files.items()))
            digest = f"{plural(len(files), 'file')}, " \
                     f"{hashlib.sha256(lines.encode()).hexdigest()}"
        rows.append([label, f"`$DOC/artifacts/{name}" + ("/`" if name not in files else "`"),
                     "computed in this run", digest])
    body = ["The artifacts it was made from or wrote:", ""]
    body += table(["What", "Path", "Provenance", "SHA-256"], rows) if rows else \
        ["None: no step of this run wrote an artifact.", ""]
    body += ["`$DOC/artifacts/SHA256SUMS` holds the checksum of every file written there "
             "(`cd $DOC/artifacts && sha256sum -c SHA256SUMS`).", ""]
    return body


def summary(ex: Explain) -> Section:
    rows = []
    n = ex.notes
    if "reals" in n:
        rows.append(["Parameters", f"{n['reals']} reals", "fact", "§2"])
    if env := n.get("envelope"):
        rows.append(["Envelope", f"{len(env.sites)} sites over "
                     f"{plural(env.samples, 'sample')} at {env.bits} bits", "measurement",
                     "§6.1"])
    if sol := n.get("solution"):
        rows += _solution_rows(sol, ex.options.budget_text)
    elif ex.options.budget is None:
        rows.append(["Realization", "all f64: no --budget", "parameter", "§6.3"])
    if b := n.get("bounds"):
        for rule in ("cond", "normwise", "k"):
            if rule in b.bounds:
                rows.append([f"Bound, rule {rule}", f"{sci(b.bounds[rule])} "
                             f"({sci(b.relative(rule))} relative)", "bound",
                             f"§6.4, conditional on the envelope's "
                             f"{plural(b.envelope_samples, 'sample')}"])
                break
        if b.measured is not None and "solution" not in n:
            rows.append(["Measured gap", f"{sci(b.measured)} against the exact reference",
                         "measurement", "§6.4"])
    if c := n.get("counts"):
        rows.append(["Fusion", f"{c.unfused} launches without it, {c.launches} with it: "
                     f"{c.unfused - c.launches} saved", "decision", "§7"])
    if p := n.get("plan"):
        tiled = sum("tiled" in x.chosen.point.text() for x in p.nests)
        split = sum("split none" not in x.chosen.point.text() for x in p.nests)
        seconds = sum(x.chosen.seconds * x.launches for x in p.nests)
        rows.append(["Layout plan", f"{plural(len(p.nests), 'nest')}, {p.points} points "
                     f"costed, {tiled} tiled, {split} split; predicted {seconds * 1e6:.3f} µs "
                     "a call over the nests it prices", "decision, estimate", "§8"])
    if c:
        rows.append(["Kernels", f"{c.kernels} distinct, {c.launches} launches a call", "fact",
                     "§9"])
    if cx := n.get("c"):
        lines = sum(t.count("\n") for t in cx.files.values())
        rows.append(["C program", f"{plural(len(cx.files), 'file')}, {lines} lines with its "
                     "runtime", "fact", "§10"])
    if m := n.get("memory"):
        k = m.count
        rows.append(["Memory", f"{k.needs} bytes a call: the inputs, {k.inputs} bytes, and the "
                     f"peak of live bytes, {k.peak}", "fact", "§13"])
    body = table(["What", "Outcome", "Kind", "Where"], rows)
    body += ["A fact is a property of the program or of the compilation; a decision is what "
             "the compiler chose; a bound holds for the inputs its envelope covers and names "
             "them; an estimate ranks and does not guarantee; a measurement was taken in this "
             "run, against the exact reference unless it is a time.", ""]
    return Section("0", "Summary", body)


def _solution_rows(sol, budget_text: str) -> list[list[str]]:
    sites = [d for d in sol.decisions if d.kind == "site" and d.type != "f64"]
    params = [d for d in sol.decisions if d.kind == "param" and d.type != "f64"]
    by_type: dict[str, int] = {}
    for d in sites:
        by_type[d.type] = by_type.get(d.type, 0) + 1
    types = ", ".join(f"{v} in {k}" for k, v in sorted(by_type.items()))
    away = f"{plural(len(sites), 'stored value')} away from f64" + (f": {types}" if types else "")
    return [
        ["Realization", f"{away}; the rest in f64; {plural(len(params), 'parameter')} stored "
         "in their own types", "decision", "§6.3"],
        ["Budget", f"{budget_text} of the output's magnitude {sci(sol.magnitude)}: "
         f"{sci(sol.absolute)} absolute", "parameter", "§6.3"],
        ["Measured gap", f"{sci(sol.measured)} against the exact reference, "
         + ("inside the budget" if sol.inside else "OUTSIDE the budget"), "measurement",
         "§6.3"],
        ["Solver's estimate", f"{sci(sol.estimate)}: it ranks, it does not guarantee",
         "estimate", "§6.3"],
        ["Cost", f"{sci(sol.cost, 4)} against {sci(sol.cost_f64, 4)} all-f64 ({sol.unit} a "
         f"call): {sol.cost_f64 / sol.cost:.2f}× less" if sol.cost else "0", "estimate",
         "§6.3"],
    ]
