"""The few Markdown shapes the document is made of: tables, listings, command blocks."""

from __future__ import annotations

from .run import Command


def cell(text: object) -> str:
    """A table cell: `|` escaped, never empty (an empty table cell reads as missing)."""
    s = str(text).replace("|", "\\|").replace("\n", " ")
    return s if s else "—"


def table(header: list[str], rows: list[list[object]]) -> list[str]:
    """A pipe table; with no rows the caller says why instead (never an empty table)."""
    assert rows, "a table without rows: say why there is none instead"
    out = ["| " + " | ".join(cell(h) for h in header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out + [""]


def listing(text: str) -> list[str]:
    """A command's output as a fenced block (a fence longer than any run of backticks)."""
    fence = "```"
    while fence in text:
        fence += "`"
    return [fence + "text", *text.split("\n"), fence, ""]


def shown(out: str | None, why: str | None) -> list[str]:
    """A command's listing, or `Not run: …` with the reason it failed."""
    return listing(out) if out is not None else [f"Not run: {why}", ""]


def commands(cmds: list[Command]) -> list[str]:
    if not cmds:
        return []
    head = "Command:" if len(cmds) == 1 else "Commands:"
    return [head, "", "```sh", *(c.text() for c in cmds), "```", ""]


def sci(x: float, digits: int = 3) -> str:
    """`2.104e0`, `1.320e-8`: the reference's numbers, the exponent unpadded."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def plural(n: int, word: str, many: str | None = None) -> str:
    return f"{n} {word if n == 1 else many or word + 's'}"
