"""`presk-translate`: from one form of a program to another, like `mlir-translate`.

    presk-translate FILE.psk --to mlir        the program in PSK-Core, MLIR text
    presk-translate FILE.psk --to listing     the same as the Core listing (`presk dump`)
    presk-translate FILE.mlir --to listing    PSK-Core MLIR text as the listing
    presk-translate FILE.psk --to llvm --entry loss --dim B=4 [--realize R] [--grad]
                                              the entry's native module as LLVM IR, as it
                                              goes into O2 (`--optimized`: as it comes out)
    presk-translate KERNEL.mlir --to llvm     the same from a PSK-Kernel module (its
                                              `entry` hosts), e.g. `presk dump --stage
                                              kernel --format mlir`'s
    presk-translate FILE.psk --to c --entry loss --dim B=4 [--realize R] [--grad]
    presk-translate KERNEL.mlir --to c        the C program of `presk export --target c`
                                              (its sources; no recorded data)
    presk-translate FILE.psk --to pytorch     the Python modules of `presk export --target
    presk-translate FILE.mlir --to pytorch    pytorch` (from Core .mlir: one module)

`-o FILE` writes the result (atomically) instead of printing it; for the targets of
several files (c, pytorch) `-o DIR` writes each file into DIR, and printed, each file
follows a line naming it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, NoReturn

from ..gc_pause import tune_process
from ..pipeline import kernel_pipeline, load_core, output_names, parse_dims, parse_mlir
from .common import (
    ProgramError, UsageError, add_plan_argument, add_recording_arguments, exit_code, printable_streams, reported,
    warn,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"presk-translate: {message} (see `presk-translate --help`)")


def _to_mlir(module) -> str:
    return str(module) + "\n"


def _to_listing(module) -> str:
    from ..emit.core_listing import format_module
    return format_module(module)


def kernel_module(module, args: argparse.Namespace):
    """The PSK-Kernel module to emit: the file's own, or the entry recorded down to
    PSK-Kernel from PSK-Core (as `presk run --engine native` records it)."""
    return recorded(module, args)[0]


def recorded(module, args: argparse.Namespace):
    """(the PSK-Kernel module, its entry's output names or None for the file's own)."""
    from ..dialects import kernel as K
    if K.hosts(module):
        if args.entry or args.dim or args.realize or args.grad:
            raise UsageError("presk-translate: a PSK-Kernel file is recorded already: "
                             "--entry, --dim, --realize and --grad apply to a program")
        if not any(h.entry is not None for h in K.hosts(module).values()):
            raise UsageError("presk-translate: the PSK-Kernel module has no host marked "
                             "`entry`")
        return module, None
    if not args.entry:
        raise UsageError(f"presk-translate: --to {args.to} needs --entry, e.g. --entry loss")
    pipe = kernel_pipeline(module, args.entry, parse_dims(args.dim), args.realize, True,
                           args.grad, args.remat, args.plan)
    return pipe.kernel, output_names(pipe.realize)


def _to_llvm(module, args: argparse.Namespace) -> str:
    """The kernel module lowered to the llvm dialect and translated to LLVM IR for the
    host."""
    from ..conversion.kernel_to_std import NativeLoweringError
    from ..emit.llvm import NativeCompileError, llvm_ir, optimize
    from ..runtime.compile import llvm_dialect_module
    try:
        llvm_module, sigs = llvm_dialect_module(kernel_module(module, args))
    except (NativeLoweringError, NativeCompileError) as exc:
        print(f"presk-translate: error: {exc}", file=sys.stderr)
        raise ProgramError() from None
    text = llvm_ir(llvm_module, [s.symbol for s in sigs])
    return str(optimize(text)) if args.optimized else text


def _to_c(module, args: argparse.Namespace) -> dict[str, str]:
    from ..emit.c_program import c_sources
    return c_sources(*recorded(module, args))


def _to_pytorch(module, program) -> dict[str, str]:
    from ..emit.pytorch import ExportError, pytorch_sources
    try:
        return pytorch_sources(program if program is not None else module)
    except ExportError as exc:
        raise UsageError(f"presk-translate: {exc}") from None


TARGETS: dict[str, Callable] = {"mlir": _to_mlir, "listing": _to_listing, "llvm": _to_llvm,
                                "c": _to_c, "pytorch": _to_pytorch}
NEEDS_ENTRY = {"llvm", "c"}
COMMENT = {"c": "//", "pytorch": "#"}


def _write(text: str, path: str | None) -> None:
    from ..analysis.artifact import write_atomic
    if path is None:
        sys.stdout.write(text)
        return
    try:
        write_atomic(path, text)
    except OSError as exc:
        raise UsageError(f"presk-translate: cannot write {path}: {exc.strerror}") from None


def _load(args: argparse.Namespace):
    """(module, program): a .psk program lowered to PSK-Core and the program, or an .mlir
    file (at any of Presk's stages for the targets that emit kernels) and None."""
    if args.file.endswith(".mlir") and args.to in NEEDS_ENTRY:
        return parse_mlir(args.file, all_stages=True), None
    return load_core(args.file, warn)


def _write_files(files: dict[str, str], directory: str | None, comment: str) -> None:
    """Each file into `directory` (created), or printed after a line naming it."""
    if directory is None:
        for name, text in files.items():
            sys.stdout.write(f"{comment} ---- {name} ----\n{text}")
            if not text.endswith("\n"):
                sys.stdout.write("\n")
        return
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"presk-translate: cannot create {directory}: {exc.strerror}") from None
    for name, text in files.items():
        _write(text, os.path.join(directory, name))


@reported
def _translate(args: argparse.Namespace) -> int:
    if args.to not in NEEDS_ENTRY and (args.entry or args.dim or args.realize
                                       or args.grad):
        raise UsageError(f"presk-translate: --entry, --dim, --realize and --grad apply "
                         f"to --to llvm or c, not --to {args.to}")
    if args.optimized and args.to != "llvm":
        raise UsageError(f"presk-translate: --optimized applies to --to llvm, not "
                         f"--to {args.to}")
    module, program = _load(args)
    target = TARGETS[args.to]
    if args.to in NEEDS_ENTRY:
        out = target(module, args)
    else:
        out = target(module, program) if args.to == "pytorch" else target(module)
    if isinstance(out, dict):
        _write_files(out, args.output, COMMENT[args.to])
    else:
        _write(out, args.output)
    return 0


def main(argv: list[str] | None = None) -> int:
    printable_streams()
    tune_process()  # presk/gc_pause.py: this process is ours
    parser = _Parser(prog="presk-translate", description=__doc__.split("\n")[0])
    parser.add_argument("file", help="a .psk program or a PSK-Core .mlir file")
    parser.add_argument("--to", required=True, choices=sorted(TARGETS),
                        help="what to translate to")
    parser.add_argument("-o", "--output", help="write here instead of to standard output")
    entry = parser.add_argument_group("with --to llvm or c")
    add_recording_arguments(entry, "translate")
    add_plan_argument(entry)
    entry.add_argument("--optimized", action="store_true",
                       help="the IR after LLVM's O2 for this machine")
    return exit_code(lambda: _translate(parser.parse_args(argv)), "presk-translate")


if __name__ == "__main__":
    sys.exit(main())
