"""psk-egraph-opt (presk/transforms/egraph.py) on whole programs.

* soundness: the optimized tutorial (07), 03–05 and test/precision_programs compute what
  the originals compute, in MPFR at 128 bits, to 1e-30 relative — the value and the
  gradient in the first argument (psk-differentiate run after the optimizer);
* accuracy: the textbook variance E[z²] − E[z]², z = x + 1000, x ~ N(0, 1), all-f32 (the
  kernel interpreter: native's bits): the error against MPFR falls ≥ 100× under the
  optimizer; `presk solve --opt` at 1e-4 narrows more sites, at a lower cost, than
  without it (calibrate --opt measured the optimized program's envelope);
* the report: `presk dump --stage opt` prints the optimized Core and each rewrite with its
  rule, the site it replaced and the sites it made; the optimizer's figures are computed
  (nodes, classes, iterations, predicted time before and after).
"""

from __future__ import annotations

import re
from pathlib import Path

import gmpy2
import pytest

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter
from presk.analysis.numbers import MPFR
from presk.analysis.realization import Realization
from presk.dialects import core as C
from presk.pipeline import differentiate, load_core, prepare_entry, run_kernel
from presk.pipeline.optimize import optimize
from programs import presk

ROOT = Path(__file__).resolve().parents[2]
VARIANCE = str(ROOT / "test/precision_programs/variance.psk")
PROGRAMS = [f"tutorial/{n}" for n in ("03_activations.psk", "04_mlp.psk", "05_stack.psk",
                                      "07_train.psk")] + \
    [f"test/precision_programs/{p.name}" for p in sorted((ROOT / "test/precision_programs")
                                                         .glob("*.psk"))]
DIMS = {"B": 4}


def _exact_run(module, params, values, entry):
    exact = MPFR(128)
    with exact.context():
        args = E.arguments(entry, exact, params, values)
        dy = exact.constant(1.0)
        result, *grads = Interpreter(module, exact).run("loss.value_vjp", args + [dy],
                                                         entry.dims)
        flat = E.flatten_result(result)
        flat.update(E.flatten_gradient(entry, grads[0]))
    return flat


@pytest.mark.parametrize("path", PROGRAMS)
def test_the_optimized_program_computes_the_same_reals(path: str) -> None:
    original, _ = load_core(str(ROOT / path))
    optimized, _ = load_core(str(ROOT / path))
    report = optimize(optimized, "loss", DIMS)
    assert report.functions, path
    for m in (original, optimized):
        differentiate(m, ["loss"], "store")
    entry, params, values = prepare_entry(original, "loss", DIMS, 3)
    want = _exact_run(original, params, values, entry)
    got = _exact_run(optimized, params, values, prepare_entry(optimized, "loss", DIMS, 3)[0])
    assert got.keys() == want.keys()
    with gmpy2.context(precision=128):
        for key in want:
            for a, b in zip(_elements(got[key]), _elements(want[key])):
                assert abs(a - b) <= 1e-30 * max(abs(b), gmpy2.mpfr(1e-300)), (path, key, a, b)


def _elements(v):
    import numpy as np
    return [gmpy2.mpfr(x) for x in np.asarray(v, dtype=object).reshape(-1)]


def _all_f32(module) -> Realization:
    return Realization("loss", {op.site.data: "f32" for f in module.ops
                                if isinstance(f, C.FuncOp) for op in f.body.block.ops
                                if not isinstance(op, C.ReturnOp)}, {})


def _f32_error(opt: bool, dims: dict[str, int], seed: int) -> float:
    module, _ = load_core(VARIANCE)
    if opt:
        optimize(module, "loss", dims, seed)
    entry, params, values = prepare_entry(module, "loss", dims, seed)
    got = float(run_kernel(module, "loss", entry.dims, params, values,
                           _all_f32(module)).result["result"])
    exact = MPFR(128)
    with exact.context():
        want = float(exact.to_f64(Interpreter(module, exact).run(
            "loss", E.arguments(entry, exact, params, values), entry.dims)))
    return abs(got - want) / abs(want)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_textbook_variance_in_f32_is_100_times_more_accurate(seed: int) -> None:
    before = _f32_error(False, {"B": 64}, seed)
    after = _f32_error(True, {"B": 64}, seed)
    assert after * 100 <= before, (before, after)


def _solve(tmp: Path, opt: bool) -> tuple[int, float]:
    flag = ["--opt"] if opt else []
    env = tmp / f"env{int(opt)}.json"
    common = ["--entry", "loss", "--dim", "B=64"]
    run = presk("calibrate", "--precision", VARIANCE, *common, "--out",
                str(env), *flag)
    assert run.returncode == 0, run.stderr
    run = presk("solve", VARIANCE, "--precision", str(env), "--budget",
                "1e-4", *common, *flag)
    assert run.returncode == 0, run.stderr
    cost = float(re.search(r"^  cost +(\S+)", run.stdout, re.M).group(1))
    table = run.stdout.split("The decisions", 1)[1].split("\n\n", 1)[0]
    narrowed = len(re.findall(r"^loss/%\d+ +.*? (f32|bf16) ", table, re.M))
    return narrowed, cost


@pytest.mark.slow
def test_solve_with_opt_narrows_more_sites_at_a_lower_cost(tmp_path: Path) -> None:
    plain, plain_cost = _solve(tmp_path, False)
    opt, opt_cost = _solve(tmp_path, True)
    assert opt > plain and opt_cost < plain_cost, (plain, plain_cost, opt, opt_cost)


def test_dump_stage_opt_lists_each_rewrite() -> None:
    run = presk("dump", "--stage", "opt", VARIANCE, "--entry", "loss",
                "--dim", "B=16")
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "mean axis feat x" in out and "sub z, m" not in out, out  # the shift is gone
    rewrites = re.findall(r"^  (loss/%\d+)  \[([^\]]+)\]", out, re.M)
    assert rewrites and rewrites[0][0] == "loss/%7" and "variance" in rewrites[0][1], out
    assert re.search(r"new sites: loss/%70\d", out), out
    row = re.search(r"^loss +(\d+) +(\d+) +(\d+) +(\d+) +(\w+)", out, re.M)
    assert row is not None and int(row.group(2)) >= int(row.group(1)), out


def test_opt_on_run_says_what_it_rewrote() -> None:
    run = presk("run", VARIANCE, "--entry", "loss", "--dim", "B=8",
                "--engine", "f64", "--opt")
    assert run.returncode == 0, run.stderr
    assert "presk: --opt: 1 rewrite: variance" in run.stderr, run.stderr


def test_an_unknown_entry_is_one_line() -> None:
    run = presk("dump", "--stage", "opt", VARIANCE, "--entry", "nope")
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_the_limits_stop_saturation() -> None:
    """A node limit stops the rounds (and says so); the result is still the original's
    reals: only the rewrites found by then are used."""
    from presk.transforms import egraph as G
    module, _ = load_core(VARIANCE)
    report = G.optimize(module, G.Options(node_limit=10))
    assert [f.stop for f in report.functions] == ["node limit"]
    assert report.functions[0].nodes >= 10 and report.functions[0].iterations == 1
    module, _ = load_core(VARIANCE)
    report = G.optimize(module, G.Options(iterations=1))
    assert [f.stop for f in report.functions] == ["iterations"]


def test_without_a_probe_the_cost_is_time_alone() -> None:
    """presk-opt runs the pass without an entry: bits are 0, and a rewrite is used only for
    time — the variance's is (it also drops the pass that adds 1000: 17604 → 16962
    operation-equivalents at the nominal size), 02_norm's recip-mul is."""
    from presk.transforms import egraph as G
    for path, rule in ((VARIANCE, "variance"), (str(ROOT / "tutorial/02_norm.psk"),
                                                 "recip-mul")):
        module, _ = load_core(path)
        report = G.optimize(module)
        assert all(f.bits_before == f.bits_after == 0.0 for f in report.functions)
        assert any(rule in e.rule for _, e in report.rewrites), report.rewrites
        changed = [f for f in report.functions if f.rewrites]
        assert changed and all(f.time_after < f.time_before for f in changed)


def test_with_a_profile_the_time_term_is_its_prediction() -> None:
    """With a machine profile (the frozen fixture), time is the profile's predicted
    seconds: the report says so, and the figures are seconds (the same rewrite wins)."""
    run = presk("dump", "--stage", "opt", VARIANCE, "--entry", "loss",
                "--dim", "B=64", "--profile",
                str(ROOT / "test/fixtures/profile-frozen.json"))
    assert run.returncode == 0, run.stderr
    assert "time in seconds predicted by the profile" in run.stdout, run.stdout
    row = re.search(r"^loss +\d+ +\d+ +\d+ +\d+ +\w+ +\S+ +\S+ +(\S+) +(\S+)", run.stdout,
                    re.M)
    assert row is not None and 0 < float(row.group(2)) < float(row.group(1)) < 1e-3, run.stdout
    assert "[variance" in run.stdout
