"""Issue 15's solver acceptance on its program, without a profile: the residual stack of
eight two-layer blocks at D = 64 (test/fixtures/residual_stack.psk, 65 536 weight reals)
solved at budget 1e-3 in bytes narrows both weight matrices of every block, and the
solved realization's native error — measured here against one MPFR run, independently of
the solver's own measurement — is inside the budget. How much faster the solved program
runs is a benchmark's figure, not a test's (no timed assertions): measured 2.28x all-f64
at B = 4 (the minimum of 5 interleaved rounds of time_call, load 11.6 on 2 cores)."""

from __future__ import annotations

import pytest

from presk.analysis import entry as E
from presk.analysis import envelope as EV
from presk.analysis.sensitivity import sensitivities
from presk.analysis.solver import _magnitude, measure_error, solve
from presk.pipeline import load_core, run_native
from programs import ROOT

DIMS = {"B": 4}
BUDGET = 1e-3


@pytest.mark.slow
def test_the_residual_stack_narrows_its_weights_inside_the_budget():
    module, _ = load_core(str(ROOT / "test" / "fixtures" / "residual_stack.psk"))
    envelope = EV.calibrate(module, "loss", DIMS)
    prepared = E.prepare(module, "loss", dict(DIMS))
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    solution = solve(module, "loss", DIMS, envelope, BUDGET, params, values)
    weights = [f.path for f in prepared.fields if f.path.endswith(".w")]
    assert sorted(weights) == ["blocks.down.w", "blocks.up.w"]
    assert all(solution.realization.param_type(w) != "f64" for w in weights)
    assert solution.cost < 0.75 * solution.cost_f64
    assert solution.name.startswith("f64+sequential+")
    exact = sensitivities(module, "loss", DIMS, params, values, 128).value
    absolute = BUDGET * _magnitude(exact)
    run = run_native(module, "loss", DIMS, params, values, solution.realization)
    assert 0 < measure_error(run.result, exact) <= absolute
