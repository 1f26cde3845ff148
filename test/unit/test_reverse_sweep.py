"""`presk solve --grad` (presk/analysis/reverse_sweep.py): the gradient's reverse sweep
narrowed where its measured error stays within the budget, on the tutorial at B = 4 —
checked against an f64 gradient computed apart (the all-f64 kernel run, 1e-16 from the
exact one) and between engines (native against the kernel interpreter, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

from presk.analysis.realization import Realization
from presk.analysis.reverse_sweep import gradient_errors, reverse_sites
from presk.analysis.solver import solve
from presk.pipeline import run_kernel, run_native
from solver_acceptance import DIMS, ENTRY, problem

TUTORIAL = "tutorial/07_train.psk"
pytestmark = pytest.mark.early(0.3)
BUDGET = 1e-3

# make test-fast leaves these cases out (test/conftest.py); make test runs them: the solve
# at 1e-3 with the gradient and fma takes 9 s of CPU; the fast set keeps the reverse sweep
# measured and refused (test_a_tight_budget_leaves_the_reverse_sweep_f64).
SLOW_CASES = {
    "test_the_reverse_sweep_is_narrowed_within_the_budget",
    "test_the_forward_ignores_the_reverse_sweep_s_sites",
}


@pytest.fixture(scope="module")
def tutorial():
    module, envelope, cost, _, params, values, _ = problem(TUTORIAL)
    return module, envelope, cost, params, values


@pytest.fixture(scope="module")
def solution(tutorial):
    module, envelope, cost, params, values = tutorial
    return solve(module, ENTRY, DIMS, envelope, BUDGET, params, values, cost_model=cost,
                 fma=True, grad=True)


def f64_gradient(module, params, values) -> dict[str, np.ndarray]:
    run = run_kernel(module, ENTRY, DIMS, params, values, None, grad=True)
    return {k: v for k, v in run.result.items() if k.startswith("grad.")}


def test_reverse_sites_are_the_sweep_s_own(tutorial):
    """The reverse sweep's functions' own sites, and the coefficients a `.fwd` computes
    for its `.bwd` (gelu's slope in Block.apply.fwd): no clone of a forward value."""
    module = tutorial[0]
    sites = reverse_sites(module, ENTRY)
    functions = {s.rpartition("/%")[0] for s in sites}
    assert sites and all(f.endswith((".bwd", ".vjp", ".value_vjp")) for f in functions
                         if f != "Block.apply.fwd")
    assert "Linear.apply.bwd" in functions and "RMSNorm.apply.bwd" in functions
    ahead = [s for s in sites if s.startswith("Block.apply.fwd/")]
    assert len(ahead) == 1  # gelu_slope


def test_the_reverse_sweep_is_narrowed_within_the_budget(tutorial, solution):
    module, _, _, params, values = tutorial
    r = solution.reverse
    assert r.narrowed and r.worst <= BUDGET
    assert all(solution.realization.sites[s] == "f32" for s in r.sites)
    assert set(r.sites) == set(reverse_sites(module, ENTRY))
    # the reverse sweep's contractions fused too (g·wᵀ and xᵀ·g), the forward's kept
    assert set(r.fma) == {"Linear.apply.bwd/%10", "Linear.apply.bwd/%11"}
    assert set(r.fma) < set(solution.realization.fma)
    # the gradient measured apart: native code under the realization against an f64 run
    native = run_native(module, ENTRY, DIMS, params, values, solution.realization, grad=True,
                        cache=False)
    errors = gradient_errors(native.result, f64_gradient(module, params, values))
    assert max(errors.values()) <= BUDGET
    assert max(errors.values()) > 1e-9  # it did narrow: f32's roundings show
    kernel = run_kernel(module, ENTRY, DIMS, params, values, solution.realization, grad=True)
    for key, value in kernel.result.items():  # and the engines agree bit for bit
        assert np.array_equal(np.asarray(native.result[key]), np.asarray(value)), key


def test_the_forward_ignores_the_reverse_sweep_s_sites(tutorial, solution):
    module, _, _, params, values = tutorial
    forward_only = Realization(
        solution.realization.entry,
        {s: t for s, t in solution.realization.sites.items() if s not in
         solution.reverse.sites},
        solution.realization.params,
        tuple(s for s in solution.realization.fma if s not in solution.reverse.fma))
    with_sweep = run_native(module, ENTRY, DIMS, params, values, solution.realization)
    without = run_native(module, ENTRY, DIMS, params, values, forward_only)
    assert with_sweep.result["result"] == without.result["result"]


def test_a_tight_budget_leaves_the_reverse_sweep_f64(tutorial):
    module, envelope, cost, params, values = tutorial
    tight = solve(module, ENTRY, DIMS, envelope, 1e-12, params, values, cost_model=cost,
                  grad=True)
    r = tight.reverse
    assert not r.narrowed and r.candidates > 0
    assert max(r.tried.values()) > 1e-12  # f32's reverse sweep measured over it
    assert not any(s in tight.realization.sites for s in reverse_sites(module, ENTRY))
    assert r.worst <= 1e-12


def test_gradient_errors_are_relative_to_each_tensor_s_largest():
    exact = {"grad.a": np.array([2.0, -4.0]), "grad.b": np.array([0.0])}
    got = gradient_errors({"grad.a": np.array([2.0, -3.0]), "grad.b": np.array([0.0])}, exact)
    assert got == {"grad.a": 0.25, "grad.b": 0.0}
    assert gradient_errors({"grad.b": np.array([1.0])}, {"grad.b": np.array([0.0])}) == \
        {"grad.b": np.inf}
