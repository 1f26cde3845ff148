"""Acceptance of `presk solve` (issue 6, reference §6.3): on every tutorial entry and three
programs of our own (test/precision_programs/), over budgets 1e-2 … 1e-8, the realization
the solver returns, run through the kernel interpreter, is within the budget of the MPFR
reference at 128 bits; and on the ill-conditioned program (a variance as E[z²] − E[z]² of
data with mean 1000) the solver keeps the cancelling sites in f64 where the naive all-f32
realization breaks the budget.

This file: 04, 05 and the variance; 03 and deep_tanh in test_solver_acceptance_tanh.py,
the classifier in test_solver_acceptance_classifier.py, the tutorial (07) in
test/unit/test_solver.py (test/solver_acceptance.py says why they are apart).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from presk.analysis import entry as E
from presk.analysis.sensitivity import sensitivities
from presk.analysis.solver import _magnitude
from presk.pipeline import load_core
from solver_acceptance import (BUDGETS, ENTRY, all_f32, budget_id,
                               check_loose_budget_narrows_something,
                               check_measured_error_inside_the_budget, measured, problem,
                               solved)

PROGRAMS = [
    "tutorial/04_mlp.psk",
    "tutorial/05_stack.psk",
    "test/precision_programs/variance.psk",
]
pytestmark = pytest.mark.early(0.2)

VARIANCE = "test/precision_programs/variance.psk"
# In variance.psk: m = mean(z) (loss/%3, read squared: an error δ in m moves m² by 2000·δ),
# z² (loss/%4), m2 = mean(z²) (loss/%5) and m² (loss/%6): the values of size 1e6 whose
# difference is the result (≈ 1). Rounding any of them to f32 moves the result by ≈ 0.03.
CANCELLING = ["loss/%3", "loss/%4", "loss/%5", "loss/%6"]


@pytest.mark.slow
@pytest.mark.parametrize("budget", BUDGETS, ids=budget_id)
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: Path(p).stem)
def test_measured_error_inside_the_budget(path, budget):
    check_measured_error_inside_the_budget(path, budget)


@pytest.mark.slow
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: Path(p).stem)
def test_loose_budget_narrows_something(path):
    check_loose_budget_narrows_something(path)


def test_naive_all_f32_breaks_the_variance():
    *_, exact = problem(VARIANCE)
    magnitude = _magnitude(exact)
    error = measured(VARIANCE, all_f32(VARIANCE))
    # ≈ 4e-2 absolute on a result of ≈ 1.4: a relative error of ≈ 3e-2
    assert error > 1e-2 * magnitude


@pytest.mark.parametrize("budget", [1e-2, 1e-3] + BUDGETS[1:], ids=budget_id)
def test_variance_keeps_the_cancelling_sites_f64(budget):
    sol = solved(VARIANCE, budget)
    *_, exact = problem(VARIANCE)
    naive = measured(VARIANCE, all_f32(VARIANCE))
    assert naive > sol.absolute, "all-f32 must break this budget for the test to say anything"
    types = {d.key: d.type for d in sol.decisions}
    types.update({o.site: o.type for o in sol.others})
    for site in CANCELLING:
        assert types[site] == "f64", f"{site} narrowed to {types[site]} at {budget:g}"
        assert sol.realization.site_type(site) == "f64"
    assert measured(VARIANCE, sol.realization) <= sol.absolute
    if budget >= 1e-4:
        # it still narrows what does not cancel (z = x + 1000 itself: its rounding moves
        # the variance by ≈ 2·E|z − m|·u·1000), so it is cheaper than all-f64
        assert sol.realization.site_type("loss/%2") == "f32"
        assert sol.cost < sol.cost_f64


def test_reverse_sweep_keeps_a_declared_axis_name(tmp_path):
    src = tmp_path / "named.psk"
    src.write_text(
        "dim B\n"
        "module M {\n"
        "  param w : ℝ[3, 5]  init = xavier_uniform\n"
        "  fn apply(x : ℝ[..., feat: 3]) -> ℝ[..., class: 5] =\n"
        "    x · w\n"
        "}\n"
        "fn loss(θ : params M, x : ℝ[batch: B, feat: 3]) -> ℝ[] =\n"
        "  mean(logsumexp(axis class, M.apply(θ, x)))\n", encoding="utf-8")
    module, _ = load_core(str(src))
    prepared = E.prepare(module, ENTRY, {"B": 2})
    sens = sensitivities(module, ENTRY, {"B": 2}, E.weights(prepared, 0, None),
                         E.inputs(prepared, 0, None), 128)
    assert sens.params["w"] > 0
