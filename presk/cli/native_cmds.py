"""`presk run --engine native` (the default engine) and its `--time`.

The entry is recorded down to PSK-Kernel exactly as for `--engine kernel`
(presk/cli/kernel_cmds.py), then compiled to machine code in process — or its object code
taken from the on-disk cache (presk/runtime) — and called on the same input buffers, so
the two engines print the same bits.

Python API:
  run_native(core_module, entry, dims, params, values, realization=None, grad=False,
             remat="store", cache=True) -> NativeRun
  run_native_cmd(args) -> int
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

from .common import ProgramError
from .kernel_cmds import EntryCall, entry_call, prepare_run, print_run


@dataclass
class NativeRun:
    result: dict[str, Any]  # name (`result`, `grad.<path>`) → float64 array
    outputs: list[Any]  # the entry's output buffers as stored (bf16 as uint16 bits)
    call: EntryCall
    program: Any  # presk.runtime.NativeProgram
    entry: Any  # presk.runtime.NativeEntry


def compile_call(call: EntryCall, cache: bool = True):
    """The native program of a prepared entry and its callable entry; a lowering or
    compilation failure is one line (exit code 1), never a traceback."""
    from ..conversion.kernel_to_std import NativeLoweringError
    from ..runtime import NativeCompileError
    from ..runtime.compile import native_program
    try:
        program = native_program(call.pipeline.kernel, cache=cache)
    except (NativeLoweringError, NativeCompileError) as exc:
        print(f"presk: error: the native backend cannot compile `{call.host}`: {exc}",
              file=sys.stderr)
        raise ProgramError() from None
    return program, program.entry(call.host)


def run_native(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
               values: dict[str, Any], realization=None, grad: bool = False,
               remat: str = "store", cache: bool = True) -> NativeRun:
    """Run `entry` (with `grad`: its value and gradient) as machine code."""
    call = entry_call(core_module, entry, dims, params, values, realization, True, grad,
                      remat)
    program, native = compile_call(call, cache)
    outputs = native(call.inputs)
    return NativeRun(call.flatten(outputs), outputs, call, program, native)


def _time_line(run: NativeRun) -> str:
    from ..runtime import time_call
    t = time_call(run.entry.bind(run.call.inputs))
    c = run.program.timings
    how = "from the cache" if run.program.cached else "cold"
    return (f"time per call: median {_us(t.median)} (min {_us(t.minimum)}, {t.repeats} "
            f"repeats of {t.number} calls); compile {c.total * 1e3:.1f} ms ({how})")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def run_native_cmd(args: argparse.Namespace) -> int:
    """`presk run FILE --entry E [--dim …] [--realize …] [--grad] [--time]`."""
    module, entry, params, values = prepare_run(args)
    run = run_native(module, args.entry, entry.dims, params, values,
                     getattr(args, "realize", None), getattr(args, "grad", False),
                     getattr(args, "remat", "store"))
    print_run(args, entry.dims, f"native code under {run.call.pipeline.realization_name}",
              run.result)
    if getattr(args, "time", False):
        print(_time_line(run))
    return 0
