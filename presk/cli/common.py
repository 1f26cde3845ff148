"""What every `presk` subcommand shares: its two kinds of failure, and elaboration with
diagnostics printed the way the user reads them."""

from __future__ import annotations

import sys


class UsageError(Exception):
    """A bad command line or input file: one line, exit code 2."""


class ProgramError(Exception):
    """The user's program has an error, already printed: exit code 1."""


def elaborate_or_report(path: str):
    """Elaborate a program, printing its diagnostics; raise ProgramError on an error."""
    from ..frontend.diagnostics import CompileError
    from ..frontend.elaborate import elaborate
    from ..frontend.load import InputError

    sources: dict[str, str] = {}
    try:
        program = elaborate(path, sources)
    except InputError as exc:
        raise UsageError(f"presk: {exc}") from None
    except CompileError as exc:
        print(exc.diagnostic.render(sources), file=sys.stderr)
        raise ProgramError() from None
    for warning in program.diagnostics:
        print(warning.render(sources), file=sys.stderr)
    return program
