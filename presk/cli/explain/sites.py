"""§12: a few sites followed through every stage, by the name `<function>/%<n>` each stage
keys them by; and `listings/site-index.tsv`, every site with the sections that name it."""

from __future__ import annotations

import re

from .context import Explain, Section
from .markdown import plural, sci, table


def core_sites(ex: Explain) -> dict[str, tuple[str, object]]:
    """site → (its function, its PSK-Core op), over the functions the entry reaches."""
    from ...dialects import core as C
    out: dict[str, tuple[str, object]] = {}
    for f in ex.core.ops:
        if isinstance(f, C.FuncOp) and f.sym_name.data in ex.reached:
            for op in f.body.block.ops:
                if not isinstance(op, C.ReturnOp) and "site" in op.attributes:
                    out[op.site.data] = (f.sym_name.data, op)
    return {s: out[s] for s in sorted(out, key=lambda s: (ex.reached.index(out[s][0]),
                                                          _number(s)))}


def _number(site: str) -> int:
    tail = site.rsplit("%", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def chosen(ex: Explain) -> list[str]:
    """The three largest shares of the solver's estimate (the three largest bounds without
    a solve), then the three nests of the most predicted time a call."""
    picked: list[str] = []
    if sol := ex.notes.get("solution"):
        terms = sol.terms()
        picked += sorted(terms, key=lambda s: (-terms[s], s))[:3]
    elif b := ex.notes.get("bounds"):
        picked += [s.site for s in b.sites[:3]]
    if p := ex.notes.get("plan"):
        by_time = sorted(p.nests, key=lambda n: (-n.chosen.seconds * n.launches, n.site))
        picked += [n.site for n in by_time if n.site not in picked][:3]
    known = core_sites(ex)
    return [s for s in picked if s in known]


def sites(ex: Explain) -> Section:
    body = ["A site is named `<function>/%<n>` at every stage, which is what lets one value "
            "be followed from PSK-Core to the C.", "",
            "The three largest shares of the solver's estimate (the three largest bounds "
            "without a solve), then the three nests of the most predicted time a call.", ""]
    known = core_sites(ex)
    picked = chosen(ex)
    if not picked:
        body += ["Not run: no estimate, bound or plan ranks a site here (§6 and §8 did not "
                 "run).", ""]
    for site in picked:
        body += [f"**{site}**", ""]
        body += table(["Stage", "At this site"], _rows(ex, site, known[site]))
    body += [f"Every site of the functions the entry reaches, its line and the sections that "
             f"name it, in `listings/site-index.tsv` ({plural(len(known) + 1, 'line')}).", ""]
    return Section("12", "Sites through every stage", body)


def _rows(ex: Explain, site: str, where: tuple[str, object]) -> list[list[str]]:
    from ...emit.core_listing import format_op
    fn, op = where
    rows = [["PSK-Core (§3)", f"`{format_op(op)}` in {fn}"]]
    if env := ex.notes.get("envelope"):
        r = env.sites.get(site)
        rows.append(["Envelope (§6.1)", "not recorded" if r is None else
                     f"|v| ≤ {sci(r.max_abs)}, {plural(r.count, 'element')}"
                     + (f", condition number {sci(r.condition)}" if r.condition else "")])
    if (s := ex.notes.get("sensitivities")) and site in s.sites:
        rows.append(["Sensitivity (§6.2)", sci(float(s.sites[site]))])
    rows.append(["Type (§6.3)", _type(ex, site)])
    rows.append(["Fusion (§7)", _fusion(ex, site)])
    if p := ex.notes.get("plan"):
        rows.append(["Layout (§8)", _layout(p, site)])
    if ex.notes.get("kernel") is not None:
        rows.append(["Kernel (§9)", _kernel(ex, site)])
    if "host" in ex.notes:
        rows.append(["C (§10)", _c(ex, site)])
    return rows


def _type(ex: Explain, site: str) -> str:
    from .precision import reason
    sol = ex.notes.get("solution")
    if sol is None:
        return "f64: no realization was solved"
    for d in sol.decisions:
        if d.key == site:
            return f"{d.type}, decision; term {sci(d.term())}; {reason(sol, site)}"
    for o in sol.others:
        if o.site == site:
            return f"{o.type}, {o.role}; term {sci(o.term)}"
    return "f64: not a value the realization types"


def _section_text(ex: Explain, command_word: str) -> str:
    return next((t for c, t in ex.runner.outputs.items() if command_word in " ".join(c.argv)),
                "")


def _fusion(ex: Explain, site: str) -> str:
    text = _section_text(ex, "--stage realize")
    for line in text.split("\n"):
        if line.startswith(site + " "):
            cols = re.split(r"\s{2,}", line.strip())
            return f"{cols[-2]}: {cols[-1]}" if len(cols) >= 4 else line.strip()
    sol = ex.notes.get("solution")
    role = next((o.role for o in (sol.others if sol else []) if o.site == site), "")
    if role.startswith("follows"):
        return f"inside a group: {role}"
    return "not an element-wise value that reaches memory alone (no row in §7)"


def _layout(report, site: str) -> str:
    from ..plan_cmd import _operands
    nest = next((n for n in report.nests if n.site == site), None)
    if nest is None:
        return "no nest of its own"
    c = nest.chosen
    text = (f"nest {nest.site}, {len(nest.priced)} points at {_operands(nest)}; chosen "
            f"{c.point.text()}, {c.seconds * 1e6:.4f} µs, bound by {c.bound_by}")
    if len(nest.priced) > 1:
        r = nest.priced[1]
        text += f"; runner-up {r.point.text()}, {r.seconds * 1e6:.4f} µs"
    return text


def _kernel(ex: Explain, site: str) -> str:
    text = _section_text(ex, "--stage kernel")
    lines = text.split("\n")
    pattern = re.compile(r"^// (k\d+): (.*) at (.*)$")
    for i, line in enumerate(lines):
        m = pattern.match(line)
        if m and re.search(re.escape(site) + r"(?![0-9])", m.group(3)):
            head = lines[i + 1].rstrip(" {") if i + 1 < len(lines) else ""
            return f"{m.group(1)} ({m.group(2)}): `{head}`"
    return "no launch of its own"


def _c(ex: Explain, site: str) -> str:
    try:
        with open(ex.notes["host"], encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except OSError:
        return "no C program (its export did not run)"
    fn = None
    for line in lines:
        if m := re.match(r"^(?:static )?void (presk_\w+)\(", line):
            fn = m.group(1)
        if re.search(r"/\* " + re.escape(site) + r"(?![0-9])", line) and fn:
            return f"launched in `{fn}` of model.c, the launch commented {site}"
    return "no launch commented with it in model.c"


def index(ex: Explain, sections: list[Section]) -> None:
    """listings/site-index.tsv: site, function, line, the sections that name it."""
    from ...emit.core_listing import format_op
    texts = [(s.key, "\n".join(s.body)) for s in sections if s.key not in ("params", "0")]
    rows = ["site\tfunction\tline\tsections"]
    for site, (fn, op) in core_sites(ex).items():
        pat = re.compile(re.escape(site) + r"(?![0-9])")
        named = [f"§{k}" for k, t in texts if pat.search(t)]
        rows.append(f"{site}\t{fn}\t{format_op(op)}\t{' '.join(named) or '-'}")
    ex.listings["site-index.tsv"] = "\n".join(rows) + "\n"
