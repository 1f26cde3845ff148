"""What the solver's acceptance tests share (issue 6, reference §6.3): each program's
module, envelope, cost model, inputs and exact value made once per worker, a solve once
per (program, budget), and the two checks every program runs at every budget. The tests
are split by program — test/e2e/test_solver_acceptance*.py, and the tutorial's in
test/unit/test_solver.py beside its other solves, sharing its calibration — so that
`make test`'s two workers (pytest -n 2 --dist loadfile) each take a share: one file held
them all, ~64 % of the suite's CPU.

The error is measured here independently of the solver's own measurement: the kernel
interpreter under `solution.realization` against the exact value of one MPFR run.
"""

from __future__ import annotations

import functools

import pytest

from presk.analysis import entry as E
from presk.analysis import envelope as EV
from presk.analysis.realization import Realization
from presk.analysis.sensitivity import reached, sensitivities
from presk.analysis.solver import TrafficCost, _core_ops, _magnitude, measure_error, solve
from presk.pipeline import load_core, run_kernel
from programs import ROOT

BUDGETS = [1e-2, 1e-4, 1e-6, 1e-8]
DIMS = {"B": 4}
ENTRY = "loss"


@functools.lru_cache(maxsize=None)
def calibrated(path: str):
    """The module and its envelope (`presk calibrate` at B = 4)."""
    module, _ = load_core(str(ROOT / path))
    return module, EV.calibrate(module, ENTRY, DIMS)


@functools.lru_cache(maxsize=None)
def problem(path: str):
    """The module, its envelope, a cost model shared by every budget (it caches the
    kernel pipelines by realization), the inputs and the exact value."""
    module, envelope = calibrated(path)
    prepared = E.prepare(module, ENTRY, dict(DIMS))
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    exact = sensitivities(module, ENTRY, DIMS, params, values, 128).value
    cost = TrafficCost(module, ENTRY, DIMS)
    return module, envelope, cost, prepared, params, values, exact


@functools.lru_cache(maxsize=None)
def solved(path: str, budget: float):
    module, envelope, cost, *_ = problem(path)
    return solve(module, ENTRY, DIMS, envelope, budget, cost_model=cost)


def measured(path: str, realization: Realization) -> float:
    module, _, _, _, params, values, exact = problem(path)
    run = run_kernel(module, ENTRY, DIMS, params, values, realization)
    return measure_error(run.result, exact)


def all_f32(path: str) -> Realization:
    """The naive realization: every site of the functions the entry reaches, and every
    parameter, in f32."""
    module, _, _, prepared, *_ = problem(path)
    sites = _core_ops(module, reached(module, ENTRY))
    return Realization(entry=ENTRY, sites={s: "f32" for s in sites},
                       params={f.path: "f32" for f in prepared.fields})


def check_measured_error_inside_the_budget(path: str, budget: float) -> None:
    sol = solved(path, budget)
    *_, exact = problem(path)
    absolute = budget * _magnitude(exact)
    assert sol.absolute == pytest.approx(absolute, rel=1e-12)
    error = measured(path, sol.realization)
    assert error <= absolute, (
        f"{path} at {budget:g}: measured {error:.3e} > {absolute:.3e} under "
        f"{sol.realization.sites} {sol.realization.params}")
    # the solver's own measurement is the same measurement
    assert sol.measured == pytest.approx(error, rel=1e-9, abs=1e-300)
    assert sol.cost <= sol.cost_f64
    assert sol.floor <= sol.cost


def check_loose_budget_narrows_something(path: str) -> None:
    """Under 1e-2 every program is realized cheaper than all-f64: the solver does narrow."""
    sol = solved(path, 1e-2)
    assert sol.cost < sol.cost_f64
    assert sol.realization.sites or sol.realization.params


def budget_id(b: float) -> str:
    return f"{b:.0e}"
