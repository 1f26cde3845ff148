"""`--print-pipeline` (on `presk dump`, `run` and `export`): the passes the command runs
from PSK-Core, as `presk-opt -p` reads them, printed instead of running them — so that

    presk dump F.psk --stage core --format mlir > core.mlir
    presk-opt core.mlir -p "$(presk dump F.psk --stage kernel --entry loss --dim B=4 \\
                               --print-pipeline)"

prints what `presk dump F.psk --stage kernel --entry loss --dim B=4 --format mlir` does.
The lists are the pipeline's own (presk/pipeline: `recording_passes`, `kernel_passes`,
`native_passes`); an empty line is a command that runs no pass (an interpreter or an
emitter reading PSK-Core).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import UsageError

if TYPE_CHECKING:
    from xdsl.passes import ModulePass


def add_flag(parser: Any) -> None:
    parser.add_argument("--print-pipeline", dest="print_pipeline", action="store_true",
                        help="print the passes this command runs from PSK-Core (as "
                        "`presk-opt -p` reads them) instead of running it")


def print_pipeline(args: argparse.Namespace) -> int:
    """Print the command's passes on one line."""
    from ..pipeline import pipeline_text
    print(pipeline_text(command_passes(args)))
    return 0


def command_passes(args: argparse.Namespace) -> list[ModulePass]:
    """The passes `presk dump|run|export` runs for these flags."""
    if args.command == "dump":
        return _dump(args)
    if args.command == "run":
        return _run(args)
    return _export(args)


def _entry(args: argparse.Namespace, command: str) -> str:
    if not args.entry:
        raise UsageError(f"presk {command}: --print-pipeline needs --entry, e.g. --entry loss")
    return args.entry


def _dims(args: argparse.Namespace) -> dict[str, int]:
    from ..pipeline import parse_dims
    return parse_dims(getattr(args, "dim", None) or [])


def _dump(args: argparse.Namespace) -> list[ModulePass]:
    from ..pipeline import differentiate_passes, kernel_passes, recording_passes
    if args.stage in ("elab", "core"):
        return []
    entry = _entry(args, "dump")
    if args.stage == "vjp":
        return differentiate_passes([entry], args.remat)
    if args.stage == "sensitivity":
        # presk.analysis.sensitivity: every value's cotangent, then MPFR on PSK-Core.
        return differentiate_passes([entry], args.remat or "store", all_values=True)
    if args.stage == "realize":
        return recording_passes(entry, _dims(args), args.realize, args.fuse,
                                fuse_limit=args.fuse_limit,
                                fuse_reductions=args.fuse_reductions)
    return kernel_passes(entry, _dims(args), args.realize, args.fuse, args.grad, args.remat,
                         fuse_reductions=args.fuse_reductions)


def _run(args: argparse.Namespace) -> list[ModulePass]:
    from ..pipeline import differentiate_passes, kernel_passes, native_passes
    dims = _dims(args)
    fused = getattr(args, "fuse_reductions", False)
    if args.engine == "native":
        return native_passes(args.entry, dims, args.realize, args.grad, args.remat,
                             fuse_reductions=fused)
    if args.engine == "kernel":
        return kernel_passes(args.entry, dims, args.realize, True, args.grad, args.remat,
                             fuse_reductions=fused)
    return differentiate_passes([args.entry] if args.grad else [], args.remat)


def _export(args: argparse.Namespace) -> list[ModulePass]:
    from ..pipeline import native_passes
    if args.target == "pytorch":
        return []  # presk/emit/pytorch.py writes the modules from PSK-Core
    return native_passes(_entry(args, "export"), _dims(args), args.realize, args.grad,
                         args.remat)
