"""Read a program's files: the main file and, depth first, everything it imports."""

from __future__ import annotations

import os

from . import ast as A
from .diagnostics import error, source_lines
from .parser import parse_file


MAX_IMPORT_NESTING = 64


class InputError(Exception):
    """The file named on the command line cannot be read: one line, exit code 2."""


def display_path(path: str) -> str:
    """A path as a user reads it: relative to the working directory when below it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def read_source(path: str, span: A.Span | None, shown: str | None = None,
                sources: dict[str, str] | None = None) -> str:
    """The text of a .psk file, or a diagnostic at `span` (the import that names it).

    A diagnostic inside the file names it `shown`; `sources` receives what it holds of
    text when it is not UTF-8, so that the diagnostic can quote the line.
    """
    if not os.path.exists(path) or os.path.isdir(path):
        what = "is a directory, not a file" if os.path.isdir(path) else "does not exist"
        if span is None:
            raise InputError(f"{path}: {what}")
        raise error("E0101", f"the imported file `{path}` {what}", span)
    try:
        data = open(path, "rb").read()
    except OSError as exc:
        if span is None:
            raise InputError(f"{path}: {exc.strerror}") from None
        raise error("E0004", f"cannot read `{path}`: {exc.strerror}", span) from None
    return decode(shown or path, data, sources)


def decode(path: str, data: bytes, sources: dict[str, str] | None = None) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].removeprefix(b"\xef\xbb\xbf")
        line = before.count(b"\n") + 1
        col = len(before.rsplit(b"\n", 1)[-1].decode("utf-8")) + 1
        span = A.Span(path, line, col, line, col + 1)
        if sources is not None:
            sources[path] = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        raise error("E0002", f"byte 0x{data[exc.start]:02x} at offset {exc.start} is not "
                    "valid UTF-8", span, "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def load_program(main_path: str, sources: dict[str, str]) -> list[A.SourceFile]:
    """Parse the main file and its imports; imports come before the files that import them.

    `sources` receives each file's text as it is read, so a diagnostic can quote it.
    """
    if not main_path:
        raise InputError("an empty file name")
    order: list[A.SourceFile] = []
    done: dict[str, A.SourceFile] = {}

    def visit(path: str, span: A.Span | None, stack: list[tuple[str, str]]) -> str:
        """Load `path` and its imports; return the key of the file it names."""
        key = os.path.realpath(path)
        keys = [k for k, _ in stack]
        if key in keys:
            cycle = [shown for _, shown in stack[keys.index(key):]] + [stack[keys.index(key)][1]]
            raise error("E0102", "import cycle: " + " → ".join(cycle), span)
        if key in done:
            return key
        if len(stack) >= MAX_IMPORT_NESTING:
            names = [shown for _, shown in stack]
            raise error("E0005", f"imports nest more than {MAX_IMPORT_NESTING} files deep: "
                        + " → ".join([*names[:2], "…", names[-1], display_path(path)]), span)
        shown = display_path(path)
        text = read_source(shown if span is not None else path, span, shown, sources)
        sources[shown] = text
        tree = parse_file(shown, text)
        if not tree.decls:
            end = max(1, len(source_lines(text)))
            raise error("E0003", f"`{shown}` holds no declaration",
                        A.Span(shown, end, 1, end, 2),
                        "a Presk file declares at least one module, function or import")
        for decl in tree.decls:
            if isinstance(decl, A.ImportDecl):
                if "\0" in decl.path:  # os.path and open() raise ValueError on it
                    raise error("E0101", "an import path cannot hold a NUL character",
                                decl.path_span)
                target = os.path.join(os.path.dirname(path), decl.path)
                decl.target = done[visit(target, decl.path_span, stack + [(key, shown)])].path
        done[key] = tree
        order.append(tree)
        return key

    visit(main_path, None, [])
    return order


def import_target(importer: A.SourceFile, decl: A.ImportDecl) -> str:
    if decl.target is not None:
        return decl.target
    return display_path(os.path.join(os.path.dirname(importer.path), decl.path))
