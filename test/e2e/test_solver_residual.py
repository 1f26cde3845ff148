"""Issue 15's solver acceptance on its program: the residual stack of eight two-layer
blocks at D = 64 (test/fixtures/residual_stack.psk, 65 536 weight reals) solved at budget
1e-3 narrows both weight matrices of every block — priced in bytes, and priced in time by
the frozen profile, where narrowing a weight alone makes the host widen it for its f64
readers and only the joint move (the weights with the sites that read them) saves — and
the solved realization's native error, measured here against one MPFR run independently
of the solver's own measurement, is inside the budget. How much faster the solved program
runs is a benchmark's figure, not a test's (no timed assertions; docs/plan.md): measured
2.28x all-f64 at B = 4 in bytes, 2.71x with the frozen profile (the minimum of 5
interleaved rounds of time_call, load 4.6 on 2 cores)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from presk.analysis import entry as E
from presk.analysis import envelope as EV
from presk.analysis.profile import load_profile
from presk.analysis.realization import Realization
from presk.analysis.sensitivity import sensitivities
from presk.analysis.solver import Solution, TimeCost, _magnitude, measure_error, solve
from presk.pipeline import kernel_pipeline, load_core, run_native
from presk.pipeline.plan import call_seconds
from programs import ROOT

DIMS = {"B": 4}
BUDGET = 1e-3
PROFILE = str(ROOT / "test" / "fixtures" / "profile-frozen.json")


@dataclass
class Stack:
    module: Any
    envelope: Any
    params: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    weights: list[str]  # the weight matrices' paths

    def solve(self, profile=None) -> Solution:
        return solve(self.module, "loss", DIMS, self.envelope, BUDGET, self.params,
                     self.values, profile=profile)

    def native_error(self, realization: Realization) -> tuple[float, float]:
        """The realization's native error against MPFR, and the budget's absolute error."""
        exact = sensitivities(self.module, "loss", DIMS, self.params, self.values, 128).value
        run = run_native(self.module, "loss", DIMS, self.params, self.values, realization)
        return measure_error(run.result, exact), BUDGET * _magnitude(exact)


@pytest.fixture(scope="module")
def stack() -> Stack:
    module, _ = load_core(str(ROOT / "test" / "fixtures" / "residual_stack.psk"))
    prepared = E.prepare(module, "loss", dict(DIMS))
    return Stack(module, EV.calibrate(module, "loss", DIMS), E.weights(prepared, 0, None),
                 E.inputs(prepared, 0, None),
                 [f.path for f in prepared.fields if f.path.endswith(".w")])


@pytest.mark.slow
def test_the_residual_stack_narrows_its_weights_inside_the_budget(stack):
    solution = stack.solve()
    assert sorted(stack.weights) == ["blocks.down.w", "blocks.up.w"]
    assert all(solution.realization.param_type(w) != "f64" for w in stack.weights)
    assert solution.cost < 0.75 * solution.cost_f64
    assert solution.name.startswith("f64+sequential+")
    error, absolute = stack.native_error(solution.realization)
    assert 0 < error <= absolute


@pytest.mark.slow
def test_with_a_profile_the_joint_move_narrows_the_weights_inside_the_budget(stack):
    profile = load_profile(PROFILE)
    solution = stack.solve(profile)
    assert solution.unit == "s"
    # a weight narrowed alone costs more than all-f64 (the host converts it for its f64
    # readers on every call), so rule 2 judges it on the joint move that holds it, and
    # the first move taken narrows the weights together with the sites that read them
    alone = TimeCost(stack.module, "loss", DIMS, profile)
    for w in stack.weights:
        assert alone.cost(Realization(entry="loss", params={w: "f32"})) > solution.cost_f64
    assert all(d.offered for d in solution.decisions if d.key in stack.weights)
    first = solution.moves[0].key.split(" + ")
    assert set(stack.weights) <= set(first) and "Linear.apply/%3" in first
    assert all(solution.realization.param_type(w) == "f32" for w in stack.weights)
    # the model's predicted time, priced again here from the recordings: ≥ 1.5× below
    # all-f64's
    seconds = {name: call_seconds(kernel_pipeline(stack.module, "loss", DIMS, r).kernel,
                                  profile)
               for name, r in (("f64", Realization(entry="loss")),
                               ("solved", solution.realization))}
    assert seconds == {"f64": solution.cost_f64, "solved": solution.cost}
    assert seconds["f64"] >= 1.5 * seconds["solved"]
    error, absolute = stack.native_error(solution.realization)
    assert 0 < error <= absolute
