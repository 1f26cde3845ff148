"""The solver's realization against all-f64, all-f32 and PyTorch autocast (issue 6, §6.3).

Usage, from the repository root:

    .venv/bin/python bench/precision.py [--budget 1e-3] [--batch 64] [--samples 1]
                                        [--only tutorial|tower]

For two models, the tutorial's Tower (tutorial/07_train.psk, D = 4, L = 3, B = 4) and a
scaled Tower (bench/scaled_tower.psk: the same modules at D = 256, L = 4, B = --batch),
it calibrates the envelope in MPFR at 128 bits, solves under the budget (relative to the
loss), and prints side by side, for each realization:

- the cost: bytes of traffic per call of `loss`, from the solver's cost model
  (`TrafficCost`: every launch's buffers and fill in their stored types), and its ratio
  to all-f64;
- the measured error: |loss − exact|, the loss from the kernel interpreter under the
  realization, the exact value from MPFR at 128 bits, absolute and relative to |loss|;
- whether it is inside the budget.

Rows: all-f64, all-f32 (every site and parameter f32), autocast's policy written as a
Presk realization (the contractions' results stored in bf16, every other site and every
parameter f32: an approximation of what autocast does, to give it a cost in the same
model), the solver's realization, and the
same model written in PyTorch with the same weights and inputs: in float64 (a check that
the two models agree), in float32, and in float32 under
`torch.autocast("cpu", dtype=torch.bfloat16)` (its contractions in bf16). PyTorch's rows
have no cost in the solver's model (its kernels are not PSK-Kernel launches): "-".

It also prints how long the MPFR calibration and the solve took. A benchmark prints
figures; it asserts nothing (about time or otherwise). Exit code 2 when run from
elsewhere than the repository root.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def torch_tower(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                dtype, autocast: bool) -> float:
    """loss = mean((Tower(x) − y)²), the tutorial's Tower (06_tower.psk): L blocks
    x + Linear(gelu(RMSNorm(x))), then a final RMSNorm; gelu the exact (erf) one, eps 1e-6."""
    import torch
    import torch.nn.functional as F

    t = {k: torch.tensor(v, dtype=dtype) for k, v in params.items()}
    xt, yt = torch.tensor(x, dtype=dtype), torch.tensor(y, dtype=dtype)

    def rms(v, g):
        return v / torch.sqrt((v * v).mean(dim=-1, keepdim=True) + 1e-6) * g

    def run():
        h = xt
        for i in range(t["blocks.proj.w"].shape[0]):
            h = h + (F.gelu(rms(h, t["blocks.norm.γ"][i])) @ t["blocks.proj.w"][i]
                     + t["blocks.proj.b"][i])
        out = rms(h, t["final.γ"])
        return ((out - yt) ** 2).mean()

    with torch.no_grad():
        if autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                value = run()
        else:
            value = run()
    return float(value.double())


def bench(name: str, path: str, dims: dict[str, int], budget: float, samples: int) -> None:
    import gmpy2
    import torch

    from presk.analysis import entry as E
    from presk.analysis import envelope as EV
    from presk.analysis.realization import Realization
    from presk.analysis.sensitivity import reached
    from presk.analysis.solver import TrafficCost, _core_ops, measure_error, solve
    from presk.pipeline import load_core, run_kernel

    module, _ = load_core(path)
    prepared = E.prepare(module, "loss", dict(dims))
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)

    t0 = time.perf_counter()
    envelope = EV.calibrate(module, "loss", dims, bits=128, samples=samples)
    t_cal = time.perf_counter() - t0
    cost = TrafficCost(module, "loss", dims)
    t0 = time.perf_counter()
    sol = solve(module, "loss", dims, envelope, budget, params=params, values=values,
                cost_model=cost)
    t_solve = time.perf_counter() - t0

    # the exact value: the solver's MPFR run at 128 bits (sol.magnitude is |exact|)
    from presk.analysis.sensitivity import sensitivities
    exact = sensitivities(module, "loss", dims, params, values, 128).value
    ref = gmpy2.mpfr(exact) if not isinstance(exact, np.ndarray) else exact

    def err_of(value: float) -> float:
        with gmpy2.context(precision=256):
            return float(abs(gmpy2.mpfr(value) - ref))

    f32 = Realization(entry="loss",
                      sites={s: "f32" for s in _core_ops(module, reached(module, "loss"))},
                      params={f.path: "f32" for f in prepared.fields})

    def kernel_error(real: Realization) -> float:
        return measure_error(run_kernel(module, "loss", dims, params, values, real).result,
                             exact)

    # autocast's policy written as a realization: the contractions stored in bf16
    # (computed in f32, as bf16 always is here), everything else f32
    from presk.dialects import core as C
    ops = _core_ops(module, reached(module, "loss"))
    like = Realization(entry="loss",
                       sites={s: "bf16" if isinstance(op, (C.DotOp, C.ContractOp)) else "f32"
                              for s, op in ops.items()},
                       params=dict(f32.params))

    rows = [
        ("all-f64 (kernel interpreter)", cost.cost(Realization(entry="loss")),
         sol.f64_measured),
        ("all-f32 (kernel interpreter)", cost.cost(f32), kernel_error(f32)),
        ("autocast-like: dots bf16, rest f32", cost.cost(like), kernel_error(like)),
        (f"solved {sol.realization.summary()}", sol.cost, sol.measured),
    ]
    x, y = values["batch.0"], values["batch.1"]
    for label, dtype, ac in (("torch float64", torch.float64, False),
                             ("torch float32", torch.float32, False),
                             ("torch autocast bf16 (CPU)", torch.float32, True)):
        rows.append((label, None, err_of(torch_tower(params, x, y, dtype, ac))))

    dim_text = ", ".join(f"{k} = {v}" for k, v in dims.items())
    print(f"\n== {name}: {path} at {dim_text}, budget {budget:g} relative "
          f"({sol.absolute:.3e} absolute, |loss| {sol.magnitude:.6g})")
    print(f"   calibrate (MPFR, 128 bits, {samples} sample(s)): {t_cal:.2f} s; "
          f"solve (sensitivities, greedy, measurement): {t_solve:.2f} s, "
          f"{len(sol.moves)} moves, {len(sol.widenings)} widening(s)")
    print(f"   {'realization':<34} {'bytes/call':>12} {'vs f64':>7} {'error':>10} "
          f"{'relative':>10}  budget")
    for label, c, e in rows:
        ctext = f"{c:12.4e} {c / sol.cost_f64:6.3f}x" if c is not None else f"{'-':>12} {'-':>7}"
        inside = "inside" if e <= sol.absolute else "OUTSIDE"
        print(f"   {label:<34} {ctext} {e:10.3e} {e / sol.magnitude:10.3e}  {inside}")
    print(f"   solver: estimate {sol.estimate:.3e}, relaxation floor {sol.floor:.4e} bytes; "
          f"sites {dict(sorted(sol.realization.sites.items()))}; "
          f"params {dict(sorted(sol.realization.params.items()))}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=64, help="B of the scaled Tower")
    parser.add_argument("--samples", type=int, default=1, help="calibration samples")
    parser.add_argument("--only", choices=["tutorial", "tower"])
    args = parser.parse_args(argv)
    if not (Path.cwd() / "tutorial" / "07_train.psk").exists():
        print("bench/precision.py: run it from the repository root", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    if args.only in (None, "tutorial"):
        bench("the tutorial (D = 4, L = 3)", "tutorial/07_train.psk", {"B": 4}, args.budget,
              args.samples)
    if args.only in (None, "tower"):
        bench("a scaled Tower (D = 256, L = 4)", "bench/scaled_tower.psk", {"B": args.batch},
              args.budget, args.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
