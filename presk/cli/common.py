"""What every `presk` subcommand shares: its two kinds of failure, elaboration with
diagnostics printed the way the user reads them, and the flags that record an entry."""

from __future__ import annotations

import sys
from typing import Any


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


def add_recording_arguments(group: Any, what: str) -> None:
    """--entry, --dim, --realize, --grad, --remat: which entry to record down to PSK-Kernel,
    at which dims, under which realization (`presk export --target c`, `presk-translate
    --to llvm|c`)."""
    group.add_argument("--entry", help=f"the function to {what}, e.g. loss")
    group.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                       help="a dim's value, e.g. --dim B=4 (repeatable)")
    group.add_argument("--realize", metavar="REALIZATION",
                       help="the realization (a path, @path or inline JSON); absent: all f64")
    group.add_argument("--grad", action="store_true", help="the entry's value and gradient")
    group.add_argument("--remat", choices=["store", "recompute"], default="store",
                       help="with --grad: what the forward sweep keeps for the reverse one")
