"""What every `presk` subcommand shares: its two kinds of failure, elaboration with
diagnostics printed the way the user reads them, and the flags that record an entry."""

from __future__ import annotations

import argparse
import functools
import math
import sys
from typing import Any, Callable, TypeVar

from ..limits import ResourceError
from ..pipeline.errors import InvalidInput, InvalidProgram


class UsageError(Exception):
    """A bad command line or input file: one line, exit code 2."""


class ProgramError(Exception):
    """The user's program has an error, already printed: exit code 1."""


Command = TypeVar("Command", bound=Callable[..., int])


def reported(command: Command) -> Command:
    """The command with the pipeline's failures as the command line reports them: an
    InvalidInput a UsageError (one line, exit 2), an InvalidProgram printed on stderr and
    a ProgramError (exit 1)."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> int:
        try:
            return command(*args, **kwargs)
        except InvalidInput as exc:
            raise UsageError(str(exc)) from None
        except InvalidProgram as exc:
            print(exc, file=sys.stderr)
            raise ProgramError() from None
    return run  # type: ignore[return-value]


def exit_code(run: Callable[[], int], prog: str) -> int:
    """`run()`'s exit code, a failure's as the command line reports it: a UsageError its
    line and 2, a ProgramError (already printed) 1, a ResourceError (a size or a call
    beyond the machine, refused before work) `prog: why` and 2, a reader that stopped
    early (`| head`) 0."""
    try:
        return run()
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except ProgramError:
        return 1
    except ResourceError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def warn(text: str) -> None:
    """A warning of the program, on stderr."""
    print(text, file=sys.stderr)


@reported
def elaborate_or_report(path: str):
    """Elaborate a program, printing its diagnostics; raise ProgramError on an error."""
    from ..pipeline.load import elaborate_program
    return elaborate_program(path, warn)


DIM_HELP = "a dim's value, e.g. --dim B=4 (repeatable)"


def add_dim_argument(group: Any, help: str = DIM_HELP) -> None:
    """--dim NAME=N, repeatable: every command that records a program at given sizes."""
    group.add_argument("--dim", action="append", default=[], metavar="NAME=N", help=help)


def add_entry_arguments(group: Any, what: str, required: bool = False) -> None:
    """--entry and --dim: the function a command works on (`the function to {what}`) and
    its dims."""
    group.add_argument("--entry", required=required, help=f"the function to {what}, e.g. loss")
    add_dim_argument(group)


def add_recording_arguments(group: Any, what: str) -> None:
    """--entry, --dim, --realize, --grad, --remat: which entry to record down to PSK-Kernel,
    at which dims, under which realization (`presk export --target c`, `presk-translate
    --to llvm|c`)."""
    add_entry_arguments(group, what)
    group.add_argument("--realize", metavar="REALIZATION",
                       help="the realization (a path, @path or inline JSON); absent: all f64")
    group.add_argument("--grad", action="store_true", help="the entry's value and gradient")
    group.add_argument("--remat", choices=["store", "recompute"], default="store",
                       help="with --grad: what the forward sweep keeps for the reverse one")


FUSE_REDUCTIONS_HELP = ("fusion across calls (psk-inline) and reductions fused with their "
                        "element-wise producer and consumers (psk-fuse-reduce: RMSNorm's "
                        "square, mean and scale in one nest over the rows; a bias and a "
                        "residual add as a product's epilogue); the same bits, fewer "
                        "launches")
"""What `--fuse-reductions` does (presk run, presk dump)."""


def add_plan_argument(parser: Any) -> None:
    """--plan: the layout plan `presk plan` wrote for this recording (presk-plan/1)."""
    parser.add_argument("--plan", metavar="PLAN",
                        help="a layout plan (@plan.json, from `presk plan` for the same entry, "
                        "dims and realization): each kernel in its planned layout, same bits")


def output_file(path: str) -> str:
    """An argparse `type` for a file a command writes: refused at once (one line, exit 2)
    when it is a device, a directory, a fifo or a socket, or its directory is missing or
    not writable — before any work, and write_atomic checks again before it renames."""
    import argparse

    from ..analysis.artifact import check_output
    try:
        check_output(path)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc.strerror}") from None
    return path


def printable_streams() -> None:
    """Standard output and error that print whatever Presk writes: on a terminal that
    cannot encode ℝ, θ or · (`PYTHONIOENCODING=ascii`, a C locale without UTF-8) the
    characters it lacks are written as `\\u211d` escapes instead of ending the command
    with a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "ℝθ·…→".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            reconfigure = getattr(stream, "reconfigure", None)
            if reconfigure is not None:
                reconfigure(errors="backslashreplace")


def positive_whole_number(text: str) -> int:
    """An argparse type: 1, 2, … (a bad value is argparse's one line, exit 2)."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def relative_budget(text: str) -> float:
    """An argparse type: a relative error budget in (0, 1) (`solve --budget`, `dump
    --stage opt --budget`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0 or value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a budget is a relative error in (0, 1)")
    return value
