"""An entry whose result is a tensor (issue 14, item 6): test/data/softmax_batch.psk's
`probs`, the class probabilities of a batch — softmax over a linear map with a ℝ[]
temperature parameter — through every command: check, run on every engine, run --grad
with a cotangent on every engine, the sensitivities (one reverse sweep per element),
calibrate, solve at 1e-3 (measured inside the budget), check --precision --model all with
its componentwise table, the C export (make check) and the PyTorch export (a module with
a ℝ[] parameter). Each figure is compared with numpy here: the softmax written out, its
vector-Jacobian product by central differences."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from presk.analysis import entry as E
from presk.analysis.weights import load_tensors, save_tensors
from presk.pipeline import load_core
from programs import presk_in_process

ROOT = Path(__file__).resolve().parents[2]
FILE = str(ROOT / "test" / "data" / "softmax_batch.psk")
DIMS = {"B": 2}
ENGINES = ("mpfr", "f64", "kernel", "native")


def presk(*argv: str, ok: bool = True) -> subprocess.CompletedProcess:
    done = presk_in_process(list(argv))  # an uncaught exception is raised here
    if ok:
        assert done.returncode == 0, done.stderr
    return done


@lru_cache(maxsize=None)
def arguments() -> tuple[dict, dict]:
    module, _ = load_core(FILE)
    entry = E.prepare(module, "probs", DIMS)
    return E.weights(entry, 0, None), E.inputs(entry, 0, None)


def probs(w: np.ndarray, t: np.ndarray, x: np.ndarray) -> np.ndarray:
    z = t * (x @ w)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def vjp(c: np.ndarray, h: float = 1e-6) -> dict[str, np.ndarray]:
    """∂⟨c, probs⟩/∂θ by central differences."""
    params, values = arguments()
    out = {}
    for name in params:
        grad = np.zeros_like(params[name], dtype=np.float64)
        for i in np.ndindex(grad.shape or ()):
            hi = {k: np.array(v, dtype=np.float64) for k, v in params.items()}
            lo = {k: np.array(v, dtype=np.float64) for k, v in params.items()}
            hi[name][i] += h
            lo[name][i] -= h
            grad[i] = (np.sum(c * probs(hi["w"], hi["t"], values["x"]))
                       - np.sum(c * probs(lo["w"], lo["t"], values["x"]))) / (2 * h)
        out[name] = grad
    return out


def _values(stdout: str, name: str) -> np.ndarray:
    text = stdout.split(f"  {name} = ", 1)[1]
    text = re.split(r"\n  \S", "\n" + text.split("\n", 1)[0] + "\n" + text.split("\n", 1)[1]
                    if "\n" in text else text)[0]
    return np.array(eval(text.replace("\n", " ")), dtype=np.float64)  # noqa: S307


def test_check():
    assert presk("check", FILE).stdout.strip() == "Diagnostics: none"


@pytest.mark.parametrize("engine", ENGINES)
def test_run_every_engine(engine, tmp_path):
    params, values = arguments()
    out = tmp_path / "r.safetensors"
    presk("run", FILE, "--entry", "probs", "--dim", "B=2", "--engine", engine, "--out",
          str(out))
    got = load_tensors(str(out))["result"]
    want = probs(params["w"], params["t"], values["x"])
    assert got.shape == (2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-16)


@pytest.mark.parametrize("engine", ENGINES)
def test_run_grad_with_a_cotangent_every_engine(engine, tmp_path):
    c = np.random.default_rng(3).standard_normal((2, 3))
    cfile = tmp_path / "c.safetensors"
    save_tensors({"result": c}, str(cfile))
    out = tmp_path / "g.safetensors"
    done = presk("run", FILE, "--entry", "probs", "--dim", "B=2", "--engine", engine,
                 "--grad", "--cotangent", str(cfile), "--out", str(out))
    assert "the gradient of ⟨c, result⟩" in done.stdout
    got = load_tensors(str(out))
    want = vjp(c)
    for name in ("w", "t"):
        np.testing.assert_allclose(got[f"grad.{name}"], want[name], rtol=1e-6, atol=1e-9)
    assert got["grad.t"].shape == ()


def test_run_grad_of_a_tensor_needs_a_cotangent(tmp_path):
    done = presk("run", FILE, "--entry", "probs", "--dim", "B=2", "--grad", ok=False)
    assert done.returncode == 2 and "--cotangent" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    bad = tmp_path / "c.safetensors"
    save_tensors({"result": np.zeros((3, 2))}, str(bad))
    done = presk("run", FILE, "--entry", "probs", "--dim", "B=2", "--grad", "--cotangent",
                 str(bad), ok=False)
    assert done.returncode == 2 and "shape [3, 2]" in done.stderr


def test_sensitivities_are_the_largest_over_the_elements():
    """‖∂L_j/∂θ‖₁ per element j by central differences (cotangent e_j); the figure of a
    path is the largest over j; the result's own site has 1 (∂L_j/∂L = e_j)."""
    from presk.analysis.sensitivity import sensitivities
    module, _ = load_core(FILE)
    params, values = arguments()
    s = sensitivities(module, "probs", DIMS, params, values)
    assert s.shape == (2, 3) and len(s.components) == 6
    per = []
    for j in range(6):
        c = np.zeros(6)
        c[j] = 1
        per.append({k: np.sum(np.abs(v)) for k, v in vjp(c.reshape(2, 3)).items()})
    for name in ("w", "t"):
        assert float(s.params[name]) == pytest.approx(max(p[name] for p in per), rel=1e-6)
        for j in range(6):
            assert float(s.components[j][name]) == pytest.approx(per[j][name], rel=1e-6,
                                                                 abs=1e-9)
    assert float(s.sites["probs/%2"]) == pytest.approx(1.0)
    done = presk("dump", FILE, "--stage", "sensitivity", "--entry", "probs", "--dim", "B=2")
    assert "max over its 6 elements j of ‖∂L_j/∂v‖₁" in done.stdout


@pytest.fixture(scope="module")
def envelope(tmp_path_factory):
    path = tmp_path_factory.mktemp("tensor") / "envelope.json"
    presk("calibrate", "--precision", FILE, "--entry", "probs", "--dim", "B=2", "--out",
          str(path))
    return path


def test_solve_at_1e_3_is_measured_inside_the_budget(envelope, tmp_path):
    out = tmp_path / "realization.json"
    done = presk("solve", FILE, "--precision", str(envelope), "--budget", "1e-3", "--out",
                 str(out))
    figures = dict(re.findall(r"^  (measured|all-f64)\s+(\S+)", done.stdout, re.M))
    absolute = float(re.search(r"\((\S+) absolute", done.stdout).group(1))
    params, values = arguments()
    magnitude = np.max(probs(params["w"], params["t"], values["x"]))
    assert absolute == pytest.approx(1e-3 * magnitude, rel=1e-3)  # relative to max |L_j|
    assert float(figures["measured"]) <= absolute
    assert "inside the budget" in done.stdout
    assert '"f32"' in out.read_text()  # it narrowed something


def test_check_precision_all_rules_componentwise(envelope, tmp_path):
    from presk.analysis.bounds import SOUND, bounds
    from presk.analysis import envelope as EV
    from presk.analysis.realization import Realization
    module, _ = load_core(FILE)
    env = EV.load_envelope(str(envelope))
    real = Realization(entry="probs", sites={"Head.apply/%4": "f32", "Head.apply/%6": "f32"},
                       params={"w": "bf16"})
    b = bounds(module, "probs", DIMS, env, real, rules=("all",), do_measure=True)
    assert len(b.components) == 6
    for c in b.components:
        for rule in SOUND:
            assert c.bounds[rule] >= c.measured, (rule, c)
    for rule in ("k", "normwise", "cond"):  # the normwise figure is the largest element's
        assert b.bounds[rule] == pytest.approx(max(c.bounds[rule] for c in b.components))
    assert b.measured == max(c.measured for c in b.components)
    done = presk("check", "--precision", str(envelope), FILE, "--model", "all", "--measure")
    assert "componentwise: each of the 6 elements" in done.stdout


def test_export_c_make_check(tmp_path):
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    out = tmp_path / "c"
    presk("export", FILE, "--target", "c", "--entry", "probs", "--dim", "B=2", "-o", str(out))
    done = subprocess.run(["make", "-C", str(out), "check"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 elements bit for bit" in done.stdout


def test_export_pytorch_constructs_a_scalar_parameter(tmp_path):
    torch = pytest.importorskip("torch")
    presk("export", FILE, "--target", "pytorch", "-o", str(tmp_path))
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib
        mod = importlib.import_module("_softmax_batch")
    finally:
        sys.path.remove(str(tmp_path))
    head = mod.Head(dtype=torch.float64)
    assert tuple(head.t.shape) == ()
    assert tuple(mod.Head(stack=(3,), dtype=torch.float64).t.shape) == (3,)
    params, values = arguments()
    head.load_state_dict({k: torch.tensor(v) for k, v in params.items()})
    got = mod.probs(head, torch.tensor(values["x"])).detach().numpy()
    np.testing.assert_allclose(got, probs(params["w"], params["t"], values["x"]), rtol=1e-14)


def test_a_tuple_result_is_one_line_in_check_and_solve(tmp_path):
    prog = tmp_path / "tup.psk"
    prog.write_text("fn g(x : ℝ[3]) -> (ℝ[3], ℝ[3]) = (x, tanh(x))\n", encoding="utf-8")
    env = tmp_path / "env.json"
    presk("calibrate", "--precision", str(prog), "--entry", "g", "--out", str(env))
    for argv in (["check", "--precision", str(env), str(prog)],
                 ["solve", str(prog), "--precision", str(env), "--budget", "1e-3"]):
        done = presk(*argv, ok=False)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert "one tensor result" in done.stderr
