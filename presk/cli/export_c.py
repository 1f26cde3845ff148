"""`presk export FILE --target c --entry E --dim … [--realize R] [--grad] -o DIR`.

The entry is recorded down to PSK-Kernel exactly as `presk run --engine native` records it
(presk/cli/kernel_cmds.py `entry_call`), run once as native code on the weights and inputs
of `--seed` (or `--weights`/`--inputs`), and written as a C program
(presk/emit/c_program.py) with that run's data: `inputs/<file>.bin` (what the native
entry read, in each buffer's storage type) and `expected/<file>.bin` (what it wrote), so
that `make -C DIR check` compares the C with the native backend bit for bit.

Every file is written atomically (a temporary file in DIR, then a rename).

Python API:
  export_c(core_module, entry, dims, params, values, out_dir, realization=None,
           grad=False, remat="store") -> CExport
  run(args) -> int
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from ..analysis.artifact import write_atomic
from .common import ProgramError, UsageError


@dataclass
class CExport:
    files: dict[str, str]  # relative path → text (sources) — data files not included
    data: dict[str, bytes]  # relative path → bytes (inputs/, expected/)
    shape: Any  # presk.emit.c_program.Shape
    realization_name: str
    call: Any  # the recorded entry (presk.cli.kernel_cmds.EntryCall): its inputs as stored
    entry: Any  # presk.emit.c_program.EntryC: the C names of its buffers and files


def _little_endian(array) -> bytes:
    import numpy as np
    a = np.ascontiguousarray(array)
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def write_into(root: str, relative: str, content: str | bytes) -> None:
    """DIR/relative (its folder created), written atomically."""
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, content)


def export_c(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
             values: dict[str, Any], out_dir: str, realization=None, grad: bool = False,
             remat: str = "store") -> CExport:
    """Record, run natively, and write the C program with the run's data into out_dir."""
    from ..emit.c_program import c_sources, entry_c, program_shape
    from .kernel_cmds import entry_call
    from .native_cmds import compile_call
    call = entry_call(core_module, entry, dims, params, values, realization, True, grad,
                      remat)
    _, native = compile_call(call)
    outputs = native(call.inputs)
    kernel = call.pipeline.kernel
    files = c_sources(kernel, call.output_names)
    names = entry_c(kernel, call.output_names)
    data = {f"inputs/{f}.bin": _little_endian(a) for (f, _), a in zip(names.inputs, call.inputs)}
    data |= {f"expected/{f}.bin": _little_endian(a)
             for (f, _), a in zip(names.outputs, outputs)}
    for relative, content in [*files.items(), *data.items()]:
        write_into(out_dir, relative, content)
    return CExport(files, data, program_shape(kernel), call.pipeline.realization_name, call,
                   names)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def summary(args: argparse.Namespace, dims: dict[str, int], result: CExport) -> str:
    """The one line `presk export` prints: what the program runs per call and where."""
    s = result.shape
    at = ", ".join(f"{k} = {v}" for k, v in dims.items())
    what = f"`{args.entry}`" + (" (value and gradient)" if args.grad else "")
    return (f"presk export: {what}{' at ' + at if at else ''} in {result.realization_name}: "
            f"{_plural(s.launches, 'launch', 'launches')} of {_plural(s.kernels, 'kernel')}, "
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


def run(args: argparse.Namespace) -> int:
    """`presk export … --target c`: write the program, print the summary line and files."""
    from ..emit.c_program import CExportError
    from .kernel_cmds import prepare_run
    if not args.entry:
        raise UsageError("presk export: --target c needs --entry, e.g. --entry loss")
    _check_output(args.output)
    module, entry, params, values = prepare_run(args)
    try:
        result = export_c(module, args.entry, entry.dims, params, values, args.output,
                          args.realize, args.grad, args.remat)
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
    return 0
