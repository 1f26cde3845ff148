"""What MLIR text is refused before xDSL's parser sees it: the inputs on which that
parser does not finish, or ends in a Python error instead of a diagnostic.

Three classes, each found by the fuzzer (test/fuzz) and each inside xDSL (0.x), so
Presk guards them here, in one linear scan of the text, rather than patching xDSL:

- a string literal xDSL's lexer cannot close: its regex
  `"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"` nests `+` inside `*`, so when no
  closing quote follows on the line (or an escape is invalid), Python's `re` tries every
  way of splitting the characters before it — 2^n steps: a 40-character unterminated
  string hangs presk-opt for hours;
- brackets nested deeper than `MAX_NESTING`: the parser recurses several Python frames
  per level and a RecursionError escapes (a dict attribute at ~100 levels);
- a numeral of more than `MAX_DIGITS` digits: `int()` refuses strings over 4 300 digits
  with a ValueError.

A refusal is `file:line:col: error: message`, the line and a caret (exit 1), like a
parse error. The limits are far above anything Presk prints: its deepest IR nests about
a dozen brackets, and no number in it has more than 25 digits.
"""

from __future__ import annotations

MAX_NESTING = 64
"""Brackets `( [ { <` open at once; xDSL's recursion ends near 100 in the worst case."""

MAX_DIGITS = 1000
"""Digits in one numeral (Python converts at most 4 300)."""

_OPEN, _CLOSE = "([{<", ")]}>"
_ESCAPES = set('"nt\\')
_HEX = set("0123456789abcdefABCDEF")


class MLIRTextError(Exception):
    """A place in the text and why xDSL's parser is not given it."""

    def __init__(self, offset: int, width: int, message: str) -> None:
        super().__init__(message)
        self.offset, self.width, self.message = offset, width, message

    def render(self, path: str, text: str) -> str:
        """`file:line:col: error: message`, the source line, carets under the place."""
        line = text.count("\n", 0, self.offset) + 1
        begin = text.rfind("\n", 0, self.offset) + 1
        end = text.find("\n", self.offset)
        source = text[begin:end if end >= 0 else len(text)]
        col = self.offset - begin + 1
        width = len(str(line))
        caret = "^" * max(1, min(self.width, len(source) - col + 1))
        return "\n".join([f"{path}:{line}:{col}: error: {self.message}",
                          f"{line} | {source}", f"{' ' * width} | {' ' * (col - 1)}{caret}"])


def check_mlir_text(text: str) -> None:
    """Raise MLIRTextError at the first string literal that does not close on its line
    (or holds an escape MLIR lacks), bracket past MAX_NESTING or numeral past
    MAX_DIGITS; time linear in the text."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):  # a comment, to the end of the line
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif c == '"':
            i = _string_end(text, i)
        elif c.isdigit() and c.isascii():
            j = i
            while j < n and text[j].isdigit() and text[j].isascii():
                j += 1
            if j - i > MAX_DIGITS:
                raise MLIRTextError(i, j - i, f"a number of {j - i} digits (at most "
                                    f"{MAX_DIGITS})")
            i = j
        else:
            if c in _OPEN:
                depth += 1
                if depth > MAX_NESTING:
                    raise MLIRTextError(i, 1, f"brackets nest more than {MAX_NESTING} "
                                        "deep")
            elif c in _CLOSE and not (c == ">" and i > 0 and text[i - 1] == "-"):
                depth = max(0, depth - 1)
            i += 1


def _string_end(text: str, start: int) -> int:
    """The offset past the string literal opening at `start`, as xDSL's lexer reads it."""
    i, n = start + 1, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            return i + 1
        if c in "\n\v\f" or (c == "\\" and text[i + 1:i + 2] in ("", "\n")):
            break
        if c == "\\":
            escape = text[i + 1:i + 3]
            if escape[:1] in _ESCAPES:
                i += 2
                continue
            if len(escape) == 2 and set(escape) <= _HEX:
                i += 3
                continue
            shown = text[i + 1] if text[i + 1].isprintable() else f"U+{ord(text[i + 1]):04X}"
            raise MLIRTextError(i, 2, f"`\\{shown}` is no escape of an MLIR string "
                                "(\\\", \\n, \\t, \\\\ or two hex digits)")
        i += 1
    raise MLIRTextError(start, i - start, "a string literal not closed on its line")
