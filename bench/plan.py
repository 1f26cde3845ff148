"""The layout plan against measurement: its regret per nest, and the planned program
beside the default layouts.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/plan.py [--quick] [--profile P] [--b 1024] [--program FILE]

For bench/scaled_tower.psk (D = 256, L = 4; or `--program`, e.g. the deep residual stack
test/fixtures/residual_stack.psk) at B = 1024 (256 with --quick), its loss and its value
and gradient, all-f64:

- regret: every point of every nest's layout space is compiled (one module per recording,
  presk/runtime/kernel_timing.py) and timed natively as the calibration times its points
  (presk/pipeline/profile.py `time_points`: the calling thread's CPU time, the minimum of
  3 interleaved rounds); a nest's
  regret is the measured time of the point the plan chose over the best measured point
  of its space (1.00: the plan took the fastest). Printed per nest, then the worst.
- the call: the entry compiled with its default layouts and with the plan's, each bound
  once and timed by `presk.runtime.time_call` (the minimum of 9 samples), the two
  interleaved three times, the minimum of each kept; printed with the ratio.

The machine is likely shared: every figure is a minimum over samples (noise only adds
time), and the load average is printed with them. A benchmark asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def regret(report) -> list[tuple[str, float, float, float, str, str]]:
    """Per nest: (site, chosen's measured, best measured, ratio, chosen, best point)."""
    from presk.dialects import kernel as K
    from presk.pipeline.profile import time_points
    kernels = {k.sym_name.data: k for k in report.kernel_module.ops
               if isinstance(k, K.KernelOp)}
    variants, owner = [], []
    for n in report.nests:
        for priced in n.priced:
            v = kernels[n.kernel].clone()
            v.layout = priced.point.attr()
            variants.append(v)
            owner.append((n, priced))
    repeats = [int(min(32, max(1, 20e-6 / max(p.seconds, 1e-9)))) for _, p in owner]
    times = time_points(variants, repeats)
    out = []
    for n in report.nests:
        mine = [(t.seconds, p) for (m, p), t in zip(owner, times) if m is n]
        best = min(mine, key=lambda tp: tp[0])
        chosen = next(t for t, p in mine if p is n.chosen)
        out.append((n.site, chosen, best[0], chosen / best[0] if best[0] > 0 else 1.0,
                    n.chosen.point.text(), best[1].point.text()))
    return out


def call_times(core, dims, grad: bool, plan) -> tuple[float, float]:
    """(default, planned): seconds a call, the minimum over interleaved rounds."""
    from presk.analysis.entry import prepare
    from presk.pipeline import run_native
    from presk.runtime import time_call
    prep = prepare(core, "loss", dims)
    rng = np.random.default_rng(0)
    params = {f.path: rng.standard_normal(f.shape) * 0.05 for f in prep.fields}
    values = {k: rng.standard_normal(s) for k, s in prep.inputs.items()}
    runs = [run_native(core, "loss", dims, params, values, grad=grad, plan=p)
            for p in (None, plan)]
    assert [o.tobytes() for o in runs[0].outputs] == [o.tobytes() for o in runs[1].outputs]
    steps = [r.entry.bind(r.call.inputs) for r in runs]
    best = [float("inf"), float("inf")]
    for _ in range(3):
        for i, step in enumerate(steps):
            best[i] = min(best[i], time_call(step, 9, 0.2).minimum)
    return best[0], best[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", default=str(ROOT / "test" / "fixtures" /
                                            "profile-frozen.json"))
    ap.add_argument("--b", type=int, default=None)
    ap.add_argument("--program", default=str(ROOT / "bench" / "scaled_tower.psk"))
    args = ap.parse_args()
    from presk.analysis.profile import load_profile
    from presk.pipeline import load_core
    from presk.pipeline.plan import make_plan
    b = args.b or (256 if args.quick else 1024)
    core, _ = load_core(args.program)
    profile = load_profile(args.profile)
    print(f"bench/plan.py: {os.path.relpath(args.program, ROOT)} at B = {b}, all-f64, profile "
          f"{args.profile}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    worst_all = None
    for grad in (False, True):
        report = make_plan(core, "loss", {"B": b}, profile, args.profile, grad=grad)
        what = "value and gradient" if grad else "value"
        print(f"\n{what}: {len(report.nests)} nests, {report.points} points")
        print(f"{'nest':<26} {'chosen':>11} {'best':>11} {'regret':>7}  chosen / best point")
        rows = regret(report)
        for site, chosen, best, ratio, cp, bp in rows:
            print(f"{site:<26} {chosen * 1e6:>9.1f}µs {best * 1e6:>9.1f}µs {ratio:>7.2f}  "
                  f"{cp}{'' if cp == bp else ' / ' + bp}")
        worst = max(rows, key=lambda r: r[3])
        print(f"-- worst: {worst[0]}, {worst[3]:.2f}× the best point of its space")
        if worst_all is None or worst[3] > worst_all[1]:
            worst_all = (f"{what} {worst[0]}", worst[3])
        default, planned = call_times(core, {"B": b}, grad, report.plan)
        print(f"-- a call: default layouts {default * 1e3:.3f} ms, planned "
              f"{planned * 1e3:.3f} ms (default / planned {default / planned:.2f}×)")
    print(f"\nworst nest over both: {worst_all[0]}, {worst_all[1]:.2f}×; load average "
          f"{os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
