"""The solver (`presk solve`, reference §6.3) on the tutorial at B = 4, and its acceptance
on the tutorial (test/solver_acceptance.py: every budget 1e-2 … 1e-8 within the budget
of the MPFR reference), sharing one calibration and one solve per budget."""

from __future__ import annotations

import json
import math

import pytest

from presk.analysis import envelope as EV
from presk.analysis.realization import load_realization
from presk.analysis.solver import measure_error, solve
from solver_acceptance import (BUDGETS, DIMS, budget_id, check_loose_budget_narrows_something,
                               check_measured_error_inside_the_budget, calibrated, solved)

TUTORIAL = "tutorial/07_train.psk"
pytestmark = pytest.mark.early(0.44)


@pytest.fixture(scope="module")
def module():
    return calibrated(TUTORIAL)[0]


@pytest.fixture(scope="module")
def envelope(module):
    return calibrated(TUTORIAL)[1]


@pytest.fixture(scope="module")
def solution(module, envelope):
    # solve(module, "loss", DIMS, envelope, 1e-3) with the acceptance's shared cost model
    # (the same bytes), so test_every_budget_holds[0.001] and every other budget reuse
    # its recordings
    return solved(TUTORIAL, 1e-3)


def test_rule_1_leaves_two(solution):
    rule1 = sorted(d.key for d in solution.decisions if d.rule == 1)
    assert rule1 == ["RMSNorm.apply/%5", "loss/%7"]
    assert solution.stored == 11
    assert sum(1 for d in solution.decisions if d.kind == "site" and d.offered) == 9
    assert not [d for d in solution.decisions if d.rule == 2]


def test_parameters_offered_and_narrowed(solution):
    params = [d for d in solution.decisions if d.kind == "param"]
    assert {d.key for d in params} == {"blocks.norm.γ", "blocks.proj.w", "blocks.proj.b",
                                       "final.γ"}
    assert all(d.offered for d in params)
    assert any(d.type != "f64" for d in params)
    assert solution.realization.params


def test_terms_sum_to_the_estimate(solution):
    from presk.cli.solve_cmds import report
    text = report(solution)
    assert "The decisions, each with its term of the estimate" in text
    total = math.fsum(solution.terms().values())
    assert total == pytest.approx(solution.estimate, rel=1e-12)
    assert solution.estimate > 0


def test_measured_inside_and_cheaper(solution):
    assert solution.measured <= solution.absolute
    assert solution.cost < solution.cost_f64
    assert solution.floor <= solution.cost


def test_written_realization_runs_within_budget(module, solution, tmp_path):
    from presk.analysis import entry as E
    from presk.analysis.solver import write_realization
    from presk.analysis.sensitivity import sensitivities
    from presk.pipeline import run_kernel
    path = tmp_path / "realization.json"
    write_realization(solution, str(path))
    data = json.loads(path.read_text())
    assert data["format"] == "presk-realization/1"
    real = load_realization(str(path))
    assert real.sites == solution.realization.sites
    assert real.params == solution.realization.params
    prepared = E.prepare(module, "loss", DIMS)
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    run = run_kernel(module, "loss", DIMS, params, values, real)
    exact = sensitivities(module, "loss", DIMS, params, values).value
    assert measure_error(run.result, exact) <= solution.absolute


@pytest.mark.slow
@pytest.mark.parametrize("budget", [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8])
def test_every_budget_holds(budget):
    sol = solved(TUTORIAL, budget)  # the acceptance's own solve at its budgets
    assert sol.measured <= sol.absolute
    assert sol.estimate <= sol.absolute or sol.widenings


@pytest.mark.slow
def test_cli_solve(tmp_path, capsys, envelope):
    from presk.cli import solve_cmds
    import argparse
    env = tmp_path / "envelope.json"
    EV.save_envelope(envelope, str(env))
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    solve_cmds.add_solve(sub)
    out = tmp_path / "r.json"
    args = parser.parse_args(["solve", TUTORIAL, "--entry", "loss", "--dim", "B=4",
                              "--precision", str(env), "--budget", "1e-3", "--out", str(out)])
    assert args.run(args) == 0
    text = capsys.readouterr().out
    assert "rule 1" in text and "RMSNorm.apply/%5, loss/%7" in text
    assert "inside the budget" in text
    assert load_realization(str(out)).sites


def test_cli_bad_envelope(tmp_path):
    from presk.cli import solve_cmds
    from presk.cli.common import UsageError
    import argparse
    parser = argparse.ArgumentParser()
    solve_cmds.add_solve(parser.add_subparsers())
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "presk-realization/1"}')
    args = parser.parse_args(["solve", TUTORIAL, "--entry", "loss", "--dim", "B=4",
                              "--precision", str(bad), "--budget", "1e-3"])
    with pytest.raises(UsageError):
        args.run(args)
    with pytest.raises(SystemExit):
        parser.parse_args(["solve", TUTORIAL, "--entry", "loss", "--precision", str(bad),
                           "--budget", "-1"])


@pytest.mark.slow
@pytest.mark.parametrize("budget", BUDGETS, ids=budget_id)
def test_measured_error_inside_the_budget(budget):
    check_measured_error_inside_the_budget(TUTORIAL, budget)


@pytest.mark.slow
def test_loose_budget_narrows_something():
    check_loose_budget_narrows_something(TUTORIAL)


def test_solve_with_fma_fuses_a_small_contraction(tmp_path):
    """make test-fast's cousin of the next test: `solve(..., fma=True)` on one 2×3·3×2
    contraction lists it under fma and measures its error inside the budget (the
    kernel interpreter's exact fma); without the flag nothing is fused."""
    from presk.pipeline import load_core
    from programs import dot_program
    module, _ = load_core(str(dot_program(tmp_path, 2, 3, 2)))
    envelope = EV.calibrate(module, "loss", {})
    assert solve(module, "loss", {}, envelope, 1e-3).realization.fma == ()
    fused = solve(module, "loss", {}, envelope, 1e-3, fma=True)
    assert fused.realization.fma == ("M.apply/%3",)
    assert fused.measured <= fused.absolute


@pytest.mark.slow
def test_solve_with_fma_fuses_the_contraction_within_budget(module, envelope, solution):
    """`presk solve --fma`: every candidate fuses the entry's contraction (the tutorial's
    Linear.apply/%3), measured so (the kernel interpreter's exact fma), and the written
    realization keeps it; without the flag nothing is fused."""
    from presk.analysis import entry as E
    from presk.analysis.sensitivity import sensitivities
    from presk.pipeline import run_kernel
    assert solution.realization.fma == ()
    fused = solve(module, "loss", DIMS, envelope, 1e-3, fma=True)
    assert fused.realization.fma == ("Linear.apply/%3",)
    assert fused.measured <= fused.absolute
    prepared = E.prepare(module, "loss", DIMS)
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    run = run_kernel(module, "loss", DIMS, params, values, fused.realization)
    exact = sensitivities(module, "loss", DIMS, params, values).value
    assert measure_error(run.result, exact) == fused.measured


def test_only_the_first_recording_is_verified(module, monkeypatch):
    """The solver's candidates after the first skip verification (presk/dialects/common.py
    `unverified`); outside the solver every conversion still verifies what it built."""
    from xdsl.dialects.builtin import ModuleOp

    from presk.analysis.realization import Realization
    from presk.analysis.solver import Recordings
    from presk.pipeline import kernel_pipeline
    calls = []
    verify = ModuleOp.verify
    monkeypatch.setattr(ModuleOp, "verify", lambda self, *a: calls.append(1) or verify(self, *a))
    rec = Recordings(module, "loss", DIMS)
    rec.get(Realization(entry="loss"))
    first = len(calls)
    rec.get(Realization(entry="loss", sites={"loss/%5": "f32"}))
    assert first >= 2 and len(calls) == first  # the Realize and the Kernel module, once
    kernel_pipeline(module, "loss", DIMS, Realization(entry="loss", sites={"loss/%5": "f32"}))
    assert len(calls) >= 2 * first
