"""The commands a document shows, and running them in this process.

A section of `presk explain` holds listings that are, byte for byte, what its `presk …`
commands print when run from the program's directory with DOC set to the document's
directory. So the listing is made by running the command itself — the same parser, the same
function — in this process, with its standard output captured, and with DOC's value written
back as `$DOC` (the document never names a path of the machine it was made on).
"""

from __future__ import annotations

import contextlib
import io
import shlex
from dataclasses import dataclass, field
from typing import Any, Callable


class CommandFailed(Exception):
    """A section's command exited non-zero: its first line of standard error, to print as
    `not run: …` where the section's listing would be."""


@dataclass(frozen=True)
class Command:
    """One `presk …` command line of a section, its paths under `$DOC` unexpanded."""

    argv: tuple[str, ...]

    def text(self) -> str:
        """The line as the appendix prints it: `$DOC/…` kept for the shell to expand."""
        return "presk " + " ".join(_quote(a) for a in self.argv)

    def expanded(self, doc: str) -> list[str]:
        return [a.replace("$DOC", doc) for a in self.argv]


def _quote(arg: str) -> str:
    """shlex.quote, but `$DOC/…` left for the shell (it holds no other special character)."""
    if arg.startswith("$DOC") and shlex.quote(arg[4:]) == arg[4:]:
        return arg
    if arg.startswith("@$DOC") and shlex.quote(arg[5:]) == arg[5:]:
        return arg
    return shlex.quote(arg)


@dataclass
class Runner:
    """Runs each command once, in this process, and keeps what it printed."""

    doc: str  # the directory DOC names while the document is written
    # presk's own parser (`presk.cli.main`'s, handed down by the explain command, so that
    # nothing here imports the module that registers the explain command: no cycle)
    parse: Callable[[list[str]], Any]
    outputs: dict[Command, str] = field(default_factory=dict)

    results: dict[Command, Any] = field(default_factory=dict)

    def run(self, command: Command) -> str:
        """What `command` prints on standard output, `$DOC` for the document's directory,
        without its final newline; CommandFailed with its first error line if it fails."""
        return self.call(command)[0]

    def call(self, command: Command, function: Callable[[Any], Any] | None = None
             ) -> tuple[str, Any]:
        """Run `command` as `presk` does — its line parsed by presk's own parser — but call
        `function(args)` (the command's own work, which returns what it computed) instead
        of its entry point when given: (what it printed, what `function` returned)."""
        if command in self.outputs:
            return self.outputs[command], self.results.get(command)
        from ..common import exit_code, printable_streams, reported
        returned: list[Any] = []

        def go() -> int:
            args = self.parse(command.expanded(self.doc))
            value = reported(function or args.run)(args)
            returned.append(value)
            return value if function is None else 0
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            printable_streams()
            status = exit_code(go, "presk")
        if status != 0:
            first = next((ln for ln in err.getvalue().splitlines() if ln.strip()), "")
            raise CommandFailed(first.replace(self.doc, "$DOC") or f"exit status {status}")
        text = out.getvalue().replace(self.doc, "$DOC").rstrip("\n")
        self.outputs[command] = text
        self.results[command] = returned[0] if function is not None else None
        return text, self.results[command]

    def attempt(self, command: Command, function: Callable[[Any], Any] | None = None
                ) -> tuple[str | None, Any, str | None]:
        """(output, result, None), or (None, None, the reason it did not run)."""
        try:
            out, result = self.call(command, function)
            return out, result, None
        except CommandFailed as exc:
            return None, None, str(exc)
