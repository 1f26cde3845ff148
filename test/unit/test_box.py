"""The box analysis (presk/analysis/box.py): its bound is never below the error measured
at random points and corners of the box (the Core f64 interpreter, the kernels' bits under
all-f64, and the kernel interpreter under narrower realizations, against MPFR); the FPCore
importer; the ranges; `solve --certify` never keeps a type a value overflows over the box."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presk import ops
from presk.analysis import box as B
from presk.analysis import ranges as RG
from presk.analysis.boxcheck import (NativeEntry, elementwise_errors, entry_errors,
                                     exact_outputs)
from presk.analysis.realization import Realization
from presk.cli.main import main
from presk.frontend.fpcore import FPCoreError, to_psk, translate
from presk.pipeline import load_core

pytestmark = pytest.mark.early(0.71)  # CPU minutes (test/conftest.py)

FPBENCH = os.path.join(os.path.dirname(__file__), "..", "fpbench")


def _import(name: str, tmp_path):
    path = os.path.join(FPBENCH, name + ".fpcore")
    with open(path, encoding="utf-8") as f:
        (core,) = translate(f.read(), path)
    psk = tmp_path / f"{core.name}.psk"
    psk.write_text(to_psk([core], name + ".fpcore", points=True), encoding="utf-8")
    module, _ = load_core(str(psk))
    spec = RG.RangeSpec(core.name, {a: list(r) for a, r in core.ranges.items()})
    box = RG.resolve(spec, {a: () for a in core.args}, {}, {})
    return module, core, box


def _points(core, box, n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    cols = {a: [float(c[0][a]) for c in RG.corners(box)] for a in core.args}
    for a in core.args:
        lo, hi = box.inputs[a]
        cols[a] = np.concatenate([cols[a], lo + (hi - lo) * rng.random(n)])
    return [cols[a] for a in core.args]


# FPTaylor's formally checked double bounds (github.com/soarlab/FPTaylor,
# benchmarks/toplas/formal-b.hl and formal-b-extra.hl; bench/fpbench.py cites them)
FPTAYLOR = {"doppler1": 1.59e-13, "turbine1": 2.32e-14, "kepler0": 9.45e-14,
            "sine": 5.55e-16, "sqroot": 7.00e-16, "sphere": 1.01e-14,
            "rigidBody2": 5.24e-11, "carbonGas": 9.13e-9, "verhulst": 3.24e-16}


ALL = sorted(os.path.basename(f)[:-7] for f in os.listdir(FPBENCH) if f.endswith(".fpcore"))


@pytest.mark.parametrize("name", [n if n in FPTAYLOR else pytest.param(n, marks=pytest.mark.slow)
                                  for n in ALL])
def test_fpbench_bound_is_sound_and_within_2x_of_fptaylor(name, tmp_path):
    """Every benchmark: the bound holds at 2 000 random points and the corners, native
    code (`f_points`, one call) against MPFR (bench/fpbench.py does 10⁵); within 2× of
    FPTaylor's bound on the nine listed."""
    from presk.analysis.boxcheck import native_points
    module, core, box = _import(name, tmp_path)
    res = B.analyze(module, core.name, {}, Realization(), box, {}, {})
    assert 0 < res.bound < (2 * FPTAYLOR[name] if name in FPTAYLOR else math.inf)
    cols = _points(core, box, 2000)
    computed = native_points(module, core.name + "_points", dict(zip(core.args, cols)))
    errors = elementwise_errors(module, core.name + "_each", cols, computed=computed)
    assert np.max(errors) <= res.bound
    assert np.max(errors) > 0  # the comparison measured something


def test_a_narrower_realization_is_bounded_at_its_type(tmp_path):
    """doppler1 with every site in f32 (the kernel interpreter, f32 arithmetic): the
    bound grows by about 2^29 and still holds at the points."""
    module, core, box = _import("doppler1", tmp_path)
    f64 = B.analyze(module, core.name, {}, Realization(), box, {}, {})
    sites = {s.site: "f32" for s in f64.sites if s.site.startswith("doppler1_each/")}
    real = Realization(core.name, sites, {})
    res = B.analyze(module, core.name, {}, real, box, {}, {})
    assert 1e7 < res.bound / f64.bound < 1e10
    cols = _points(core, box, 20, seed=3)
    pts = [({a: np.asarray(c[i]) for a, c in zip(core.args, cols)}, {})
           for i in range(len(cols[0]))]
    assert max(entry_errors(module, core.name, {}, real, pts)) <= res.bound


_LEAVES = st.sampled_from(["x", "y", "0.75", "3.0", "-1.5"])


def _expr(depth: int):
    if depth == 0:
        return _LEAVES
    sub = _expr(depth - 1)
    return st.one_of(
        _LEAVES,
        st.tuples(st.sampled_from(["+", "-", "*"]), sub, sub).map(
            lambda t: f"({t[1]} {t[0]} {t[2]})"),
        st.tuples(sub).map(lambda t: f"({t[0]} / (1.5 + {t[0]} * {t[0]}))"),
        st.tuples(sub).map(lambda t: f"sqrt(2.0 + {t[0]} * {t[0]})"),
        st.tuples(sub).map(lambda t: f"exp(tanh({t[0]}))"),
        st.tuples(sub).map(lambda t: f"sinh(tanh({t[0]}))"),
        st.tuples(sub, sub).map(lambda t: f"max({t[0]}, {t[1]})"),
        st.tuples(sub, st.sampled_from([2, 3, 4, 5])).map(lambda t: f"({t[0]} ^ {t[1]})"),
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(expr=_expr(3), lo=st.floats(-4, 2), width=st.floats(0.01, 3), seed=st.integers(0, 9))
def test_random_programs_never_exceed_their_box_bound(expr, lo, width, seed, tmp_path):
    src = (f"fn f_each(x : ℝ[...], y : ℝ[...]) -> ℝ[...] =\n  let r = {expr} + x * y\n  r\n\n"
           "fn f(x : ℝ[], y : ℝ[]) -> ℝ[] =\n  f_each(x, y)\n")
    psk = tmp_path / f"p{abs(hash(expr)) % 10**8}.psk"
    psk.write_text(src, encoding="utf-8")
    module, _ = load_core(str(psk))
    box = B.Ranges({"x": (np.array(lo), np.array(lo + width)),
                    "y": (np.array(-lo - width), np.array(-lo))}, {})
    res = B.analyze(module, "f", {}, Realization(), box, {}, {}, max_leaves=16)
    rng = np.random.default_rng(seed)
    pts = [np.concatenate([[lo, lo, lo + width, lo + width], lo + width * rng.random(60)]),
           np.concatenate([[-lo - width, -lo] * 2, -lo - width * rng.random(60)])]
    assert np.max(elementwise_errors(module, "f_each", pts)) <= res.bound


def test_overflow_over_the_box_is_never_certified(tmp_path, capsys):
    """x³ stays in f32's range at the box's midpoint (the sample) but not at its top:
    the sampled solver narrows it, --certify widens it back."""
    psk = tmp_path / "cube.psk"
    psk.write_text("dim N\n\nfn cube(x : ℝ[n: N]) -> ℝ[] =\n  let p = x * x * x\n"
                   "  mean(p / 1e30)\n", encoding="utf-8")
    env, out = str(tmp_path / "env.json"), str(tmp_path / "r.json")
    box = ["--range", "x=[1, 1e13]"]
    assert main(["calibrate", "--precision", str(psk), "--entry", "cube", "--dim", "N=64",
                 *box, "--out", env]) == 0
    mid = str(tmp_path / "env.inputs.safetensors")  # calibrate --range's sample: the midpoint
    assert main(["solve", str(psk), "--entry", "cube", "--dim", "N=64", "--precision", env,
                 "--budget", "1e-3", "--inputs", mid, "--out", out]) == 0
    sampled = json.loads(open(out).read())["sites"]
    assert "f32" in sampled.values() or "bf16" in sampled.values()
    assert main(["solve", str(psk), "--entry", "cube", "--dim", "N=64", "--precision", env,
                 "--budget", "1e-3", "--certify", *box, "--out", out]) == 0
    certified = json.loads(open(out).read())["sites"]
    assert not {t for t in certified.values()} & {"f32", "bf16"}
    assert "leave f32's range" in capsys.readouterr().out
    # and the analysis names the type it excludes
    module, _ = load_core(str(psk))
    res = B.analyze(module, "cube", {"N": 4}, Realization(),
                    B.Ranges({"x": (np.ones(4), np.full(4, 1e13))}, {}), {}, {})
    assert any(set(bad) == {"f32", "bf16"} for bad in res.excluded.values())


def test_import_fpcore_cli(tmp_path, capsys):
    out = tmp_path / "d.psk"
    assert main(["import-fpcore", os.path.join(FPBENCH, "doppler1.fpcore"), "-o",
                 str(out)]) == 0
    ranges = json.loads((tmp_path / "d.ranges.json").read_text())
    assert ranges == {"format": "presk-ranges/1", "entry": "doppler1",
                      "inputs": {"u": [-100.0, 100.0], "v": [20.0, 20000.0],
                                 "T": [-30.0, 50.0]}}
    assert "fn doppler1(u : ℝ[], v : ℝ[], T : ℝ[]) -> ℝ[] =" in out.read_text()


@pytest.mark.parametrize("text, message", [
    ("(FPCore (x) :pre (<= 0 x 1) (while (< x 1) ([x x (+ x 1)]) x))",
     "`while` is outside the straight-line subset"),
    ("(FPCore (x) :pre (<= 0 x 1) (atan x))", "`atan` with 1 argument(s) is not a function"),
    ("(FPCore (x y) :pre (<= 0 x 1) (+ x y))", "argument `y` has no range"),
    ("(FPCore (x) :pre (<= 0 x 1) (pow x 0.5))", "pow to a non-natural exponent"),
    ("(FPCore (x) :pre (<= 0 x 1) (+ x 1)", "`(` is never closed"),
])
def test_import_fpcore_refuses_in_one_line(text, message, tmp_path, capsys):
    src = tmp_path / "bad.fpcore"
    src.write_text(text, encoding="utf-8")
    assert main(["import-fpcore", str(src), "-o", str(tmp_path / "bad.psk")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and f"{src}:1:" in err


def test_fpcore_lets_and_dropped_conjuncts():
    (core,) = translate("(FPCore (x y) :pre (and (<= -1 x 1) (>= 2 y -2) (< (+ x y) 1))"
                        " (let* ([a (* x x)] [b (+ a y)]) (- b (fabs x))))", "t.fpcore")
    assert core.ranges == {"x": [-1.0, 1.0], "y": [-2.0, 2.0]}
    assert core.lets == [("a", "(x * x)"), ("b", "(a + y)")]
    assert core.result == "(b - abs(x))"
    assert core.dropped == ["t.fpcore:1:49"]
    with pytest.raises(FPCoreError, match="bounded on one side"):
        translate("(FPCore (x) :pre (<= 0 x) x)", "t.fpcore")


@pytest.mark.parametrize("flag, message", [
    ("x", "expected NAME=[lo, hi]"), ("x=[1]", "two numbers"), ("x=[2, 1]", "above hi"),
])
def test_bad_ranges_are_one_line(flag, message, tmp_path, capsys):
    psk = tmp_path / "s.psk"
    psk.write_text("fn s(x : ℝ[]) -> ℝ[] =\n  x * x\n", encoding="utf-8")
    code = main(["calibrate", "--precision", str(psk), "--entry", "s", "--range", flag,
                 "--out", str(tmp_path / "e.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_ranges_file_and_around(tmp_path):
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"format": "presk-ranges/1", "inputs": {
        "a": [0, 1], "b": {"around": 0.1}, "c": {"lo": [0, 1], "hi": [2, 3]}}}))
    spec = RG.load_ranges(str(f))
    box = RG.resolve(spec, {"a": (2,), "b": (2,), "c": (2,)}, {},
                     {"b": np.array([10.0, -20.0])})
    assert np.all(box.inputs["a"][0] == 0) and np.all(box.inputs["a"][1] == 1)
    lo, hi = box.inputs["b"]
    assert lo[0] <= 9.0 and hi[0] >= 11.0 and lo[1] <= -22.0 and hi[1] >= -18.0
    assert list(box.inputs["c"][1]) == [2.0, 3.0]
    with pytest.raises(RG.RangesError, match="neither an input nor a parameter"):
        RG.resolve(RG.RangeSpec(None, {"z": [0, 1]}), {"a": ()}, {}, {})


@pytest.mark.slow
def test_tutorial_box_bound_and_certify(tmp_path, capsys):
    """The tutorial's loss at B = 4 over ±10 % around its inputs: a finite box bound
    that native code never exceeds at 300 fresh points and 30 random corners of the box
    (bench/fpbench.py --tutorial does 10⁵), and `solve --certify` at 1e-3 writes a
    realization whose box bound is under the budget — and whose error there (native, and
    the kernel interpreter at three) is under it too."""
    from presk.analysis import entry as E
    from presk.analysis.realization import load_realization
    from presk.analysis.sensitivity import sensitivities
    from presk.analysis.solver import _magnitude
    tut = "tutorial/07_train.psk"
    module, _ = load_core(tut)
    prepared = E.prepare(module, "loss", {"B": 4})
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    box = RG.resolve(RG.RangeSpec("loss", {"batch.0": {"around": 0.1},
                                           "batch.1": {"around": 0.1}}),
                     prepared.inputs, params, values)
    res = B.analyze(module, "loss", {"B": 4}, Realization(), box, params, values)
    assert np.isfinite(res.bound) and res.bound < 1e-9
    rng = np.random.default_rng(11)
    fresh = [(RG.sample(box, rng)[0], params) for _ in range(300)]
    fresh += [(RG.sample(box, rng, corners=True)[0], params) for _ in range(30)]
    exact = exact_outputs(module, "loss", {"B": 4}, fresh)
    native = NativeEntry(module, "loss", {"B": 4}, Realization(), params, values)
    assert max(native.errors(fresh, exact)) <= res.bound
    env, out = str(tmp_path / "env.json"), str(tmp_path / "r.json")
    flags = ["--range", "batch.0=±10%", "--range", "batch.1=±10%"]
    assert main(["calibrate", "--precision", tut, "--entry", "loss", "--dim", "B=4", *flags,
                 "--out", env]) == 0
    assert main(["solve", tut, "--entry", "loss", "--dim", "B=4", "--precision", env,
                 "--budget", "1e-3", "--certify", *flags, "--out", out]) == 0
    assert "certified" in capsys.readouterr().out
    real = load_realization(out)
    certified = B.analyze(module, "loss", {"B": 4}, real, box, params, values)
    magnitude = _magnitude(sensitivities(module, "loss", {"B": 4}, params, values, 128).value)
    assert certified.bound <= 1e-3 * magnitude
    errors = NativeEntry(module, "loss", {"B": 4}, real, params, values).errors(fresh, exact)
    assert 0 < max(errors) <= certified.bound
    assert max(entry_errors(module, "loss", {"B": 4}, real, fresh[:3])) <= certified.bound


# a box per function of the op table (inside its domain); the rest: [-2, 2]
_DOMAIN = {"log": (0.25, 4.0), "sqrt": (0.25, 4.0), "log1p": (-0.5, 3.0), "sin": (-3.0, 3.0), "cos": (-3.0, 3.0),
           "softplus": (-6.0, 6.0), "sinh": (-5.0, 5.0), "sigmoid": (-6.0, 6.0)}


def _function_program(fn: str, tmp_path) -> tuple:
    """f(x) = fn(x)·1.5 + x, with `f_points` over POINTS points (native, one call)."""
    from presk.frontend.fpcore import POINTS
    src = (f"dim {POINTS}\n\nfn f_each(x : ℝ[...]) -> ℝ[...] =\n  let r = {fn}(x) * 1.5 + x\n"
           f"  r\n\nfn f(x : ℝ[]) -> ℝ[] =\n  f_each(x)\n\n"
           f"fn f_points(x : ℝ[point: {POINTS}]) -> ℝ[point: {POINTS}] =\n  f_each(x)\n")
    psk = tmp_path / f"{fn}.psk"
    psk.write_text(src, encoding="utf-8")
    module, _ = load_core(str(psk))
    lo, hi = _DOMAIN.get(fn, (-2.0, 2.0))
    return module, B.Ranges({"x": (np.array(lo), np.array(hi))}, {}), lo, hi


@pytest.mark.parametrize("fn", sorted(f.builtin for f in ops.rows(arity=1, core=True)
                                      if f.builtin))
@pytest.mark.parametrize("ty", ["f64", pytest.param("f32", marks=pytest.mark.slow)])
def test_every_function_of_the_table_is_bounded_soundly(fn, ty, tmp_path):
    """Every unary function a program can call (sinh included) has a box rule, and its
    bound holds at 3 000 points and the ends of the box: native code under all-f64 and
    under every site in f32, against MPFR; a library function is charged its own
    measured ulps (presk/ops `ulps`), so the bound is finite and not loose by much."""
    from presk.analysis.boxcheck import native_points
    module, box, lo, hi = _function_program(fn, tmp_path)
    f64 = B.analyze(module, "f", {}, Realization(), box, {}, {})
    real = Realization() if ty == "f64" else \
        Realization(None, {s.site: "f32" for s in f64.sites}, {})
    res = f64 if ty == "f64" else B.analyze(module, "f", {}, real, box, {}, {})
    assert 0 < res.bound < math.inf and not res.problems
    x = np.concatenate([[lo, hi], lo + (hi - lo) * np.random.default_rng(5).random(3000)])
    computed = native_points(module, "f_points", {"x": x}, real)
    errors = elementwise_errors(module, "f_each", [x], computed=computed)
    assert np.max(errors) <= res.bound
    assert np.max(errors) > res.bound / 64  # the bound is not loose by much either


def test_pow_with_a_real_exponent_is_bounded_soundly(tmp_path):
    """x ^ y for a real y (the library's pow): both operands over a box, the bound holds
    at native points; a base that can reach 0 is a problem line and an infinite bound."""
    from presk.analysis.boxcheck import native_points
    from presk.frontend.fpcore import POINTS
    src = (f"dim {POINTS}\n\nfn f_each(x : ℝ[...], y : ℝ[...]) -> ℝ[...] =\n"
           "  let r = x ^ y + x\n  r\n\nfn f(x : ℝ[], y : ℝ[]) -> ℝ[] =\n  f_each(x, y)\n\n"
           f"fn f_points(x : ℝ[point: {POINTS}], y : ℝ[point: {POINTS}]) -> "
           f"ℝ[point: {POINTS}] =\n  f_each(x, y)\n")
    psk = tmp_path / "pow.psk"
    psk.write_text(src, encoding="utf-8")
    module, _ = load_core(str(psk))
    box = B.Ranges({"x": (np.array(0.5), np.array(3.0)), "y": (np.array(-1.5), np.array(2.5))},
                   {})
    res = B.analyze(module, "f", {}, Realization(), box, {}, {})
    rng = np.random.default_rng(2)
    x, y = 0.5 + 2.5 * rng.random(3000), -1.5 + 4.0 * rng.random(3000)
    computed = native_points(module, "f_points", {"x": x, "y": y})
    errors = elementwise_errors(module, "f_each", [x, y], computed=computed)
    assert 0 < np.max(errors) <= res.bound < math.inf
    bad = B.analyze(module, "f", {}, Realization(),
                    B.Ranges({"x": (np.array(0.0), np.array(1.0)), "y": (np.array(1.0),
                                                                          np.array(2.0))}, {}),
                    {}, {}, max_leaves=8)
    assert bad.bound == math.inf and any("pow's base" in p for p in bad.problems)


def test_library_functions_are_charged_their_measured_ulps():
    """softplus f64 errs up to 2 ulps (docs/mathlib.md): (2·2 + 1)·u; exp f64 1 ulp: 3u;
    bf16 is the f32 call's charge plus the store's rounding."""
    u64, u32 = 2.0 ** -53, 2.0 ** -24
    assert float(B._library_unit("softplus", "f64")[0]) == 5 * u64
    assert float(B._library_unit("exp", "f64")[0]) == 3 * u64
    assert float(B._library_unit("sinh", "f32")[0]) == 3 * u32
    bf16 = float(B._library_unit("exp", "bf16")[0])
    assert 2.0 ** -8 + 3 * u32 <= bf16 <= 2.0 ** -8 + 4 * u32
    assert ops.row("softplus").bound_ulps == 5.0 and ops.row("exp").bound_ulps == 4.0


def test_every_core_function_of_the_table_has_a_box_rule():
    """A row added to the op table (with a Core op) needs its box rule, or a composite
    expression the analysis walks: otherwise `--model box` refuses programs calling it."""
    missing = [f.name for f in ops.rows(core=True)
               if f.name not in B.RULES and not isinstance(f.compute, ops.Composite)]
    assert not missing, f"no box rule (presk/analysis/box.py RULES) for {missing}"


@pytest.mark.parametrize("name", ["sphere", "logexp", "sine", "turbine1"])
def test_the_replayed_tape_gives_the_interpreters_result(name, tmp_path, monkeypatch):
    """The leaves after the first replay its tape of rule calls (box._Tape) instead of
    interpreting the program again: the same bound, ranges, shares and problems."""
    module, core, box = _import(name, tmp_path)

    def run(tape: bool):
        monkeypatch.setattr(B, "TAPE", tape)
        r = B.analyze(module, core.name, {}, Realization(), box, {}, {}, max_leaves=48)
        return (r.bound, r.leaves, r.lo, r.hi, r.contributions, r.excluded, r.problems,
                [(s.site, s.type, s.lo, s.hi, s.error) for s in r.sites])
    assert run(True) == run(False)


def test_the_tape_follows_kinks_powers_and_functions(tmp_path, monkeypatch):
    src = ("fn f_each(x : ℝ[...], y : ℝ[...]) -> ℝ[...] =\n"
           "  let r = relu(x - y) * (x ^ 3) + max(x, y) + sigmoid(y) + abs(x) / (1.0 + y * y)\n"
           "  r\n\nfn f(x : ℝ[], y : ℝ[]) -> ℝ[] =\n  f_each(x, y)\n")
    psk = tmp_path / "kinks.psk"
    psk.write_text(src, encoding="utf-8")
    module, _ = load_core(str(psk))
    box = B.Ranges({"x": (np.array(-1.0), np.array(2.0)), "y": (np.array(-0.5), np.array(1.0))},
                   {})
    out, replays = {}, []
    replay = B._Tape.replay
    monkeypatch.setattr(B._Tape, "replay", lambda t, i: replays.append(1) or replay(t, i))
    for tape in (True, False):
        monkeypatch.setattr(B, "TAPE", tape)
        r = B.analyze(module, "f", {}, Realization(), box, {}, {}, max_leaves=40)
        out[tape] = (r.bound, r.lo, r.hi, r.contributions)
    assert out[True] == out[False] and 0 < out[True][0] < math.inf
    assert len(replays) > 30  # the tape was replayed, not given up
