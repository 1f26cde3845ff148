"""`presk export FILE --target c --entry E --dim … [--realize R] [--grad] [--threads N]
-o DIR`: the C program of presk/pipeline/export.py `export_c` (the entry recorded as
`presk run --engine native` records it, run once natively, written with that run's inputs
and outputs so that `make -C DIR check` compares the C with the native backend bit for
bit). `--threads N` is PRESK_THREADS=N for the recording: the default layouts split large
contractions among N workers, and the program runs them on its worker pool.

  run(args) -> int
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ..pipeline.export import CExport, export_c
from .common import ProgramError, UsageError, reported
from .runs import prepare_run


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def summary(args: argparse.Namespace, dims: dict[str, int], result: CExport) -> str:
    """The one line `presk export` prints: what the program runs per call and where."""
    s = result.shape
    at = ", ".join(f"{k} = {v}" for k, v in dims.items())
    what = f"`{args.entry}`" + (" (value and gradient)" if args.grad else "")
    return (f"presk export: {what}{' at ' + at if at else ''} in {result.realization_name}: "
            f"{_plural(s.launches, 'launch', 'launches')} of {_plural(s.kernels, 'kernel')}"
            + (f" ({s.split} split among up to {s.threads} threads on the worker pool)"
               if s.split else "") + ", "
            f"{_plural(s.functions, 'function')} besides the entry's and "
            f"{_plural(s.loops, 'loop')}, an arena of {s.arena_bytes} bytes, into "
            f"{args.output}; `make -C {args.output} check` builds it and compares it with "
            "the native backend")


def _check_output(path: str) -> None:
    """The output directory exists (or is made) and takes files: else one line, exit 2."""
    try:
        os.makedirs(path, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".presk-", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise UsageError(f"presk export: cannot write into {path}: "
                         f"{exc.strerror or exc}") from None


@contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """PRESK_THREADS=n while the entry is recorded (the default layouts' workers)."""
    if n is None:
        yield
        return
    if n < 1:
        raise UsageError(f"presk export: --threads is 1 or more, not {n}")
    saved = os.environ.get("PRESK_THREADS")
    os.environ["PRESK_THREADS"] = str(n)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PRESK_THREADS", None)
        else:
            os.environ["PRESK_THREADS"] = saved


@reported
def run(args: argparse.Namespace) -> int:
    """`presk export … --target c`: write the program, print the summary line and files."""
    exported(args)
    return 0


def exported(args: argparse.Namespace) -> CExport:
    """The C program written and its summary printed; the CExport (`presk explain`)."""
    if not args.entry:
        raise UsageError("presk export: --target c needs --entry, e.g. --entry loss")
    _check_output(args.output)
    with _threads(getattr(args, "threads", None)):
        return _export(args)


def _export(args: argparse.Namespace) -> CExport:
    from ..emit.c_program import CExportError
    module, entry, params, values, pipe = prepare_run(args)
    try:
        result = export_c(module, args.entry, entry.dims, params, values, args.output,
                          args.realize, args.grad, args.remat, getattr(args, "plan", None),
                          pipe)
    except OSError as exc:
        raise UsageError(f"presk export: cannot write into {args.output}: "
                         f"{exc.strerror or exc}") from None
    except CExportError as exc:
        print(f"presk: error: the C export cannot write `{args.entry}`: {exc}",
              file=sys.stderr)
        raise ProgramError() from None
    print(summary(args, entry.dims, result))
    for name, text in result.files.items():
        print(f"  {name:<14} {_plural(text.count(chr(10)), 'line')}")
    return result
