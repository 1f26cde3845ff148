"""The box bound on FPBench's rigorous-analysis benchmarks, beside FPTaylor's published bound.

    .venv/bin/python bench/fpbench.py [--points 100000] [--seed 0] [--only doppler1,...]

For every test/fpbench/*.fpcore: `presk import-fpcore` (presk/frontend/fpcore.py), the box
analysis over its precondition's box in double precision (presk/analysis/box.py, all f64),
its time, and the bound against the largest error measured at `--points` uniform random
points of the box plus its corners: the Core f64 interpreter (the bits the kernels and the
native code compute under all-f64) against MPFR at 128 bits. A measured error above the
bound would be a soundness failure and is reported as such (exit 1).

FPTaylor's figures: its formally checked double-precision bounds (FPTaylor-b: improved
rounding model, exact optimization), as validated in HOL Light by the FPTaylor repository's
benchmarks/toplas/formal-b.hl and formal-b-extra.hl (github.com/soarlab/FPTaylor, commits
b2c89ea and bff329e), the TOPLAS 2018 paper's benchmarks (Solovyev et al., "Rigorous
Estimation of Floating-Point Round-off Errors with Symbolic Taylor Expansions"). FPTaylor
rounds the decimal constants (331.4, 0.6, …) too; Presk's program reads them as their f64
values (a .psk literal is one), so its exact program has no constant rounding to charge: a
part of why Presk can be below FPTaylor. Daisy's published double-precision figures were
not found in the reference material available to this bench and are not printed.
"""

from __future__ import annotations

import argparse
import glob
import json
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


def load(path: str, workdir: str):
    """(core module, entry, arguments in order, box) of one .fpcore file."""
    from presk.analysis import ranges as RG
    from presk.frontend.fpcore import to_psk, translate
    from presk.pipeline.load import load_core
    with open(path, encoding="utf-8") as f:
        (core,) = translate(f.read(), path)
    psk = os.path.join(workdir, core.name + ".psk")
    with open(psk, "w", encoding="utf-8") as f:
        f.write(to_psk([core], os.path.basename(path)))
    module, _ = load_core(psk)
    spec = RG.RangeSpec(core.name, {a: list(r) for a, r in core.ranges.items()})
    shapes = {a: () for a in core.args}
    box = RG.resolve(spec, shapes, {}, {a: np.zeros(()) for a in core.args})
    return module, core, box


def run_one(path: str, workdir: str, points: int, seed: int) -> dict:
    from presk.analysis import box as B
    from presk.analysis import ranges as RG
    from presk.analysis.boxcheck import elementwise_errors
    from presk.analysis.realization import Realization
    module, core, box = load(path, workdir)
    start = time.perf_counter()
    res = B.analyze(module, core.name, {}, Realization(), box, {},
                    {a: np.zeros(()) for a in core.args})
    seconds = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    cols = {a: [] for a in core.args}
    for ins, _ in RG.corners(box):
        for a in core.args:
            cols[a].append(float(ins[a]))
    for a in core.args:
        lo, hi = box.inputs[a]
        cols[a] = np.concatenate([np.asarray(cols[a]), lo + (hi - lo) * rng.random(points)])
    errors = elementwise_errors(module, core.name + "_each", [cols[a] for a in core.args])
    return {"name": core.title, "bound": res.bound, "seconds": seconds, "leaves": res.leaves,
            "measured": float(np.max(errors)), "points": int(errors.size)}


def tutorial(points: int, seed: int) -> bool:
    """The tutorial's loss (B = 4) over ±10 % around its seed-0 inputs: the all-f64 box
    bound and the kernel interpreter's error at `points` fresh points of the box (each
    point one run: the kernels' order and types, against MPFR 128)."""
    from presk.analysis import box as B
    from presk.analysis import entry as E
    from presk.analysis import ranges as RG
    from presk.analysis.boxcheck import entry_errors
    from presk.analysis.realization import Realization
    from presk.pipeline.load import load_core
    module, _ = load_core(os.path.join(ROOT, "tutorial", "07_train.psk"))
    dims = {"B": 4}
    prepared = E.prepare(module, "loss", dims)
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    spec = RG.RangeSpec("loss", {"batch.0": {"around": 0.1}, "batch.1": {"around": 0.1}})
    box = RG.resolve(spec, prepared.inputs, params, values)
    start = time.perf_counter()
    res = B.analyze(module, "loss", dims, Realization(), box, params, values)
    seconds = time.perf_counter() - start
    rng = np.random.default_rng(seed)
    pts = [(RG.sample(box, rng)[0], params) for _ in range(points)]
    start = time.perf_counter()
    errors = entry_errors(module, "loss", dims, Realization(), pts)
    print(f"tutorial loss B=4, ±10 % box: box bound {res.bound:.3e} ({res.leaves} sub-boxes, "
          f"{seconds:.2f} s); kernel interpreter at {points} fresh points: max error "
          f"{max(errors):.3e} ({time.perf_counter() - start:.0f} s)")
    return max(errors) <= res.bound


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--points", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", help="comma-separated benchmark names")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--tutorial", type=int, metavar="N",
                   help="instead: the tutorial's loss over ±10 %% of its inputs, N points")
    args = p.parse_args()
    if args.tutorial:
        return 0 if tutorial(args.tutorial, args.seed) else 1
    files = sorted(glob.glob(os.path.join(ROOT, "test", "fpbench", "*.fpcore")))
    if args.only:
        keep = set(args.only.split(","))
        files = [f for f in files if os.path.basename(f)[:-7] in keep]
    print(f"presk box bound (all f64) beside FPTaylor's published bound; soundness at "
          f"{args.points} random points + corners per benchmark (the f64 engine against "
          f"MPFR 128); machine load {os.getloadavg()[0]:.1f} (shared)")
    print(f"{'benchmark':<14}{'presk':>11}{'FPTaylor':>11}{'ratio':>7}{'measured':>11}"
          f"{'bound/meas':>11}{'time':>7}{'leaves':>7}")
    rows, unsound = [], []
    with tempfile.TemporaryDirectory() as work:
        for f in files:
            r = run_one(f, work, args.points, args.seed)
            ft = FPTAYLOR.get(r["name"])
            r["fptaylor"] = ft
            r["ratio"] = r["bound"] / ft if ft else None
            rows.append(r)
            if r["measured"] > r["bound"]:
                unsound.append(r["name"])
            ratio = f"{r['ratio']:.3g}" if ft else "-"
            bm = r["bound"] / r["measured"] if r["measured"] > 0 else float("inf")
            print(f"{r['name']:<14}{r['bound']:>11.3e}{(ft or float('nan')):>11.2e}{ratio:>7}"
                  f"{r['measured']:>11.3e}{bm:>11.1f}{r['seconds']:>6.2f}s{r['leaves']:>7}",
                  flush=True)
    compared = [r for r in rows if r["ratio"] is not None]
    within = [r for r in compared if r["ratio"] <= 2.0]
    tighter = [r["name"] for r in compared if r["ratio"] < 1.0]
    print(f"within 2x of FPTaylor: {len(within)} of {len(compared)} "
          f"({100.0 * len(within) / max(1, len(compared)):.0f} %); Presk tighter on "
          f"{len(tighter)}: {', '.join(tighter)}")
    print(f"slowest analysis {max(r['seconds'] for r in rows):.2f} s; measured above the "
          f"bound: {', '.join(unsound) if unsound else 'none'}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 1 if unsound else 0


if __name__ == "__main__":
    sys.exit(main())
