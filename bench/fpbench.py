"""The box bound on FPBench's rigorous-analysis benchmarks, beside FPTaylor's published bound.

    .venv/bin/python bench/fpbench.py [--points 100000] [--seed 0] [--repeat 3] [--only a,b]
    .venv/bin/python bench/fpbench.py --tutorial 100000 [--corners 1000]

For every test/fpbench/*.fpcore: `presk import-fpcore` (presk/frontend/fpcore.py), the box
analysis over its precondition's box in double precision (presk/analysis/box.py, all f64),
its time (the least of `--repeat` runs, and the most: the machine is shared), and the
bound against the largest error measured at `--points` uniform random points of the box
plus its corners: the native code (the FPCore's `f_points` entry, all f64, one call over
every point) against the MPFR interpreter at 128 bits. A measured error above the bound
would be a soundness failure and is reported as such (exit 1). `--tutorial N`: the same
for the tutorial's loss (see `tutorial`).

FPTaylor's figures: its formally checked double-precision bounds (FPTaylor-b: improved
rounding model, exact optimization), as validated in HOL Light by the FPTaylor repository's
benchmarks/toplas/formal-b.hl and formal-b-extra.hl (github.com/soarlab/FPTaylor, commits
b2c89ea and bff329e), the TOPLAS 2018 paper's benchmarks (Solovyev et al., "Rigorous
Estimation of Floating-Point Round-off Errors with Symbolic Taylor Expansions"). FPTaylor
rounds the decimal constants (331.4, 0.6, …) too; Presk's program reads them as their f64
values (a .psk literal is one), so its exact program has no constant rounding to charge: a
part of why Presk can be below FPTaylor.

Daisy's figures: the double-precision absolute error bounds its repository publishes as
its regression reference (github.com/malyzajko/daisy, commit 34c8ddb; the reference files
last changed in 80e6397, 2025-07-03): regression/reference/dataflow_subdiv_IA_AA_results.csv,
written by regression/scripts/run_all.sh's TEST 4 — `--analysis=dataflow
--rangeMethod=interval --errorMethod=affine --subdiv --divLimit=3 --totalOpt=32` over
regression/testcases/allTests_subdiv.scala (Daisy's tightest dataflow run there; its
default precision is Float64). hartman3 is commented out of that run: its figure (marked
`*`) is from dataflow_IA_AA_results.csv, TEST 1, the same analysis without subdivision.
The formulas and boxes are the same as test/fpbench's (checked by hand, file by file);
t_div_t1 is not in Daisy's set and Daisy has jetEngine only on another box
(jetEngineModified, x1 in [0, 5]): no figure. Daisy, by default, also charges one
rounding of each input (a real rounded to f64; FPTaylor's and Presk's inputs are f64
values), so its figures bound a slightly larger error than the other two columns.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import math
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

FPTAYLOR = {  # benchmarks/toplas/formal-b.hl and formal-b-extra.hl (see above)
    "t_div_t1": 5.72e-14, "sine": 5.55e-16, "sqroot": 7.00e-16, "sineOrder3": 9.52e-16,
    "carbonGas": 9.13e-9, "verhulst": 3.24e-16, "predatorPrey": 1.84e-16,
    "rigidBody1": 3.87e-13, "rigidBody2": 5.24e-11, "doppler1": 1.59e-13,
    "doppler2": 2.90e-13, "doppler3": 8.22e-14, "turbine1": 2.32e-14, "turbine2": 2.55e-14,
    "turbine3": 1.24e-14, "jetEngine": 1.34e-11, "logexp": 2.07e-15, "sphere": 1.01e-14,
    "kepler0": 9.45e-14, "kepler1": 3.57e-13, "kepler2": 1.96e-12, "himmilbeau": 1.32e-12,
    "hartman3": 5.73e-15,
}

DAISY = {  # malyzajko/daisy regression/reference/dataflow_subdiv_IA_AA_results.csv (above)
    "sine": 6.436e-16, "sqroot": 5.400e-16, "sineOrder3": 1.009e-15, "carbonGas": 1.404e-8,
    "verhulst": 2.672e-16, "predatorPrey": 1.650e-16, "rigidBody1": 2.949e-13,
    "rigidBody2": 3.607e-11, "doppler1": 2.376e-13, "doppler2": 5.080e-13,
    "doppler3": 1.027e-13, "turbine1": 3.920e-14, "turbine2": 4.368e-14,
    "turbine3": 1.653e-14, "logexp": 2.181e-13, "sphere": 1.199e-14, "kepler0": 9.698e-14,
    "kepler1": 3.789e-13, "kepler2": 2.025e-12, "himmilbeau": 1.000e-12,
    "hartman3": 6.522e-10,  # * dataflow_IA_AA_results.csv: not in the subdivision run
}
DAISY_NO_SUBDIV = {"hartman3"}


def load(path: str, workdir: str):
    """(core module, the FPCore, its box) of one .fpcore file, with `f_points` (native)."""
    from presk.analysis import ranges as RG
    from presk.frontend.fpcore import to_psk, translate
    from presk.pipeline.load import load_core
    with open(path, encoding="utf-8") as f:
        (core,) = translate(f.read(), path)
    psk = os.path.join(workdir, core.name + ".psk")
    with open(psk, "w", encoding="utf-8") as f:
        f.write(to_psk([core], os.path.basename(path), points=True))
    module, _ = load_core(psk)
    spec = RG.RangeSpec(core.name, {a: list(r) for a, r in core.ranges.items()})
    shapes = {a: () for a in core.args}
    box = RG.resolve(spec, shapes, {}, {a: np.zeros(()) for a in core.args})
    return module, core, box


def analysis_seconds(module, core, box, repeat: int) -> tuple[object, list[float]]:
    """The box analysis (all f64) `repeat` times: its result and each run's (wall, CPU)
    seconds."""
    from presk.analysis import box as B
    from presk.analysis.realization import Realization
    times, res = [], None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        res = B.analyze(module, core.name, {}, Realization(), box, {},
                        {a: np.zeros(()) for a in core.args})
        times.append((time.perf_counter() - start, time.process_time() - cpu))
    return res, times


def run_one(path: str, workdir: str, points: int, seed: int, repeat: int) -> dict:
    from presk.analysis import ranges as RG
    from presk.analysis.boxcheck import elementwise_errors, native_points
    module, core, box = load(path, workdir)
    res, times = analysis_seconds(module, core, box, repeat)
    rng = np.random.default_rng(seed)
    cols = {a: [] for a in core.args}
    for ins, _ in RG.corners(box):
        for a in core.args:
            cols[a].append(float(ins[a]))
    for a in core.args:
        lo, hi = box.inputs[a]
        cols[a] = np.concatenate([np.asarray(cols[a]), lo + (hi - lo) * rng.random(points)])
    computed = native_points(module, core.name + "_points", cols)
    errors = elementwise_errors(module, core.name + "_each", [cols[a] for a in core.args],
                                computed=computed)
    return {"name": core.title, "bound": res.bound, "seconds": min(w for w, _ in times),
            "seconds_max": max(w for w, _ in times), "cpu": min(c for _, c in times),
            "leaves": res.leaves,
            "measured": float(np.max(errors)), "points": int(errors.size)}


def tutorial(points: int, corners: int, seed: int) -> bool:
    """The tutorial's loss (B = 4) over ±10 % around its seed-0 inputs: the all-f64 box
    bound and `solve --certify --budget 1e-3`'s realization and bound; the native code
    under each at `points` fresh random points and `corners` random corners of the box
    (its 2³² corners are too many), against the MPFR interpreter at 128 bits."""
    from presk.analysis import box as B
    from presk.analysis import entry as E
    from presk.analysis import ranges as RG
    from presk.analysis.boxcheck import NativeEntry, exact_outputs
    from presk.analysis.realization import Realization, load_realization
    from presk.cli.main import main as presk
    from presk.pipeline.load import load_core
    tut = os.path.join(ROOT, "tutorial", "07_train.psk")
    module, _ = load_core(tut)
    dims = {"B": 4}
    prepared = E.prepare(module, "loss", dims)
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    spec = RG.RangeSpec("loss", {"batch.0": {"around": 0.1}, "batch.1": {"around": 0.1}})
    box = RG.resolve(spec, prepared.inputs, params, values)
    start = time.perf_counter()
    f64 = B.analyze(module, "loss", dims, Realization(), box, params, values)
    seconds = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as work:
        env, out = os.path.join(work, "env.json"), os.path.join(work, "r.json")
        flags = ["--range", "batch.0=±10%", "--range", "batch.1=±10%"]
        start = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            ok = presk(["calibrate", "--precision", tut, "--entry", "loss", "--dim", "B=4",
                        *flags, "--out", env]) == 0 and \
                presk(["solve", tut, "--entry", "loss", "--dim", "B=4", "--precision", env,
                       "--budget", "1e-3", "--certify", *flags, "--out", out]) == 0
        if not ok:
            print("tutorial: solve --certify failed")
            return False
        certify_seconds = time.perf_counter() - start
        real = load_realization(out)
    certified = B.analyze(module, "loss", dims, real, box, params, values)
    rng = np.random.default_rng(seed)
    pts = [(RG.sample(box, rng)[0], params) for _ in range(points)]
    pts += [(RG.sample(box, rng, corners=True)[0], params) for _ in range(corners)]
    start = time.perf_counter()
    exact = exact_outputs(module, "loss", dims, pts)
    mpfr_seconds = time.perf_counter() - start
    print(f"tutorial loss B=4, ±10 % box, {points} random points + {corners} random corners"
          f" (MPFR 128 reference: {mpfr_seconds:.0f} s); machine load "
          f"{os.getloadavg()[0]:.1f} (shared)")
    sound = True
    for label, r, res in (("all-f64", Realization(), f64),
                          ("certified at 1e-3", real, certified)):
        start = time.perf_counter()
        errors = NativeEntry(module, "loss", dims, r, params, values).errors(pts, exact)
        worst = max(errors)
        sound &= worst <= res.bound
        print(f"  {label:<18} {r.summary()}: box bound {res.bound:.3e} ({res.leaves} "
              f"sub-boxes); native max error {worst:.3e} (bound/measured "
              f"{res.bound / worst if worst else math.inf:.1f}, {time.perf_counter() - start:.0f}"
              f" s){'' if worst <= res.bound else '  ABOVE THE BOUND'}")
    print(f"  all-f64 analysis {seconds:.2f} s; calibrate + solve --certify "
          f"{certify_seconds:.0f} s")
    return sound


def _ratio(bound: float, peer: float | None) -> str:
    return f"{bound / peer:.3g}" if peer else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3,
                   help="time each analysis this many times (the least is printed)")
    p.add_argument("--only", help="comma-separated benchmark names")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--tutorial", type=int, metavar="N",
                   help="instead: the tutorial's loss over ±10 %% of its inputs, N points")
    p.add_argument("--corners", type=int, default=1000,
                   help="with --tutorial: this many random corners too")
    args = p.parse_args()
    if args.tutorial:
        return 0 if tutorial(args.tutorial, args.corners, args.seed) else 1
    files = sorted(glob.glob(os.path.join(ROOT, "test", "fpbench", "*.fpcore")))
    if args.only:
        keep = set(args.only.split(","))
        files = [f for f in files if os.path.basename(f)[:-7] in keep]
    print(f"presk box bound (all f64) beside FPTaylor's and Daisy's published bounds; "
          f"soundness at {args.points} random points + corners per benchmark (native code "
          f"against MPFR 128); time: the least of {args.repeat} analyses (and the most), wall "
          f"and CPU; "
          f"machine load {os.getloadavg()[0]:.1f} (shared, 2 cores)")
    print(f"{'benchmark':<14}{'presk':>11}{'FPTaylor':>11}{'ratio':>8}{'Daisy':>11}{'ratio':>7}"
          f"{'measured':>11}{'bound/meas':>11}{'wall (most)':>14}{'CPU':>7}{'leaves':>7}")
    rows, unsound = [], []
    with tempfile.TemporaryDirectory() as work:
        for f in files:
            r = run_one(f, work, args.points, args.seed, args.repeat)
            r["fptaylor"], r["daisy"] = FPTAYLOR.get(r["name"]), DAISY.get(r["name"])
            r["ratio"] = r["bound"] / r["fptaylor"] if r["fptaylor"] else None
            r["ratio_daisy"] = r["bound"] / r["daisy"] if r["daisy"] else None
            rows.append(r)
            if r["measured"] > r["bound"]:
                unsound.append(r["name"])
            bm = r["bound"] / r["measured"] if r["measured"] > 0 else float("inf")
            daisy = f"{r['daisy']:.3e}" + ("*" if r["name"] in DAISY_NO_SUBDIV else " ") \
                if r["daisy"] else "-"
            print(f"{r['name']:<14}{r['bound']:>11.3e}{(r['fptaylor'] or math.nan):>11.2e}"
                  f"{_ratio(r['bound'], r['fptaylor']):>8}{daisy:>12} "
                  f"{_ratio(r['bound'], r['daisy']):>6}{r['measured']:>11.3e}{bm:>11.1f}"
                  f"{r['seconds']:>6.2f}s ({r['seconds_max']:.2f}){r['cpu']:>6.2f}s"
                  f"{r['leaves']:>7}", flush=True)
    for peer, key in (("FPTaylor", "ratio"), ("Daisy", "ratio_daisy")):
        compared = [r for r in rows if r[key] is not None]
        within = [r for r in compared if r[key] <= 2.0]
        tighter = [r["name"] for r in compared if r[key] < 1.0]
        print(f"within 2x of {peer}: {len(within)} of {len(compared)} "
              f"({100.0 * len(within) / max(1, len(compared)):.0f} %); Presk tighter on "
              f"{len(tighter)}: {', '.join(tighter)}")
    print(f"slowest analysis {max(r['seconds'] for r in rows):.2f} s wall, "
          f"{max(r['cpu'] for r in rows):.2f} s CPU (least of {args.repeat}); machine load "
          f"{os.getloadavg()[0]:.1f}; measured above the bound: "
          f"{', '.join(unsound) if unsound else 'none'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 1 if unsound else 0


if __name__ == "__main__":
    sys.exit(main())
