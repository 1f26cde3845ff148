"""The document's pictures: each section's results converted into figures.py's plain data,
drawn into DIR/figures/, and linked where a reader would rather look than read a table.
A picture with nothing to draw says why (figures.NotDrawn), never an empty plot."""

from __future__ import annotations

import os

from .context import Explain


def _place(ex: Explain, name: str) -> tuple[str, str]:
    """(the path to write, the link from the document)."""
    os.makedirs(os.path.join(ex.doc, "figures"), exist_ok=True)
    return os.path.join(ex.doc, "figures", name), f"figures/{name}"


def _lines(picture, href: str) -> list[str]:
    from ...explain.figures import Drawn
    text = picture.markdown(href) if isinstance(picture, Drawn) else picture.markdown()
    return [text, ""]


def sensitivities(ex: Explain) -> list[str]:
    """§6.2: s at each site, and each decision's term against the budget when solved."""
    from ...explain import figures as F
    sens = ex.notes.get("sensitivities")
    if sens is None:
        return []
    sol = ex.notes.get("solution")
    terms = sol.terms() if sol else {}
    rows = [F.SiteSensitivity(site, float(s), terms.get(site))
            for site, s in sorted(sens.sites.items(), key=lambda kv: (-float(kv[1]), kv[0]))]
    path, href = _place(ex, "sensitivities.png")
    return _lines(F.sensitivities(rows, sol.absolute if sol else None, path), href)


def types(ex: Explain) -> list[str]:
    """§6.3: the realization's types over the network, function by function."""
    from ...explain import figures as F
    sol = ex.notes.get("solution")
    if sol is None:
        return []
    sites = [F.SiteType(d.key, d.type, "parameters" if d.kind == "param"
                        else d.key.split("/")[0], "decision") for d in sol.decisions]
    sites += [F.SiteType(o.site, o.type, o.site.split("/")[0],
                         "carried" if o.role.startswith("carried") else o.role)
              for o in sol.others]
    sites.sort(key=lambda s: (s.group == "parameters", s.group, _number(s.site), s.site))
    path, href = _place(ex, "types.png")
    return _lines(F.types(sites, path), href)


def _number(site: str) -> int:
    tail = site.rsplit("%", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def live_bytes(ex: Explain) -> list[str]:
    """§13: the bytes live at each operation of one call, the peak marked."""
    from ...explain import figures as F
    rep = ex.notes.get("memory")
    if rep is None:
        return []
    c = rep.count
    ops = [F.LiveOp(step.site or "", live) for step, live in zip(c.trace.steps, c.live)]
    path, href = _place(ex, "memory.png")
    return _lines(F.live_bytes(ops, c.inputs, path), href)


def kernel_times(ex: Explain, report) -> list[str]:
    """§11: each nest's measured time against the model's prediction."""
    from ...explain import figures as F
    rows = [F.KernelTime(n.site, n.chosen.seconds, n.measured or 0.0) for n in report.nests]
    path, href = _place(ex, "kernel-times.png")
    return _lines(F.kernel_times(rows, report.profile.model.u, path), href)


def loss_curve(ex: Explain, records) -> list[str]:
    """§10: the training run's loss, step by step and each epoch's mean."""
    from ...explain import figures as F
    steps = [F.LossStep(r.step, r.epoch, r.loss) for r in records]
    path, href = _place(ex, "loss.png")
    return _lines(F.loss_curve(steps, path), href)
