"""Diagnostics: what a user sees for a mistake in their program.

`file:line:col: error[E0204]: message`, the source line, a caret under the span, and a
hint where one helps. Codes are stable: docs/language.md lists them all.
"""

from __future__ import annotations

import difflib
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable

from .ast import Span

CODES: dict[str, str] = {
    # reading and parsing
    "E0001": "syntax error",
    "E0002": "the file is not valid UTF-8",
    "E0003": "the file holds no declaration",
    "E0004": "a file cannot be read",
    "E0005": "the program nests too deeply (expressions, calls, modules or imports)",
    "E0006": "a reserved word used as a name",
    # imports and names
    "E0101": "an imported file does not exist or is not a file",
    "E0102": "an import cycle",
    "E0201": "a name defined twice",
    "E0202": "an unknown dim or const in a size",
    "E0203": "an unknown module",
    "E0204": "an unknown name",
    "E0205": "an unknown function",
    "E0206": "a name used as what it is not",
    # declarations
    "E0301": "a const whose value does not fit its type",
    "E0302": "an unknown scalar type",
    "E0303": "an unknown initializer or a bad initializer argument",
    "E0304": "the wrong number of dims for a module",
    "E0305": "a parameter whose type is not a tensor of fixed axes",
    "E0306": "a module that uses itself",
    "E0307": "a bad default value",
    "E0308": "a malformed tensor type or size",
    # expressions and shapes
    "E0401": "shapes that do not fit",
    "E0402": "values of different kinds mixed",
    "E0403": "a result that does not match its declaration",
    "E0404": "a reduction over an axis the operand lacks",
    "E0405": "the wrong number of arguments",
    "E0406": "a tuple of the wrong arity",
    "E0407": "an argument of the wrong type",
    "E0408": "a bad power",
    "E0409": "a stack applied to a function that is not a step",
    "E0410": "a gradient that cannot be taken",
    # optimizer, training, assertions
    "E0501": "an unknown optimizer or field",
    "E0502": "an optimizer field of the wrong type",
    "E0503": "an unknown schedule or schedule argument",
    "E0504": "an optimizer field whose value the optimizer refuses",
    "E0601": "a training item that is unknown, missing or repeated",
    "E0602": "a training objective of the wrong type",
    "E0603": "a data stream that cannot be used",
    "E0604": "a static assertion that fails",
    "E0605": "a static condition that is not static",
    # warnings
    "W0001": "a let that is never used",
    "W0501": "a schedule's warmup longer than the training run",
}


@dataclass
class Diagnostic:
    code: str
    message: str
    span: Span | None
    hint: str | None = None
    notes: list[tuple[Span, str]] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return self.code.startswith("E")

    def render(self, sources: dict[str, str]) -> str:
        kind = "error" if self.is_error else "warning"
        if self.span is None:
            return f"{kind}[{self.code}]: {self.message}"
        lines = [f"{self.span}: {kind}[{self.code}]: {self.message}"]
        lines += _excerpt(self.span, sources.get(self.span.file))
        pad = " " * (len(str(self.span.line)) + 1)  # `=` under the excerpt's `|`
        for span, note in self.notes:
            lines.append(f"{pad}= note: {span}: {note}")
        if self.hint:
            lines.append(f"{pad}= hint: {self.hint}")
        return "\n".join(lines)


def source_lines(text: str) -> list[str]:
    """The lines of a source as the parser counts them: only `\n` ends a line (not the
    other breaks str.splitlines knows, such as U+2028 or a form feed)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


def _excerpt(span: Span, text: str | None) -> list[str]:
    if text is None:
        return []
    lines = source_lines(text)
    if not 1 <= span.line <= len(lines):
        return []
    line = _visible(lines[span.line - 1].expandtabs(1))
    width = max(1, (span.end_col - span.col) if span.end_line == span.line else len(line) - span.col + 1)
    gutter = " " * len(str(span.line))
    return [f"{span.line} | {line}", f"{gutter} | {' ' * (span.col - 1)}{'^' * width}"]


def _visible(line: str) -> str:
    """The line with control and format characters (a vertical tab, a right-to-left
    override) shown as U+FFFD: one column each, so the caret stays under its span."""
    if line.isprintable():
        return line
    return "".join("\ufffd" if unicodedata.category(c) in _HIDDEN else c for c in line)


_HIDDEN = {"Cc", "Cf", "Zl", "Zp"}


class CompileError(Exception):
    """Raised to stop at the first error where going on would only cascade."""

    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    others = [c for c in candidates if c != name]  # the name itself is no suggestion
    close = difflib.get_close_matches(name, others, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def error(code: str, message: str, span: Span | None, hint: str | None = None,
          notes: list[tuple[Span, str]] | None = None) -> CompileError:
    return CompileError(Diagnostic(code, message, span, hint, notes or []))
