"""`presk run --engine native` (the default engine) and its `--time`.

The entry is recorded down to PSK-Kernel exactly as for `--engine kernel`, then compiled
to machine code in process — or its object code taken from the on-disk cache
(presk/runtime) — and called on the same input buffers (presk/pipeline/call.py
`run_native`), so the two engines print the same bits.
"""

from __future__ import annotations

import argparse

from ..pipeline import NativeRun, run_native
from .common import reported
from .runs import prepare_run, print_run


def _time_line(run: NativeRun) -> str:
    from ..runtime import time_call
    t = time_call(run.entry.bind(run.call.inputs))
    c = run.program.timings
    how = "from the cache" if run.program.cached else "cold"
    return (f"time per call: median {_us(t.median)} (min {_us(t.minimum)}, {t.repeats} "
            f"repeats of {t.number} calls); compile {c.total * 1e3:.1f} ms ({how})")


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


@reported
def run_native_cmd(args: argparse.Namespace) -> int:
    """`presk run FILE --entry E [--dim …] [--realize …] [--grad] [--time]`."""
    module, entry, params, values, pipe = prepare_run(args)
    run = run_native(module, args.entry, entry.dims, params, values,
                     getattr(args, "realize", None), getattr(args, "grad", False),
                     getattr(args, "remat", "store"),
                     cotangent=getattr(args, "seed_value", None),
                     plan=getattr(args, "plan", None), pipe=pipe)
    print_run(args, entry.dims, f"native code under {run.call.pipeline.realization_name}",
              run.result)
    if getattr(args, "time", False):
        print(_time_line(run))
    return 0
