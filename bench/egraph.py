"""The e-graph optimizer (psk-egraph-opt): how fast it saturates and extracts, how large
its e-graphs get, and what its rewrites do to the predicted and the measured time.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/egraph.py [--quick]

For the tutorial (tutorial/07_train.psk, entry `loss`, B = 4), the scaled Tower
(bench/scaled_tower.psk, B = 256) and the textbook variance
(test/precision_programs/variance.psk, B = 1024), in one run:

- per function: the values modelled, e-nodes and e-classes after saturation, the
  iterations and why it stopped, saturation and extraction seconds, the predicted time
  (operations + bytes/4) before and after and the bits lost before and after;
- the whole optimizer's wall time (load excluded, imports warmed up; the probe included);
- native time per call (`presk.runtime.time_call`, median of repeats) of the original
  and the optimized program, all-f64, interleaved (original, optimized, original, …)
  so that the shared machine's load hits both alike; the ratio original / optimized.

Tests never assert a time: the figures are printed here, beside their peer (the original
program) measured in the same run. The machine is shared: read ratios, not seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CASES = [("tutorial", ROOT / "tutorial/07_train.psk", {"B": 4}),
         ("scaled Tower", ROOT / "bench/scaled_tower.psk", {"B": 256}),
         ("variance", ROOT / "test/precision_programs/variance.psk", {"B": 1024})]


def _native(module, dims):
    from presk.pipeline import prepare_entry, run_native
    entry, params, values = prepare_entry(module, "loss", dims, 0)
    run = run_native(module, "loss", entry.dims, params, values)
    return run.entry.bind(run.call.inputs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    from presk.pipeline import load_core
    from presk.pipeline.optimize import optimize, report_text
    from presk.runtime import time_call
    repeats = 3 if args.quick else 7
    warm, _ = load_core(str(CASES[-1][1]))  # imports (egglog, the interpreter) out of the timing
    optimize(warm, "loss", CASES[-1][2])
    for label, path, dims in CASES:
        original, _ = load_core(str(path))
        optimized, _ = load_core(str(path))
        t0 = time.perf_counter()
        report = optimize(optimized, "loss", dims)
        wall = time.perf_counter() - t0
        print(f"== {label}: {path.relative_to(ROOT)} at "
              + ", ".join(f"{k}={v}" for k, v in dims.items()))
        print(report_text(report))
        print(f"optimizer wall time (probe, saturation, extraction, rebuilding): {wall:.3f} s")
        calls = []
        for m in (original, optimized):
            calls.append(_native(m, dims))
        times: list[list[float]] = [[], []]
        for _ in range(repeats):
            for i, call in enumerate(calls):
                times[i].append(time_call(call, repeats=1, min_seconds=0.05).median)
        med = [sorted(t)[len(t) // 2] for t in times]
        print(f"native per call, all-f64: original {med[0] * 1e6:.1f} µs, optimized "
              f"{med[1] * 1e6:.1f} µs, original / optimized {med[0] / med[1]:.2f}x\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
