"""What calling a compiled entry from Python costs over the bare native call.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/api.py [--quick]

The tutorial's `loss` at B = 4 (tutorial/07_train.psk, all-f64), its value (`compile`) and
its value and gradient (`compile(grad=True)`), each timed in five ways in the same run:

- bare: `f.bare()`, the native call on the bound buffers, nothing checked or converted
  (what `NativeEntry.bind` gives: the ctypes call alone);
- API, the same arrays: `f(params, batch)` with the arrays of the previous call (each is
  recognized by identity: the parameters' and the batch's pointers stay in argv), the
  results copied out (the value a float; with grad, the gradient tree as new arrays);
- API, the same arrays, `copy=False`: the same, the gradients the entry's read-only views
  of its output buffers (nothing copied out);
- API, a new batch each call: the parameters the same, (x, y) taken in turn from 64
  different pairs of arrays, each checked and handed to the native code in place;
- API, torch tensors: the same, as CPU float64 tensors (read through their numpy views),
  the results as tensors.

Each round times every way once (`presk.runtime.time_call`: its median and minimum); the
ways are interleaved over rounds and the median of the rounds' medians and the minimum of
their minima are printed, with the API's cost over the bare call beside each. The goal: at
most 2 µs over the bare call (the same arrays). A benchmark asserts nothing about
time; the exit code is 1 when the API's value or gradient differ from the bare call's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GOAL_US = 2.0


def cases(prog, grad: bool):
    """(name, zero-argument call) of the four ways, and whether the API agrees."""
    import torch
    f = prog.compile("loss", B=4, grad=grad)
    views = prog.compile("loss", B=4, grad=grad, copy=False)
    params = prog.init("loss", B=4)
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((4, 4)), rng.standard_normal((4, 4))) for _ in range(64)]
    (batch,) = prog.sample_inputs("loss", B=4)
    bare = f.bare()
    out, seen = f(params, batch), views(params, batch)
    bare()
    agree = (out[0] if grad else out) == float(f.outputs[0])
    if grad:
        agree &= all(out[1][p].tobytes() == seen[1][p].tobytes() for p in params)
    tparams = {k: torch.from_numpy(v) for k, v in params.items()}
    tbatches = [tuple(torch.from_numpy(a) for a in b) for b in batches]
    state = {"i": 0}

    def new_batch():
        state["i"] = (state["i"] + 1) & 63
        return f(params, batches[state["i"]])

    def tensors():
        state["i"] = (state["i"] + 1) & 63
        return f(tparams, tbatches[state["i"]])

    return [("bare native call", bare),
            ("API, the same arrays", lambda: f(params, batch)),
            ("API, the same, copy=False", lambda: views(params, batch)),
            ("API, a new batch each call", new_batch),
            ("API, torch tensors", tensors)], agree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds, shorter samples")
    args = parser.parse_args(argv)
    import presk
    from presk.runtime.timing import time_call
    prog = presk.load(str(ROOT / "tutorial" / "07_train.psk"))
    rounds, seconds = (3, 0.05) if args.quick else (7, 0.2)
    ok = True
    print("The tutorial's loss at B = 4, all-f64; per call, the median of "
          f"{rounds} interleaved rounds (the machine may be shared: see its load)")
    for grad in (False, True):
        ways, agree = cases(prog, grad)
        ok &= agree
        times: dict[str, list] = {name: [] for name, _ in ways}
        for _ in range(rounds):
            for name, fn in ways:
                times[name].append(time_call(fn, repeats=5, min_seconds=seconds))
        med = {n: statistics.median(t.median for t in ts) * 1e6 for n, ts in times.items()}
        low = {n: min(t.minimum for t in ts) * 1e6 for n, ts in times.items()}
        print(f"\n{'value and gradient' if grad else 'value'} "
              f"({'loss.value_vjp' if grad else 'loss'}):"
              + ("" if agree else "  DISAGREES with the bare call"))
        print(f"  {'':<30} {'median':>9}  {'(over bare)':>12} {'minimum':>9}  {'(over bare)':>12}")
        bare, bare_low = med["bare native call"], low["bare native call"]
        for name in med:
            print(f"  {name:<30} {med[name]:6.2f} µs  ({med[name] - bare:+6.2f} µs) "
                  f"{low[name]:6.2f} µs  ({low[name] - bare_low:+6.2f} µs)")
        for name in ("API, the same arrays", "API, the same, copy=False"):
            extra = med[name] - bare
            print(f"  goal, {name[5:]}: at most {GOAL_US:.0f} µs over the bare call (median): "
                  + ("met" if extra <= GOAL_US else "NOT met") + f" ({extra:+.2f} µs)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
