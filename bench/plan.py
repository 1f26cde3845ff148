"""The layout plan against measurement: its regret per nest, and the planned program
beside the default layouts.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/plan.py [--quick] [--profile P] [--b 1024] [--program FILE ...]

The profile: this machine's (`presk profile calibrate` keeps it under ~/.cache/presk, or
$PRESK_CACHE_DIR), else the frozen one of test data (another machine's constants).

For each program (default: both of the acceptance's, bench/scaled_tower.psk — D = 256,
L = 4 — and the deep residual stack test/fixtures/residual_stack.psk) at B = 1024 (256
with --quick), its loss and its value and gradient, all-f64:

- regret: every point of every nest's layout space is compiled (one module per recording,
  presk/runtime/kernel_timing.py) and timed natively as the calibration times its points
  (presk/pipeline/profile.py `time_points`: the calling thread's CPU time — wall time for
  a split point —, the minimum of interleaved rounds); then the points that decide — per
  nest the chosen one and every one measured within DECIDING of the best — are timed again,
  RETIMES more times, interleaved, each keeping its minimum over all. A nest's regret is
  the measured time of the point the plan chose over the best measured point of its space
  (1.00: the plan took the fastest). Printed per nest, then the worst.
- the call: the entry compiled with its default layouts and with the plan's, each bound
  once and timed by `presk.runtime.time_call` (the minimum of 9 samples), the two
  interleaved five times, the minimum of each kept; printed with the ratio.

The last lines are the summary the acceptance reads: per program the worst nest of the
value and of the value and gradient, and default / planned of both calls. The machine is
likely shared: every figure is a minimum over samples (noise only adds time), and the
load average is printed with them. A benchmark asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


DECIDING = 1.25  # a point measured within this of its nest's best is timed again
RETIMES = 4  # how many more times (each a time_points: interleaved rounds, the minimum);
# 2 left a split point's minimum ±6 % from run to run on a 2-CPU machine (docs/plan.md)


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
    seconds = [t.seconds for t in time_points(variants, repeats)]
    deciding = [i for i, (n, p) in enumerate(owner) if p is n.chosen or seconds[i] <=
                DECIDING * min(s for s, (m, _) in zip(seconds, owner) if m is n)]
    for _ in range(RETIMES):
        again = time_points([variants[i] for i in deciding], [repeats[i] for i in deciding])
        for i, t in zip(deciding, again):
            seconds[i] = min(seconds[i], t.seconds)
    out = []
    for n in report.nests:
        mine = [(t, p) for (m, p), t in zip(owner, seconds) if m is n]
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
    for _ in range(5):
        for i, step in enumerate(steps):
            best[i] = min(best[i], time_call(step, 9, 0.2).minimum)
    return best[0], best[1]


def bench(program: str, b: int, profile, profile_name: str) -> list[tuple]:
    """Regret and calls of one program; (what, worst site, worst regret, default /
    planned) for its value and its value and gradient."""
    from presk.pipeline import load_core
    from presk.pipeline.plan import make_plan
    core, _ = load_core(program)
    print(f"bench/plan.py: {os.path.relpath(program, ROOT)} at B = {b}, all-f64, profile "
          f"{profile_name}; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    out = []
    for grad in (False, True):
        report = make_plan(core, "loss", {"B": b}, profile, profile_name, grad=grad)
        what = "value and gradient" if grad else "value"
        print(f"\n{what}: {len(report.nests)} nests, {report.points} points")
        print(f"{'nest':<26} {'chosen':>11} {'best':>11} {'regret':>7}  chosen / best point")
        rows = regret(report)
        for site, chosen, best, ratio, cp, bp in rows:
            print(f"{site:<26} {chosen * 1e6:>9.1f}µs {best * 1e6:>9.1f}µs {ratio:>7.2f}  "
                  f"{cp}{'' if cp == bp else ' / ' + bp}")
        worst = max(rows, key=lambda r: r[3])
        print(f"-- worst: {worst[0]}, {worst[3]:.2f}× the best point of its space")
        default, planned = call_times(core, {"B": b}, grad, report.plan)
        print(f"-- a call: default layouts {default * 1e3:.3f} ms, planned "
              f"{planned * 1e3:.3f} ms (default / planned {default / planned:.2f}×)")
        out.append((what, worst[0], worst[3], default / planned))
    print(f"-- load average {os.getloadavg()[0]:.1f}\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", default=None,
                    help="default: this machine's calibrated profile (presk profile "
                         "calibrate keeps it), else the frozen one of test data")
    ap.add_argument("--b", type=int, default=None)
    ap.add_argument("--program", nargs="+", default=[
        str(ROOT / "bench" / "scaled_tower.psk"),
        str(ROOT / "test" / "fixtures" / "residual_stack.psk")])
    args = ap.parse_args()
    from presk.analysis.profile import load_profile
    from presk.pipeline.profile import cached_profile_path
    b = args.b or (256 if args.quick else 1024)
    if args.profile is None:
        mine = cached_profile_path()
        args.profile = str(mine if mine.exists() else
                           ROOT / "test" / "fixtures" / "profile-frozen.json")
    profile = load_profile(args.profile)
    summary = [(program, bench(program, b, profile, args.profile))
               for program in args.program]
    print(f"summary (B = {b}, profile {args.profile}; load average "
          f"{os.getloadavg()[0]:.1f} at the end):")
    print(f"{'program':<34} {'what':<19} {'worst nest':<26} {'regret':>7} "
          f"{'default / planned':>18}")
    for program, rows in summary:
        for what, site, ratio, speed in rows:
            print(f"{os.path.relpath(program, ROOT):<34} {what:<19} {site:<26} "
                  f"{ratio:>6.2f}× {speed:>17.2f}×")
    worst = max((r for _, rows in summary for r in rows), key=lambda r: r[2])
    print(f"worst nest over all: {worst[1]} ({worst[0]}), {worst[2]:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
