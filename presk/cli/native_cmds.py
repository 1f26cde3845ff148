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
    if getattr(args, "measure", False):
        print("\n".join(_measure_lines(run, args)))
    return 0


def _short(seconds: float) -> str:
    return f"{seconds * 1e9:.1f} ns" if seconds < 1e-6 else _us(seconds)


def _measure_lines(run: NativeRun, args: argparse.Namespace) -> list[str]:
    """--measure: each kernel timed beside the profile's prediction, the call timed, the
    host's time by phase (the call less its launches: a bare call into native code, the
    conversions, copies and fills beside their predictions, the rest), u and ρ over the
    kernels. Every time is the calibration's clock (pipeline/profile.py CLOCK)."""
    import numpy as np

    from ..pipeline.plan import host_phases, measure_kernels
    from ..pipeline.profile import CLOCK, errors, profile_for
    from ..runtime import time_call
    profile, name = profile_for(getattr(args, "profile", None))
    rows = measure_kernels(run.call.pipeline.kernel, profile)
    call = time_call(run.entry.bind(run.call.inputs), 9, 0.2, CLOCK).minimum
    lines = [f"measured (the calling thread's CPU time, the minimum of interleaved rounds; "
             f"profile {name}):",
             f"  {'kernel':<6} {'site':<28} {'launches':>8} {'predicted':>11} "
             f"{'measured':>11} {'ratio':>6}"]
    for r in rows:
        ratio = r.predicted / r.measured if r.measured > 0 else float("inf")
        lines.append(f"  {r.kernel:<6} {r.site:<28} {r.launches:>8} {_short(r.predicted):>11} "
                     f"{_short(r.measured):>11} {ratio:>6.2f}")
    launches = sum(r.launches * r.measured for r in rows)
    host = max(call - launches, 0.0)
    lines.append(f"  a call {_us(call)}: its launches {_us(launches)} (each kernel's time × "
                 f"its launches), the host {_us(host)}, by phase:")
    bare = min((r.bare_call for r in rows), default=0.0)
    lines.append(f"    {'a bare call into native code (measured)':<44} {_short(bare):>11}")
    predicted = 0.0
    for phase, (n, seconds) in host_phases(run.call.pipeline.kernel, profile).items():
        predicted += seconds
        lines.append(f"    {f'{n} {phase} (predicted)':<44} {_short(seconds):>11}")
    lines.append(f"    {'the rest (prologue, arena, argument checks)':<44} "
                 f"{_short(max(host - bare - predicted, 0.0)):>11}")
    pairs = [(r.predicted, r.measured) for r in rows if r.measured > 0]
    if len(pairs) >= 2:
        u, u90, rho = errors(*(np.array(v) for v in zip(*pairs)))
        lines.append(f"  over this program's {len(pairs)} kernels: u = {u:.3f} (median), "
                     f"{u90:.3f} (90th percentile), ρ = {rho:.3f}")
    return lines
