"""`presk export FILE --target pytorch -o DIR`: one Python module per .psk file, written by
presk/emit/pytorch.py, each file replaced atomically (a temporary file, then a rename), so
that an interrupted export never leaves a half-written module behind."""

from __future__ import annotations

import argparse
import os

from ..analysis.artifact import write_atomic
from ..pipeline import load_core
from .common import UsageError, reported, warn


@reported
def run(args: argparse.Namespace) -> int:
    from ..emit.pytorch import ExportError, pytorch_export, summary_line
    module, program = load_core(args.file, warn)
    stem = os.path.splitext(os.path.basename(args.file))[0]
    try:
        export = pytorch_export(module, stem, program=program)
    except ExportError as exc:
        raise UsageError(f"presk export: {args.file}: {exc}") from None
    write_files(export.sources, args.output)
    print(summary_line(export, args.output))
    return 0


def write_files(files: dict[str, str], directory: str) -> None:
    """Create `directory` and write each file into it through a temporary file."""
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"presk export: -o {directory}: exists and is not a directory")
    try:
        os.makedirs(directory, exist_ok=True)
        for name, text in files.items():
            write_atomic(os.path.join(directory, name), text)
    except OSError as exc:
        raise UsageError(f"presk export: -o {directory}: cannot write "
                         f"({exc.strerror or exc})") from None
