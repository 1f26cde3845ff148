"""`presk explain`'s document: the sections in the reference's order, the artifacts with
SHA256SUMS, the listings too long to inline, written into a directory beside DIR and renamed
onto it — never a half-written DIR, never one that is not a previous explain output replaced.

Deterministic: no time stamp and no path of the machine (`$DOC` stands for DIR), every table
in a fixed order; two runs give the same bytes (test/unit/test_explain.py checks).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from typing import Any, Callable

from . import front, machine, memory, precision, program, sites
from .context import Explain, Options, Section
from .markdown import commands, listing

MARKER = "<!-- written by presk explain: regenerate it, do not edit -->"


class ExplainError(Exception):
    """DIR cannot be written: one line, exit 2."""


def check_target(out: str) -> None:
    """DIR is absent, or a previous explain output (its explain.md opens with MARKER)."""
    if not os.path.lexists(out):
        parent = os.path.dirname(os.path.abspath(out))
        if not os.path.isdir(parent):
            raise ExplainError(f"presk explain: {out}: its directory {parent} does not exist")
        return
    doc = os.path.join(out, "explain.md")
    if os.path.isdir(out) and not os.path.islink(out) and os.path.isfile(doc):
        with open(doc, encoding="utf-8", errors="replace") as fh:
            if fh.readline().rstrip("\n") == MARKER:
                return
    raise ExplainError(f"presk explain: {out} exists and is not a previous `presk explain` "
                       "output (no explain.md of its own): refusing to replace it")


def write(options: Options, parse: Callable[[list[str]], Any]) -> str:
    """Write DIR; the document's text. `parse` is presk's own parser's `parse_args`:
    each section's command line is read by it."""
    check_target(options.out)
    out = os.path.normpath(options.out)
    parent, name = os.path.split(out)
    tmp = os.path.join(parent, f".{name}.explain-tmp")
    if os.path.lexists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(os.path.join(tmp, "artifacts"))
    try:
        text = _write_into(options, tmp, parse)
        _replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return text


def _replace(tmp: str, out: str) -> None:
    """tmp renamed onto out; a previous output moved aside first, then removed."""
    old = None
    if os.path.lexists(out):
        old = tmp + "-old"
        if os.path.lexists(old):
            shutil.rmtree(old)
        os.rename(out, old)
    os.rename(tmp, out)
    if old:
        shutil.rmtree(old)


def _write_into(options: Options, doc: str, parse: Callable[[list[str]], Any]) -> str:
    ex = Explain(options, doc, parse)
    ex.core  # a mistake in the program is its diagnostic, before any section runs
    body = [program.source(ex), program.elaboration(ex), program.core(ex),
            program.differentiation(ex), program.egraph(ex), *precision.precision(ex),
            machine.fusion(ex), machine.machine(ex), machine.kernels(ex), machine.targets(ex),
            machine.measured(ex)]
    machine.host(ex, next(s for s in body if s.key == "9"))
    body += [sites.sites(ex), memory.memory(ex)]
    sites.index(ex, body)
    if options.profile:
        shutil.copyfile(options.profile, os.path.join(doc, "artifacts", "profile.json"))
    if ex.listings:
        os.makedirs(os.path.join(doc, "listings"))
        for name, text in sorted(ex.listings.items()):
            with open(os.path.join(doc, "listings", name), "w", encoding="utf-8") as fh:
                fh.write(text)
    sums = checksums(os.path.join(doc, "artifacts"))
    head = front.parameters(ex)
    head.body += front.artifacts(ex, sums)
    sections = [head, front.summary(ex), *body, appendix(body)]
    text = render(ex, sections)
    with open(os.path.join(doc, "explain.md"), "w", encoding="utf-8") as fh:
        fh.write(text)
    if options.pdf:
        _pdf(doc)
    return text


def _pdf(doc: str) -> None:
    """DIR/explain.pdf, typeset by typst (presk/explain/pdf.py), pictures included."""
    from ...explain.pdf import PdfError, UnsupportedMarkdown, write_pdf
    try:
        write_pdf(os.path.join(doc, "explain.md"), os.path.join(doc, "explain.pdf"))
    except (PdfError, UnsupportedMarkdown, ImportError) as exc:
        raise ExplainError(f"presk explain --pdf: {exc}") from None


def checksums(root: str) -> dict[str, str]:
    """SHA-256 of every file under root (relative paths, sorted), written as root/SHA256SUMS
    in `sha256sum -c` format."""
    sums = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(d, f)
            with open(path, "rb") as fh:
                sums[os.path.relpath(path, root).replace(os.sep, "/")] = \
                    hashlib.sha256(fh.read()).hexdigest()
    with open(os.path.join(root, "SHA256SUMS"), "w", encoding="utf-8") as fh:
        fh.write("".join(f"{v}  {k}\n" for k, v in sorted(sums.items())))
    return sums


def appendix(sections: list[Section]) -> Section:
    seen: list = []
    for s in sections:
        seen += [c for c in s.commands if c not in seen]
    body = ["The commands behind the sections, in order, run from the directory the program "
            "was named from, with DOC set to this document's directory. Each prints, "
            "verbatim, the listing its section holds (`$DOC` for the directory's path).", ""]
    body += ["```sh", *(c.text() for c in seen), "```", ""]
    return Section("appendix", "Appendix: the commands", body)


def heading(s: Section) -> str:
    if s.key in ("params", "appendix"):
        return f"## {s.title}"
    level = "###" if "." in s.key else "##"
    return f"{level} §{s.key} {s.title}"


def render(ex: Explain, sections: list[Section]) -> str:
    o = ex.options
    budget = f", under a budget of {o.budget_text}" if o.budget is not None else ""
    profile = f", planned under the profile `{o.profile}`" if o.profile else ""
    lines = [MARKER, "", f"# `{o.entry}` of `{o.file}`{budget}{profile}", "",
             "What the Presk compiler does to one program: `presk explain`. Generated: "
             "every figure below is computed in the run that wrote it, and every listing is "
             "the output of the commands under it.", ""]
    for s in sections:
        lines += [heading(s), "", *s.body]
        if s.key != "appendix":
            lines += commands(s.commands)
    return "\n".join(lines).rstrip("\n") + "\n"


__all__ = ["ExplainError", "MARKER", "Options", "check_target", "listing", "write"]
