"""§6: from a budget to a type per site — the envelope, the sensitivities, the realization
with each decision's reason, the bound beside the measurement."""

from __future__ import annotations

from . import pictures
from .context import ENVELOPE, REALIZATION, Explain, Section
from .markdown import listing, plural, sci, table

INTRO = ("A budget bounds the distance between what the machine computes and the "
         "mathematics. Four steps turn it into types: measure how large the values get (the "
         "envelope), rank where error matters (the sensitivities), solve for the cheapest "
         "types the estimate allows, then discharge the budget by running the candidate "
         "against the exact reference.")


def precision(ex: Explain) -> list[Section]:
    return [Section("6", "Precision: from a budget to a type per site", [INTRO, ""]),
            envelope(ex), sensitivities(ex), realization(ex), bound(ex)]


def calibrate_command(ex: Explain):
    o = ex.options
    return ex.command("calibrate", "--precision", o.file, "--entry", o.entry, *ex.dim_flags(),
                      "--bits", str(o.bits), *ex.weights_flags(), *ex.opt_flags(),
                      "--out", ENVELOPE)


def envelope(ex: Explain) -> Section:
    """§6.1: the exact run's magnitudes, condition numbers and rounding errors per site."""
    from ...analysis.envelope import load_envelope
    cmd = calibrate_command(ex)
    body = ["The exact interpreter runs the entry once and records the largest |x| at every "
            "site, and at each sum and contraction what its terms add up to without "
            "cancelling: divided by the sum, its condition number.", ""]
    out, _, why = ex.runner.attempt(cmd)
    if out is None:
        body += [f"Not run: {why}. Without an envelope there are no sensitivities, no "
                 "realization and no bound: §6.2–§6.4 say so.", ""]
        return Section("6.1", "The envelope", body, [cmd])
    env = load_envelope(ex.path(ENVELOPE))
    ex.notes["envelope"] = env
    body += listing(out)
    body += [f"The envelope holds {len(env.sites)} sites from "
             f"{plural(env.samples, 'sample')} on the weights `{env.weights}`, at {env.bits} "
             "bits; every bound below is conditional on it, and says so.", ""]
    return Section("6.1", "The envelope", body, [cmd])


def sensitivities(ex: Explain) -> Section:
    """§6.2: ‖∂L/∂v‖₁ at each site, one reverse sweep."""
    o = ex.options
    env = ex.notes.get("envelope")
    sites = str(len(env.sites)) if env else "30"
    cmd = ex.command("dump", o.file, "--stage", "sensitivity", "--entry", o.entry,
                     *ex.dim_flags(), "--bits", str(o.bits), "--sites", sites,
                     *ex.weights_flags(), "--remat", o.remat)
    body = ["‖∂L/∂v‖₁ at each site, from one reverse sweep: how much an error at the site "
            "moves the output.", ""]
    from ..sensitivity_cmds import sensitivity_printed
    out, result, why = ex.runner.attempt(cmd, sensitivity_printed)
    if out is None:
        body += [f"Not run: {why}", ""]
        return Section("6.2", "The sensitivities", body, [cmd])
    ex.notes["sensitivities"] = result
    body += listing(out)
    return Section("6.2", "The sensitivities", body, [cmd])


def solve_command(ex: Explain):
    o = ex.options
    env = ex.notes.get("envelope")
    price = ["--profile", o.profile] if o.solve_price == "time" and o.profile else []
    return ex.command("solve", o.file, "--precision", ENVELOPE, "--budget", o.budget_text,
                      *price, "--sites", str(len(env.sites) if env else 30),
                      *ex.opt_flags(), "--out", REALIZATION)


def realization(ex: Explain) -> Section:
    """§6.3: the solver's listing, then every decision with its reason, in a table."""
    from ..solve_cmds import solve_and_write
    o = ex.options
    body = ["The solver ranks the values the program stores by sensitivity and narrows the "
            "cheapest first while its first-order estimate Σ s · r(type), r the largest "
            "rounding error of the sampled values in the type, stays under the budget, then "
            "measures the candidate against the exact reference and widens until the "
            "measurement holds.", ""]
    if o.budget is None:
        body += ["Not run: no `--budget` was given, so every value stays f64 (the "
                 "realization `all-f64`) and §7–§13 compile that.", ""]
        body += pictures.sensitivities(ex)
        return Section("6.3", "The realization", body)
    if "envelope" not in ex.notes:
        body += ["Not run: the envelope of §6.1 is missing, and the solver reads it.", ""]
        return Section("6.3", "The realization", body)
    cmd = solve_command(ex)
    out, sol, why = ex.runner.attempt(cmd, solve_and_write)
    if out is None:
        body += [f"Not run: {why}. Every value stays f64.", ""]
        return Section("6.3", "The realization", body, [cmd])
    ex.notes["solution"] = sol
    price = ("seconds a call, as the profile's cost model predicts them"
             if o.solve_price == "time" and o.profile else
             "bytes a call moves (`--solve-price time` prices by the profile instead)")
    body += [f"The solver prices a realization in {price}.", ""]
    body += listing(out)
    body += ["Why each value has its type: a decision is a value the program stores, whose "
             "type is the solver's choice; its reason is the move that narrowed it (what it "
             "saves, what it adds to the estimate, the estimate after it), the rule that "
             "left it unoffered, or that no narrowing fit the budget.", ""]
    body += table(["Site", "Operation", "Type", "Elements", "Term", "Why"],
                  [[d.key, d.op, d.type, d.elements, sci(d.term()), reason(sol, d.key)]
                   for d in sorted(sol.decisions, key=lambda d: (-d.term(), d.key))])
    body += pictures.sensitivities(ex)  # §6.2's s beside each decision's term and the budget
    body += pictures.types(ex)
    if sol.others:
        body += ["The values rounded elsewhere, or carried: a follower is rounded where the "
                 "value it follows is computed; a carried value (a call's or a fold's "
                 "result, a parameter tree) is another site's value and has no type of its "
                 "own to choose.", ""]
        body += table(["Site", "Operation", "Role", "Type", "Term"],
                      [[x.site, x.op, x.role, x.type, sci(x.term)] for x in
                       sorted(sol.others, key=lambda x: (x.role == "carried", -x.term, x.site))])
    return Section("6.3", "The realization", body, [cmd])


def reason(sol, key: str) -> str:
    """Why the solver left `key` at its type, in its own figures."""
    unit = sol.unit
    decision = next(d for d in sol.decisions if d.key == key)
    if decision.rule == 1:
        return "not offered: one element, no traffic to save (rule 1)"
    if decision.rule == 2:
        return (f"not offered: its first narrowing saves {sci(decision.first_saving)} {unit}, "
                "under θ·cost (rule 2)")
    parts = []
    for m in sol.moves:
        together = m.key.split(" + ")  # a product and its epilogue move as one launch
        if key in together:
            with_ = [k for k in together if k != key]
            parts.append(f"narrowed {m.frm} → {m.to} (move {m.number}"
                         + (f", with {', '.join(with_)}: one launch" if with_ else "")
                         + f"): saves {sci(m.saved)} {unit}, adds {sci(m.added)} to the "
                         f"estimate, then {sci(m.estimate)}")
    parts += [f"widened {frm} → {to}: the measurement missed the budget"
              for k, frm, to in sol.widenings if key in k.split(" + ")]
    if parts:
        return "; ".join(parts)
    if decision.type == "f64":
        return "kept f64: no narrowing of it fits the budget beside the moves taken first"
    return f"{decision.type}: the type of the value it is read with"


def bound(ex: Explain) -> Section:
    """§6.4: each rule's bound under the realization, beside the measured gap."""
    from ..bounds_cmds import bounds_printed
    o = ex.options
    body = ["Under the realization, each rule's bound on the output's error, beside the gap "
            "measured against the exact reference.", ""]
    if "envelope" not in ex.notes:
        body += ["Not run: the bounds read the envelope of §6.1, which is missing.", ""]
        return Section("6.4", "The bound and the measurement", body)
    cmd = ex.command("check", "--precision", ENVELOPE, o.file, *ex.realize_flags(),
                     "--model", "all", "--sites", "8", "--measure")
    out, b, why = ex.runner.attempt(cmd, bounds_printed)
    if out is None:
        body += [f"Not run: {why}", ""]
        return Section("6.4", "The bound and the measurement", body, [cmd])
    ex.notes["bounds"] = b
    body += listing(out)
    if "cond" in b.bounds and b.measured:
        body += [f"The sound rule `cond` bounds the error by {sci(b.bounds['cond'])}, "
                 f"conditional on the envelope's {plural(b.envelope_samples, 'sample')}; the "
                 f"measurement is {sci(b.measured)}, "
                 f"{b.bounds['cond'] / b.measured:.1e}× under it.", ""]
    return Section("6.4", "The bound and the measurement", body, [cmd])
