"""`presk-translate`: from one form of a program to another, like `mlir-translate`.

    presk-translate FILE.psk --to mlir        the program in PSK-Core, MLIR text
    presk-translate FILE.psk --to listing     the same as the Core listing (`presk dump`)
    presk-translate FILE.mlir --to listing    PSK-Core MLIR text as the listing

`-o FILE` writes the result (atomically) instead of printing it. The emitters of later
stages (C, PyTorch, LLVM IR) join `--to` as they land.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Callable, NoReturn

from .common import ProgramError, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"presk-translate: {message} (see `presk-translate --help`)")


def _to_mlir(module) -> str:
    return str(module) + "\n"


def _to_listing(module) -> str:
    from ..emit.core_listing import format_module
    return format_module(module)


TARGETS: dict[str, Callable] = {"mlir": _to_mlir, "listing": _to_listing}


def _write(text: str, path: str | None) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".presk-", dir=directory)
    except OSError as exc:
        raise UsageError(f"presk-translate: cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="presk-translate", description=__doc__.split("\n")[0])
    parser.add_argument("file", help="a .psk program or a PSK-Core .mlir file")
    parser.add_argument("--to", required=True, choices=sorted(TARGETS),
                        help="what to translate to")
    parser.add_argument("-o", "--output", help="write here instead of to standard output")
    try:
        args = parser.parse_args(argv)
        from .core_cmds import load_core
        module, _ = load_core(args.file)
        _write(TARGETS[args.to](module), args.output)
        return 0
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except ProgramError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
