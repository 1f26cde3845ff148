"""The PSK-Core interpreter (presk/analysis/interpret.py) in f64 and in MPFR, and the
commands on it: `presk run`, `presk init`.

Each tutorial loss is compared with an independent numpy implementation of the same
model, written here from the .psk source (not from the Core IR), on the same weights and
inputs; MPFR is compared with f64, with itself at two precisions and with gmpy2 used
directly.
"""

from __future__ import annotations

import math
import subprocess
import time
from pathlib import Path

import gmpy2
import numpy as np
import pytest

from presk import ops
from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64, MPFR
from presk.analysis.weights import save_tensors
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from programs import LOSSES, TUTORIAL, presk_in_process, program as core

pytestmark = pytest.mark.early(0.49)  # CPU minutes (test/conftest.py)

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_init_then_run_weights_is_the_seeded_run",
}




def run_loss(name: str, numbers, params: dict, values: dict, b: int):
    module = core(name)
    entry = E.prepare(module, "loss", {"B": b})
    return Interpreter(module, numbers).run("loss", E.arguments(entry, numbers, params, values))


def seeded(name: str, b: int, seed: int = 0) -> tuple[dict, dict]:
    entry = E.prepare(core(name), "loss", {"B": b})
    return E.weights(entry, seed, None), E.inputs(entry, seed, None)


def rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


# --------------------------------------------------------------------------------------
# The models in numpy, from the tutorial's source
# --------------------------------------------------------------------------------------

_erf = np.vectorize(math.erf)


def np_gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def np_linear(x, w, b):
    return x @ w + b


def np_rmsnorm(x, g, eps=1e-6):
    ms = np.mean(x ** 2, axis=-1, keepdims=True)
    return x / np.sqrt(ms + eps) * g


def np_mse(pred, y):
    return float(np.mean((pred - y) ** 2))


def np_loss_07(p: dict, x, y) -> float:
    """06_tower.psk: L = 3 residual blocks x + proj(gelu(norm(x))), then the final norm."""
    h = x
    for k in range(p["blocks.proj.w"].shape[0]):
        n = np_rmsnorm(h, p["blocks.norm.γ"][k])
        h = h + np_linear(np_gelu(n), p["blocks.proj.w"][k], p["blocks.proj.b"][k])
    return np_mse(np_rmsnorm(h, p["final.γ"]), y)


def np_loss_04(p: dict, x, y) -> float:
    """04_mlp.psk: down(gelu(up(x)))."""
    h = np_gelu(np_linear(x, p["up.w"], p["up.b"]))
    return np_mse(np_linear(h, p["down.w"], p["down.b"]), y)


def np_loss_05(p: dict, x, y) -> float:
    """05_stack.psk: L = 2 blocks x + tanh(proj(x)), then the head."""
    h = x
    for k in range(p["blocks.proj.w"].shape[0]):
        h = h + np.tanh(np_linear(h, p["blocks.proj.w"][k], p["blocks.proj.b"][k]))
    return np_mse(np_linear(h, p["head.w"], p["head.b"]), y)


def np_loss_03(p: dict, x, y) -> float:
    """03_activations.psk: Act, then cross-entropy against softmax(y) plus 0.1·max gap."""
    softplus = np.log1p(np.exp(x))
    smooth = np_gelu(x) + softplus
    bounded = np.tanh(x) * (1.0 / (1.0 + np.exp(-x)))
    kinked = np.where(x > 0, x, 0.0)
    z = p["gain"] * (smooth + bounded + kinked) + softplus ** p["power"] - 0.1 * x ** 2
    top = z.max(axis=-1, keepdims=True)
    logp = z - (top + np.log(np.exp(z - top).sum(axis=-1, keepdims=True)))
    e = np.exp(y - y.max(axis=-1, keepdims=True))
    q = e / e.sum(axis=-1, keepdims=True)
    ce = -(q * logp).sum(axis=-1)
    gap = np.abs(q - np.exp(logp)).max(axis=-1)
    return float(ce.mean() + 0.1 * gap.max())


NUMPY = {"03_activations": np_loss_03, "04_mlp": np_loss_04, "05_stack": np_loss_05,
         "07_train": np_loss_07}


def random_weights(name: str, b: int, seed: int) -> dict[str, np.ndarray]:
    """Weights unlike the initializers' (γ ≠ 1, biases ≠ 0, gain and power ≠ 1), so that
    every parameter's broadcasting is exercised."""
    entry = E.prepare(core(name), "loss", {"B": b})
    rng = np.random.default_rng(seed)
    out = {}
    for f in entry.fields:
        if f.path.endswith("power"):
            out[f.path] = rng.uniform(0.5, 2.0, f.shape)
        elif f.path.endswith(("γ", "gain")):
            out[f.path] = rng.uniform(0.5, 1.5, f.shape)
        else:
            out[f.path] = rng.normal(0.0, 0.5, f.shape)
    return out


# Figures measured while the tests run, printed at the end (pytest -s shows them).
FIGURES: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    if FIGURES:
        print("\n" + "\n".join(f"  {k}: {v:.3g}" for k, v in sorted(FIGURES.items())))


def _figure(key: str, value: float) -> None:
    FIGURES[key] = max(FIGURES.get(key, 0.0), value)


# --------------------------------------------------------------------------------------
# f64 against numpy
# --------------------------------------------------------------------------------------


def test_seeded_weights_have_the_tutorials_layout() -> None:
    params, values = seeded("07_train", 4)
    assert {k: v.shape for k, v in params.items()} == {
        "blocks.norm.γ": (3, 4), "blocks.proj.w": (3, 4, 4), "blocks.proj.b": (3, 4),
        "final.γ": (4,)}
    assert sum(v.size for v in params.values()) == 76  # the reference's 76 reals
    assert {k: v.shape for k, v in values.items()} == {"batch.0": (4, 4), "batch.1": (4, 4)}
    np.testing.assert_array_equal(params["blocks.norm.γ"], np.ones((3, 4)))
    np.testing.assert_array_equal(params["blocks.proj.b"], np.zeros((3, 4)))
    bound = math.sqrt(6.0 / (4 + 4))  # xavier_uniform over one copy's fans
    w = params["blocks.proj.w"]
    assert np.all(np.abs(w) <= bound) and np.abs(w).max() > bound / 2
    assert not np.array_equal(w[0], w[1])  # each copy drawn, not repeated
    again, _ = seeded("07_train", 4)
    np.testing.assert_array_equal(again["blocks.proj.w"], w)
    other, _ = seeded("07_train", 4, seed=1)
    assert not np.array_equal(other["blocks.proj.w"], w)


@pytest.mark.parametrize("b", [4, 7])
@pytest.mark.parametrize("name", LOSSES)
def test_f64_agrees_with_numpy_on_seeded_weights(name: str, b: int) -> None:
    params, values = seeded(name, b)
    got = run_loss(name, F64(), params, values, b)
    assert np.shape(got) == () and np.asarray(got).dtype == np.float64
    expected = NUMPY[name](params, values["batch.0"], values["batch.1"])
    _figure("f64 vs numpy, max relative error", rel(float(got), expected))
    assert rel(float(got), expected) <= 1e-15, (float(got), expected)


@pytest.mark.parametrize("b", [4, 7])
@pytest.mark.parametrize("name", LOSSES)
def test_f64_agrees_with_numpy_on_weights_from_a_file(tmp_path: Path, name: str,
                                                      b: int) -> None:
    params = random_weights(name, b, seed=11)
    path = tmp_path / "w.safetensors"
    save_tensors(params, str(path))
    entry = E.prepare(core(name), "loss", {"B": b})
    loaded = E.weights(entry, 0, str(path))
    for k, v in params.items():
        np.testing.assert_array_equal(loaded[k], v)
    rng = np.random.default_rng(5)
    values = {"batch.0": rng.normal(0, 1.5, (b, 4)), "batch.1": rng.normal(0, 1.5, (b, 4))}
    got = float(run_loss(name, F64(), loaded, values, b))
    expected = NUMPY[name](params, values["batch.0"], values["batch.1"])
    _figure("f64 vs numpy, max relative error", rel(got, expected))
    assert rel(got, expected) <= 1e-15, (got, expected)


def test_numpy_model_is_sensitive_to_what_it_checks() -> None:
    """The comparison above would notice a wrong parameter: swapping two blocks, or
    dropping the final norm's γ, moves the loss far beyond 1e-15."""
    params = random_weights("07_train", 4, seed=11)
    _, values = seeded("07_train", 4)
    x, y = values["batch.0"], values["batch.1"]
    base = np_loss_07(params, x, y)
    swapped = dict(params, **{"blocks.proj.w": params["blocks.proj.w"][[1, 0, 2]]})
    assert rel(np_loss_07(swapped, x, y), base) > 1e-6
    ones = dict(params, **{"final.γ": np.ones(4)})
    assert rel(np_loss_07(ones, x, y), base) > 1e-6
    got = float(run_loss("07_train", F64(), params, values, 4))
    assert rel(got, base) <= 1e-15


# --------------------------------------------------------------------------------------
# MPFR against f64, against itself, against gmpy2
# --------------------------------------------------------------------------------------


def ulps(value: float, reference: float) -> float:
    return abs(value - reference) / np.spacing(abs(reference))


@pytest.mark.parametrize("b", [4, 7])
@pytest.mark.parametrize("name", LOSSES)
def test_mpfr_53_bits_is_f64_within_a_few_ulps(name: str, b: int) -> None:
    params, values = random_weights(name, b, seed=3), seeded(name, b)[1]
    f64 = float(run_loss(name, F64(), params, values, b))
    m53 = run_loss(name, MPFR(53), params, values, b)
    assert isinstance(m53, gmpy2.mpfr) and m53.precision == 53
    _figure("MPFR 53 vs f64, max ulps", ulps(float(m53), f64))
    assert ulps(float(m53), f64) <= 8, (float(m53), f64)


@pytest.mark.parametrize("b", [4, 7])
@pytest.mark.parametrize("name", LOSSES)
def test_mpfr_128_and_256_bits_agree(name: str, b: int) -> None:
    params, values = seeded(name, b)
    m128 = run_loss(name, MPFR(128), params, values, b)
    m256 = run_loss(name, MPFR(256), params, values, b)
    assert isinstance(m128, gmpy2.mpfr) and isinstance(m256, gmpy2.mpfr)
    assert (m128.precision, m256.precision) == (128, 256)
    with gmpy2.context(precision=512):
        gap = float(abs(m128 - m256) / abs(m256))
    _figure("MPFR 128 vs 256, max relative gap", gap)
    assert gap <= 1e-30
    # The exact reference measures f64: a few roundings' worth on these small models.
    f64 = float(run_loss(name, F64(), params, values, b))
    with gmpy2.context(precision=512):
        f64_gap = float(abs(gmpy2.mpfr(f64) - m256) / abs(m256))
    _figure("f64 vs MPFR 256, max relative error", f64_gap)
    assert f64_gap <= 1e-14


def _gm(values: np.ndarray) -> list:
    return [gmpy2.mpfr(float(v)) for v in np.asarray(values).reshape(-1)]


def test_mpfr_128_is_gmpy2_at_128_bits_rmsnorm() -> None:
    """RMSNorm.apply (02_norm.psk), computed here with gmpy2 op by op in the order the
    source writes it: the same rounding at every step, so the same bits."""
    module = core("02_norm")
    rng = np.random.default_rng(2)
    x = rng.normal(0, 1, (3, 4))
    gamma = rng.uniform(0.5, 1.5, 4)
    numbers = MPFR(128)
    with numbers.context():
        args = [Tree({"γ": numbers.array(gamma)}), numbers.array(x), 1e-6]
    got = Interpreter(module, numbers).run("RMSNorm.apply", args)
    assert got.shape == (3, 4)
    with gmpy2.context(precision=128):
        g = _gm(gamma)
        for i in range(3):
            row = _gm(x[i])
            total = row[0] * row[0]
            for v in row[1:]:
                total += v * v
            ms = total / 4
            root = gmpy2.sqrt(ms + gmpy2.mpfr(1e-6))
            for j in range(4):
                expected = row[j] / root * g[j]
                assert got[i, j] == expected, (i, j, got[i, j], expected)
                assert got[i, j].precision == 128


def test_mpfr_128_is_gmpy2_at_128_bits_activations() -> None:
    """Act.apply (03_activations.psk): every unary function and a real power, against
    gmpy2 with its own formulas (softplus as log1p(exp v), sigmoid as 1/(1+exp(-v)))."""
    module = core("03_activations")
    rng = np.random.default_rng(4)
    x = rng.normal(0, 2, (5, 4))
    gain, power = rng.uniform(0.5, 1.5, 4), rng.uniform(0.5, 2.0, 4)
    numbers = MPFR(128)
    with numbers.context():
        args = [Tree({"gain": numbers.array(gain), "power": numbers.array(power)}),
                numbers.array(x)]
    got = Interpreter(module, numbers).run("Act.apply", args)
    worst = 0.0
    with gmpy2.context(precision=128):
        for i in range(5):
            for j in range(4):
                v = gmpy2.mpfr(float(x[i, j]))
                gelu = v * (1 + gmpy2.erf(v / gmpy2.sqrt(2))) / 2
                softplus = gmpy2.log1p(gmpy2.exp(v))
                sigmoid = 1 / (1 + gmpy2.exp(-v))
                relu = v if v > 0 else gmpy2.mpfr(0)
                smooth, bounded = gelu + softplus, gmpy2.tanh(v) * sigmoid
                z = (gmpy2.mpfr(float(gain[j])) * (smooth + bounded + relu)
                     + softplus ** gmpy2.mpfr(float(power[j]))
                     - gmpy2.mpfr(0.1) * (v * v))
                worst = max(worst, float(abs(got[i, j] - z) / abs(z)))
    assert worst <= 1e-35, worst


# --------------------------------------------------------------------------------------
# presk run, presk init
# --------------------------------------------------------------------------------------

T07 = str(TUTORIAL / "07_train.psk")


def presk(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return presk_in_process(list(argv), cwd)


def result_line(stdout: str) -> str:
    lines = [line.strip() for line in stdout.splitlines() if line.strip().startswith("result")]
    assert len(lines) == 1, stdout
    return lines[0]


def test_presk_run_bits_128_is_exact() -> None:
    start = time.perf_counter()
    done = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--engine", "mpfr", "--bits", "128")
    elapsed = time.perf_counter() - start
    print(f"\n  presk run tutorial/07_train.psk --entry loss --dim B=4 --bits 128: "
          f"{elapsed:.3f} s wall")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[0] == "loss at B = 4 in mpfr128:"
    printed = result_line(done.stdout).removeprefix("result = ")
    params, values = seeded("07_train", 4)
    exact = run_loss("07_train", MPFR(128), params, values, 4)
    with gmpy2.context(precision=128):
        assert gmpy2.mpfr(printed) == exact  # every digit it prints


def test_presk_run_f64_engine_prints_the_f64_value() -> None:
    done = presk("run", T07, "--entry", "loss", "--dim", "B=7", "--engine", "f64")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "loss at B = 7 in f64:"
    params, values = seeded("07_train", 7)
    expected = np_loss_07(params, values["batch.0"], values["batch.1"])
    # numpy sums pairwise, the interpreter in index order (the kernels' order): an ulp apart.
    assert float(result_line(done.stdout).removeprefix("result = ")) == \
        pytest.approx(expected, rel=1e-15, abs=0)


def test_init_then_run_weights_is_the_seeded_run(tmp_path: Path) -> None:
    weights = tmp_path / "w.safetensors"
    done = presk("init", T07, "--entry", "loss", "--dim", "B=4", "--seed", "3",
                 "-o", str(weights))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"presk init: 4 tensors, 76 reals, seed 3, into {weights}"
    from safetensors.numpy import load_file
    stored = load_file(str(weights))
    params, _ = seeded("07_train", 4, seed=3)
    assert set(stored) == set(params)
    for k in params:
        np.testing.assert_array_equal(stored[k], params[k])
    # The weights come from the file, the inputs from --seed 0: the same as --seed 3's
    # weights with seed 0's inputs.
    seeded_run = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--seed", "0",
                       "--weights", str(weights), "--out", str(tmp_path / "a.safetensors"))
    assert seeded_run.returncode == 0, seeded_run.stderr
    _, values = seeded("07_train", 4, seed=0)
    expected = run_loss("07_train", MPFR(128), params, values, 4)
    got = load_file(str(tmp_path / "a.safetensors"))
    # f64 arithmetic on the same weights: within a few ulps of the exact value, and the
    # Core f64 interpreter's bits (it sums in the kernels' order)
    assert abs(float(got["result"]) - float(expected)) <= 4 * np.spacing(float(expected))
    assert got["result"] == float(run_loss("07_train", F64(), params, values, 4))
    # And the same weights by seed give the same printed digits.
    by_file = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--seed", "3",
                    "--weights", str(weights))
    by_seed = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--seed", "3")
    assert by_file.returncode == by_seed.returncode == 0
    assert result_line(by_file.stdout) == result_line(by_seed.stdout)


def test_run_out_writes_the_result(tmp_path: Path) -> None:
    out = tmp_path / "r.safetensors"
    done = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--engine", "f64",
                 "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].strip() == f"written to {out}"
    from safetensors.numpy import load_file
    stored = load_file(str(out))
    assert list(stored) == ["result"]
    assert stored["result"].shape == () and stored["result"].dtype == np.float64
    params, values = seeded("07_train", 4)
    assert float(stored["result"]) == pytest.approx(
        np_loss_07(params, values["batch.0"], values["batch.1"]), rel=1e-15, abs=0)
    assert [p.name for p in tmp_path.iterdir()] == ["r.safetensors"]  # no temporary left


def test_run_inputs_file_is_used(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    x = rng.normal(0, 1, (4, 4))
    inputs = tmp_path / "in.safetensors"
    save_tensors({"batch.0": x, "batch.1": 2 * x + 1}, str(inputs))
    out = tmp_path / "r.safetensors"
    done = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--engine", "f64",
                 "--inputs", str(inputs), "--out", str(out))
    assert done.returncode == 0, done.stderr
    from safetensors.numpy import load_file
    params, seeded_values = seeded("07_train", 4)
    expected = np_loss_07(params, x, 2 * x + 1)
    assert float(load_file(str(out))["result"]) == pytest.approx(expected, rel=1e-15, abs=0)
    assert expected != np_loss_07(params, seeded_values["batch.0"], seeded_values["batch.1"])
    # A file with only one of them: the other comes from the seed.
    save_tensors({"batch.1": 2 * x + 1}, str(inputs))
    done = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--engine", "f64",
                 "--inputs", str(inputs), "--out", str(out))
    assert done.returncode == 0, done.stderr
    expected = np_loss_07(params, seeded_values["batch.0"], 2 * x + 1)
    assert float(load_file(str(out))["result"]) == pytest.approx(expected, rel=1e-15, abs=0)


def test_run_on_the_mlir_text_is_the_run_on_the_program(tmp_path: Path) -> None:
    mlir = tmp_path / "loss.mlir"
    dump = presk("dump", T07, "--stage", "core", "--format", "mlir")
    mlir.write_text(dump.stdout, encoding="utf-8")
    from_mlir = presk("run", str(mlir), "--entry", "loss", "--dim", "B=4")
    from_psk = presk("run", T07, "--entry", "loss", "--dim", "B=4")
    assert from_mlir.returncode == from_psk.returncode == 0, from_mlir.stderr
    assert from_mlir.stdout == from_psk.stdout


# ---- what a user gets wrong: one line, exit code 2 (a bad command line or input file) ----

def usage_error(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_run_without_dim() -> None:
    line = usage_error(presk("run", T07, "--entry", "loss"))
    assert line == "presk: `loss` needs --dim B=N"


def test_run_malformed_dim() -> None:
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=four"))
    assert line == "presk: --dim B=four: expected NAME=N, e.g. --dim B=4"


def test_run_with_a_dim_the_entry_lacks() -> None:
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4", "--dim", "Q=3"))
    assert line == "presk: `loss` has no dim Q (its dims: B)"


def test_run_with_inputs_that_are_not_the_entrys(tmp_path: Path) -> None:
    from presk.analysis.weights import save_tensors
    path = tmp_path / "in.safetensors"
    save_tensors({"batch.0": np.zeros((4, 4)), "batch.2": np.zeros((4, 4))}, str(path))
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4", "--inputs",
                             str(path)))
    assert line == (f"presk: {path}: `batch.2` is not an input of the entry (its inputs: "
                    "batch.0, batch.1)")


@pytest.mark.parametrize("name", ["03_activations", "07_train"])
def test_run_with_a_dim_of_zero(name: str) -> None:
    """`--dim B=0` ran: a mean over no element printed nan, and a max over none (03's
    `max(gap)`) was a ValueError traceback."""
    line = usage_error(presk("run", str(TUTORIAL / f"{name}.psk"), "--entry", "loss",
                             "--dim", "B=0", "--engine", "f64"))
    assert line == "presk: --dim B=0: a size is 1 or more (Presk has no empty axes)"


def test_run_unknown_entry() -> None:
    line = usage_error(presk("run", T07, "--entry", "lose", "--dim", "B=4"))
    assert line == ("presk: no function `lose` (the functions: Linear.apply, RMSNorm.apply, "
                    "Block.apply, Tower.apply, loss)")


def test_dump_unknown_entry() -> None:
    line = usage_error(presk("dump", T07, "--stage", "core", "--entry", "lose"))
    assert line.startswith("presk: --entry lose: no such function")


def _seeded_file(tmp_path: Path, **change) -> Path:
    params, _ = seeded("07_train", 4)
    for k, v in change.items():
        key = k.replace("__", ".")
        if v is None:
            del params[key]
        else:
            params[key] = v
    path = tmp_path / "w.safetensors"
    save_tensors(params, str(path))
    return path


def test_weights_missing_a_tensor(tmp_path: Path) -> None:
    path = _seeded_file(tmp_path, blocks__proj__w=None)
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--weights", str(path)))
    assert line == f"presk: {path}: no tensor `blocks.proj.w` (expected shape [3, 4, 4])"


def test_weights_tensor_of_the_wrong_shape(tmp_path: Path) -> None:
    path = _seeded_file(tmp_path, final__γ=np.ones(5))
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--weights", str(path)))
    assert line == f"presk: {path}: tensor `final.γ` has shape [5], expected [4]"


def test_weights_file_that_is_not_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "w.safetensors"
    path.write_bytes(b"PK\x03\x04 this is a zip, not tensors")
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--weights", str(path)))
    assert line.startswith(f"presk: {path}: not a safetensors file")


def test_weights_file_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.safetensors"
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--weights", str(path)))
    assert line == f"presk: {path}: no such file"


def test_inputs_of_the_wrong_shape(tmp_path: Path) -> None:
    path = tmp_path / "in.safetensors"
    save_tensors({"batch.0": np.zeros((4, 3))}, str(path))
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--inputs", str(path)))
    assert line == f"presk: {path}: input `batch.0` has shape [4, 3], expected [4, 4]"


def test_inputs_file_that_is_not_safetensors(tmp_path: Path) -> None:
    path = tmp_path / "in.safetensors"
    path.write_text("batch.0 = [1, 2, 3]\n")
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--inputs", str(path)))
    assert line.startswith(f"presk: {path}: not a safetensors file")


def test_init_of_an_entry_without_parameters(tmp_path: Path) -> None:
    mlir = tmp_path / "f.mlir"
    mlir.write_text(
        'builtin.module {\n'
        '  psk_core.func @f(%0: !psk_core.tensor<3>) -> !psk_core.tensor<> '
        'attributes {arg_names = ["x"]} {\n'
        '    %1 = psk_core.sum %0 {site = "f/%1"} : (!psk_core.tensor<3>) -> '
        '!psk_core.tensor<>\n'
        '    psk_core.return %1 {site = "f/%2"} : !psk_core.tensor<>\n'
        '  }\n'
        '}\n', encoding="utf-8")
    line = usage_error(presk("init", str(mlir), "--entry", "f", "-o",
                             str(tmp_path / "w.safetensors")))
    assert line == "presk: `f` takes no parameter tree"
    assert not (tmp_path / "w.safetensors").exists()
    # It runs, on an input drawn from the seed.
    done = presk("run", str(mlir), "--entry", "f", "--engine", "f64")
    assert done.returncode == 0, done.stderr
    x = E.key_rng("input", 0, "x").standard_normal((3,))
    assert float(result_line(done.stdout).removeprefix("result = ")) == float(np.sum(x))


# ---- a malformed PSK-Core file: a program error, exit code 1, with its location ----

def test_run_malformed_mlir(tmp_path: Path) -> None:
    """A parse error reads as every diagnostic does: `file:line:col: error: message`, the
    line, carets. It read `file: error: file:line:col`, the line, the carets, then the
    message."""
    path = tmp_path / "bad.mlir"
    path.write_text("builtin.module {\n  psk_core.func @f( -> \n}\n", encoding="utf-8")
    done = presk("run", str(path), "--entry", "f")
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        f"{path}:2:21: error: Expected argument or type",
        "  psk_core.func @f( -> ",
        "                    ^^",
    ]


def test_run_unknown_op(tmp_path: Path) -> None:
    path = tmp_path / "bad.mlir"
    path.write_text(
        'builtin.module {\n'
        '  psk_core.func @f(%0: !psk_core.tensor<3>) -> !psk_core.tensor<3> '
        'attributes {arg_names = ["x"]} {\n'
        '    %1 = psk_core.frobnicate %0 {site = "f/%1"} : !psk_core.tensor<3>\n'
        '    psk_core.return %1 {site = "f/%2"} : !psk_core.tensor<3>\n'
        '  }\n'
        '}\n', encoding="utf-8")
    done = presk("run", str(path), "--entry", "f")
    assert done.returncode == 1, done.stderr
    # At the op's name: xDSL itself points at the token after it.
    assert done.stderr.splitlines() == [
        f"{path}:3:10: error: Operation psk_core.frobnicate is not registered",
        '    %1 = psk_core.frobnicate %0 {site = "f/%1"} : !psk_core.tensor<3>',
        "         ^^^^^^^^^^^^^^^^^^^",
    ]


def test_run_mlir_that_does_not_verify(tmp_path: Path) -> None:
    text = presk("dump", T07, "--stage", "core", "--format", "mlir").stdout
    bad = text.replace('%7 = psk_core.mean %6 {site = "loss/%7"} : '
                       '(!psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<>',
                       '%7 = psk_core.mean %6 {site = "loss/%7"} : '
                       '(!psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<batch: B>')
    bad = bad.replace('psk_core.return %7 {site = "loss/%8"} : !psk_core.tensor<>',
                      'psk_core.return %7 {site = "loss/%8"} : !psk_core.tensor<batch: B>')
    assert bad != text
    path = tmp_path / "bad.mlir"
    path.write_text(bad, encoding="utf-8")
    done = presk("run", str(path), "--entry", "loss", "--dim", "B=4")
    assert done.returncode == 1
    assert "loss/%7: psk_core.mean: reducing ℝ[batch: B, model: 4] over every axis makes " \
           "ℝ[], not ℝ[batch: B]" in done.stderr


def test_scalar_parameter_survives_init_then_run(tmp_path: Path) -> None:
    """A ℝ[] parameter was written as shape [1] (np.ascontiguousarray makes 0-d arrays
    1-d), so `presk run --weights` refused the file `presk init` had just written."""
    program = tmp_path / "s.psk"
    program.write_text(
        "dim B\n"
        "module Scale {\n"
        "  param s : ℝ[]  init = ones\n"
        "  fn apply(x : ℝ[..., model: 4]) -> ℝ[..., model: 4] =\n"
        "    x * s\n"
        "}\n"
        "fn loss(θ : params Scale, x : ℝ[batch: B, model: 4]) -> ℝ[] =\n"
        "  mean(Scale.apply(θ, x))\n", encoding="utf-8")
    weights = tmp_path / "w.safetensors"
    done = presk("init", str(program), "--entry", "loss", "--dim", "B=2", "-o", str(weights))
    assert done.returncode == 0, done.stderr
    from safetensors.numpy import load_file
    assert load_file(str(weights))["s"].shape == ()
    save_tensors({"s": np.array(2.5)}, str(weights))
    out = tmp_path / "r.safetensors"
    done = presk("run", str(program), "--entry", "loss", "--dim", "B=2", "--engine", "f64",
                 "--weights", str(weights), "--out", str(out))
    assert done.returncode == 0, done.stderr
    x = E.key_rng("input", 0, "x").standard_normal((2, 4))
    assert float(load_file(str(out))["result"]) == float(np.mean(x * 2.5))


BROADCAST_MLIR = '''builtin.module {
  psk_core.func @f(%0: !psk_core.tensor<model: 4>) -> !psk_core.tensor<> attributes {arg_names = ["x"], dims = ["B"]} {
    %1 = psk_core.broadcast %0 {site = "f/%1"} : (!psk_core.tensor<model: 4>) -> !psk_core.tensor<batch: B, model: 4>
    %2 = psk_core.sum %1 {site = "f/%2"} : (!psk_core.tensor<batch: B, model: 4>) -> !psk_core.tensor<>
    psk_core.return %2 {site = "f/%3"} : !psk_core.tensor<>
  }
  psk_core.func @g(%0: !psk_core.tensor<model: 4>) -> !psk_core.tensor<> attributes {arg_names = ["x"]} {
    %1 = psk_core.call @f(%0) {dims = {B = 3 : i64}, site = "g/%1"} : (!psk_core.tensor<model: 4>) -> !psk_core.tensor<>
    psk_core.return %1 {site = "g/%2"} : !psk_core.tensor<>
  }
  psk_core.func @h(%0: !psk_core.tensor<model: 4>) -> !psk_core.tensor<> attributes {arg_names = ["x"], dims = ["N"]} {
    %1 = psk_core.call @f(%0) {dims = {B = "N"}, site = "h/%1"} : (!psk_core.tensor<model: 4>) -> !psk_core.tensor<>
    psk_core.return %1 {site = "h/%2"} : !psk_core.tensor<>
  }
}
'''


@pytest.mark.parametrize("engine", [["--engine", "f64"], ["--engine", "mpfr", "--bits", "64"]])
@pytest.mark.parametrize("entry,dims,copies", [("f", ["--dim", "B=3"], 3), ("g", [], 3),
                                               ("h", ["--dim", "N=5"], 5)])
def test_broadcast_to_a_dim_symbol_takes_its_value(tmp_path: Path, entry: str, dims: list,
                                                   copies: int, engine: list) -> None:
    """A broadcast to ℝ[batch: B, model: 4] made the `batch` axis of size 1: the
    interpreter did not know the values of dim symbols (the entry's, or a call's)."""
    path = tmp_path / "b.mlir"
    path.write_text(BROADCAST_MLIR, encoding="utf-8")
    out = tmp_path / "r.safetensors"
    done = presk("run", str(path), "--entry", entry, *dims, *engine, "--out", str(out))
    assert done.returncode == 0, done.stderr
    x = E.key_rng("input", 0, "x").standard_normal(4)
    from safetensors.numpy import load_file
    got = float(load_file(str(out))["result"])
    assert rel(got, copies * float(np.sum(x))) <= 1e-15


def test_broadcast_value_has_the_dims_shape() -> None:
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    from presk.dialects.core import Core
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Core)
    module = Parser(ctx, BROADCAST_MLIR).parse_module()
    seen = {}
    interp = Interpreter(module, F64(), trace=lambda site, v: seen.__setitem__(site, v))
    x = np.arange(4.0)
    assert interp.run("f", [x], {"B": 6}) == 6 * 6.0
    assert seen["f/%1"].shape == (6, 4)
    np.testing.assert_array_equal(seen["f/%1"], np.tile(x, (6, 1)))
    assert interp.run("h", [x], {"N": 2}) == 2 * 6.0
    assert seen["f/%1"].shape == (2, 4)


# ---- named axes: alignment by name, by position, with a prefix (sizes chosen equal, so a
# ---- wrong alignment gives wrong numbers rather than a shape error) ----

def _one_op_module(arg_types, make):
    from xdsl.dialects.builtin import ModuleOp

    from presk.dialects import core as Cd
    func = Cd.FuncOp("f", [(f"a{i}", t) for i, t in enumerate(arg_types)],
                     Cd.TensorAttr.scalar())
    args = func.body.block.args
    op = make(*args)
    func.body.block.add_op(op)
    func.body.block.add_op(Cd.ReturnOp(op.results[0], site="f/%99"))
    func.function_type = func.function_type.from_lists(list(arg_types), [op.results[0].type])
    module = ModuleOp([func])
    module.verify()
    return module


def _alignment_cases():
    from presk.dialects import core as Cd
    T = Cd.TensorAttr.get
    s = dict(site="f/%9")
    r = np.random.default_rng(0)
    x33 = r.normal(size=(3, 3))
    x233 = r.normal(size=(2, 3, 3))
    v3 = r.normal(size=3)
    x23 = r.normal(size=(2, 3))
    return [
        # ℝ[batch: 3] meets ℝ[batch: 3, model: 3]: by name, on the first axis.
        ("sub by name", [T(("batch", 3), ("model", 3)), T(("batch", 3))],
         lambda a, b: Cd.SubOp(a, b, **s), [x33, v3], x33 - v3[:, None]),
        ("sub by name, swapped", [T(("batch", 3)), T(("batch", 3), ("model", 3))],
         lambda a, b: Cd.SubOp(a, b, **s), [v3, x33], v3[:, None] - x33),
        # An unnamed ℝ[3] aligns by position from the right.
        ("mul by position", [T(3), T(("batch", 3), ("model", 3))],
         lambda a, b: Cd.MulOp(a, b, **s), [v3, x33], v3[None, :] * x33),
        # A named axis in the middle.
        ("div middle axis", [T(("a", 2), ("b", 3), ("c", 3)), T(("b", 3))],
         lambda a, b: Cd.DivOp(a, b, **s), [x233, v3], x233 / v3[None, :, None]),
        ("add two named of three", [T(("a", 2), ("c", 3)), T(("a", 2), ("b", 3), ("c", 3))],
         lambda a, b: Cd.AddOp(a, b, **s), [x23, x233], x23[:, None, :] + x233),
        # `...` (bound to the leading 2 in the values) with a reduced value ℝ[...].
        ("prefix sub", [T(("model", 3), prefix=True), T(prefix=True)],
         lambda a, b: Cd.SubOp(a, b, **s), [x233[:, 0, :], x23[:, 0]],
         x233[:, 0, :] - x23[:, 0][:, None]),
        ("prefix with a named axis", [T(("b", 3), ("c", 3), prefix=True), T(("b", 3))],
         lambda a, b: Cd.MaximumOp(a, b, **s), [x233, v3], np.maximum(x233, v3[None, :, None])),
        ("pow real exponent by position", [T(("b", 3), ("c", 3)), T(3)],
         lambda a, b: Cd.PowOp(a, b, **s), [np.abs(x33), v3], np.abs(x33) ** v3[None, :]),
        # Reductions and softmax over a named axis that is not the last.
        ("sum over the middle", [T(("a", 2), ("b", 3), ("c", 3))],
         lambda a: Cd.SumOp(a, "b", **s), [x233], x233.sum(axis=1)),
        ("mean over the first, with a prefix", [T(("b", 3), ("c", 3), prefix=True)],
         lambda a: Cd.MeanOp(a, "b", **s), [x233], x233.mean(axis=1)),
        ("max over everything", [T(("a", 2), ("b", 3), ("c", 3))],
         lambda a: Cd.MaxOp(a, None, **s), [x233], x233.max()),
        ("logsumexp over the first", [T(("b", 3), ("c", 3))],
         lambda a: Cd.LogSumExpOp(a, "b", **s), [x33], np.log(np.exp(x33).sum(axis=0))),
        ("softmax over the first", [T(("b", 3), ("c", 3))],
         lambda a: Cd.SoftmaxOp(a, "b", **s), [x33],
         np.exp(x33) / np.exp(x33).sum(axis=0, keepdims=True)),
        ("dot with a prefix", [T(("b", 3), ("c", 3), prefix=True), T(3, ("d", 2))],
         lambda a, b: Cd.DotOp(a, b, **s), [x233, x23.T], x233 @ x23.T),
    ]


@pytest.mark.parametrize("case", _alignment_cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("numbers", [F64(), MPFR(80)], ids=["f64", "mpfr80"])
def test_named_axes_align_as_numpy_says(case, numbers) -> None:
    _, types, make, values, expected = case
    module = _one_op_module(types, make)
    with numbers.context():
        args = [numbers.array(v) for v in values]
    got = numbers.to_f64(Interpreter(module, numbers).run("f", args))
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)


# ---- files that cannot be read or written: one line, exit code 2, not a traceback ----

def test_out_into_a_missing_directory(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "r.safetensors"
    done = presk("run", T07, "--entry", "loss", "--dim", "B=4", "--engine", "f64",
                 "--out", str(path))
    assert done.returncode == 2
    # Refused before any work (artifact.check_output, as an argparse type).
    assert done.stderr.splitlines() == [f"presk run: argument --out: {path}: no directory "
                                        f"{path.parent} (see `presk run --help`)"]
    line = usage_error(presk("init", T07, "--entry", "loss", "--dim", "B=4", "-o", str(path)))
    assert line == (f"presk init: argument -o/--output: {path}: no directory {path.parent} "
                    "(see `presk init --help`)")


def test_out_onto_a_directory(tmp_path: Path) -> None:
    line = usage_error(presk("init", T07, "--entry", "loss", "--dim", "B=4", "-o",
                             str(tmp_path)))
    assert line == (f"presk init: argument -o/--output: {tmp_path}: is a directory, not a "
                    "regular file: refused, left as it is (see `presk init --help`)")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_weights_that_are_a_directory(tmp_path: Path) -> None:
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--weights", str(tmp_path)))
    assert line == f"presk: {tmp_path}: is a directory, not a safetensors file"


def test_weights_in_bfloat16(tmp_path: Path) -> None:
    """A safetensors file numpy cannot read (BF16, as PyTorch writes) was a TypeError
    traceback."""
    import json
    import struct
    header = json.dumps({"final.γ": {"dtype": "BF16", "shape": [4],
                                     "data_offsets": [0, 8]}}).encode()
    header += b" " * (-len(header) % 8)
    path = tmp_path / "w.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    line = usage_error(presk("run", T07, "--entry", "loss", "--dim", "B=4",
                             "--weights", str(path)))
    assert line.startswith(f"presk: {path}: a tensor's dtype cannot be read (")
    assert line.endswith("); store F64, F32 or F16")


def test_run_an_entry_with_a_polymorphic_prefix() -> None:
    line = usage_error(presk("run", str(TUTORIAL / "06_tower.psk"), "--entry", "Tower.apply"))
    assert line == ("presk: the entry's argument `x` is ℝ[..., model: 4]: its `...` has no "
                    "value; call the entry from a function with fixed axes")


def test_broadcast_to_the_prefix_takes_what_the_arguments_bind() -> None:
    """A broadcast of ℝ[] (or of any value without `...`) to ℝ[..., 4] left out the
    axes `...` stands for: the value had shape (4,) where the type says (2, 3, 4)."""
    from xdsl.dialects.builtin import ModuleOp

    from presk.dialects import core as Cd
    T = Cd.TensorAttr.get
    func = Cd.FuncOp("f", [("x", T(("model", 4), prefix=True)), ("s", T())],
                     T(("model", 4), prefix=True))
    x, s = func.body.block.args
    wide = Cd.BroadcastOp(s, T(("model", 4), prefix=True), site="f/%2")
    total = Cd.SumOp(wide, None, site="f/%3")
    out = Cd.MulOp(x, total, site="f/%4")
    for op in (wide, total, out, Cd.ReturnOp(out, site="f/%5")):
        func.body.block.add_op(op)
    module = ModuleOp([func])
    module.verify()
    seen = {}
    xs = np.random.default_rng(1).normal(size=(2, 3, 4))
    got = Interpreter(module, F64(), trace=lambda k, v: seen.__setitem__(k, v)).run(
        "f", [xs, np.array(0.5)])
    assert seen["f/%2"].shape == (2, 3, 4)
    assert seen["f/%3"] == 0.5 * 24
    np.testing.assert_array_equal(got, xs * 12.0)


# ---- MPFR and f64 on ℝ[] values and on NaN ----

def _chain_module(arg_types, build):
    """One function whose body `build` makes from its arguments (a list of ops)."""
    from xdsl.dialects.builtin import ModuleOp

    from presk.dialects import core as Cd
    func = Cd.FuncOp("f", [(f"a{i}", t) for i, t in enumerate(arg_types)],
                     Cd.TensorAttr.scalar())
    ops = build(*func.body.block.args)
    for op in ops:
        func.body.block.add_op(op)
    func.body.block.add_op(Cd.ReturnOp(ops[-1].results[0], site="f/%99"))
    func.function_type = func.function_type.from_lists(list(arg_types),
                                                       [ops[-1].results[0].type])
    module = ModuleOp([func])
    module.verify()
    return module


def _reductions_of_a_scalar():
    from presk.dialects import core as Cd
    T = Cd.TensorAttr.get
    s = lambda n: f"f/%{n}"  # noqa: E731
    x = np.random.default_rng(3).normal(size=(3, 4))

    def chain(*kinds):
        def build(a):
            ops, v = [], a
            for i, k in enumerate(kinds):
                if k == "softmax":
                    op = Cd.SoftmaxOp(v, "model", site=s(i + 1))
                else:
                    op = k(v, None, site=s(i + 1))
                ops.append(op)
                v = op.results[0]
            return ops
        return build
    return [
        ("mean of a mean", chain(Cd.MeanOp, Cd.MeanOp), float(np.mean(x))),
        ("logsumexp of a sum", chain(Cd.SumOp, Cd.LogSumExpOp), float(np.sum(x))),
        ("max of a min", chain(Cd.MinOp, Cd.MaxOp), float(np.min(x))),
        ("sum of a logsumexp", chain(Cd.LogSumExpOp, Cd.SumOp),
         float(np.log(np.sum(np.exp(x))))),
    ], T(("batch", 3), ("model", 4)), x


@pytest.mark.parametrize("index", range(4))
def test_reductions_of_a_scalar_in_mpfr(index: int) -> None:
    """A reduction of a ℝ[] value failed in MPFR: numpy hands a 0-d object array's
    reduction back as a bare mpfr, which has no .size or .reshape."""
    cases, t, x = _reductions_of_a_scalar()
    _, build, expected = cases[index]
    module = _chain_module([t], build)
    for numbers in (F64(), MPFR(64), MPFR(128)):
        with numbers.context():
            arg = numbers.array(x)
        got = float(np.asarray(numbers.to_f64(Interpreter(module, numbers).run("f", [arg]))))
        assert rel(got, expected) <= 1e-14, numbers.name


def test_nan_propagates_in_mpfr_as_in_f64() -> None:
    """relu(NaN) was 0 in MPFR, min/max dropped a NaN on one side, and a max or min
    reduction over values holding a NaN gave a number: the exact reference disagreed with
    f64 (numpy's maximum, minimum, max and min propagate NaN)."""
    from presk.dialects import core as Cd
    T = Cd.TensorAttr.get
    t = T(("batch", 2), ("model", 3))
    nan = float("nan")
    a = np.array([[nan, 1.0, -2.0], [0.5, nan, 3.0]])
    b = np.array([[1.0, nan, -3.0], [0.25, 2.0, nan]])

    def outputs(numbers) -> dict[str, np.ndarray]:
        seen: dict[str, np.ndarray] = {}

        def build(x, y):
            return [
                Cd.ReluOp(x, site="f/%2"),
                Cd.MinimumOp(x, y, site="f/%3"),
                Cd.MaximumOp(x, y, site="f/%4"),
                Cd.MaximumOp(y, x, site="f/%5"),
                Cd.MaxOp(x, "model", site="f/%6"),
                Cd.MinOp(y, "batch", site="f/%7"),
                Cd.MaxOp(y, None, site="f/%8"),
                Cd.MinOp(x, None, site="f/%9"),
            ]
        module = _chain_module([t, t], build)
        with numbers.context():
            args = [numbers.array(a), numbers.array(b)]
        Interpreter(module, numbers, trace=lambda k, v: seen.__setitem__(
            k, np.asarray(numbers.to_f64(np.asarray(v))))).run("f", args)
        return seen

    f64, mpfr = outputs(F64()), outputs(MPFR(100))
    assert np.isnan(f64["f/%2"][0, 0]) and np.isnan(f64["f/%8"])  # what numpy does
    for site in f64:
        np.testing.assert_array_equal(mpfr[site], f64[site], err_msg=site)


# ---- random programs through the whole front: elaborate, lower, verify, run ----

_FUZZ_UNARY = list(ops.builtins(arity=1))  # the table's, presk/ops
_FUZZ_REDUCE = ["sum", "mean", "max", "min", "logsumexp"]
_FUZZ_PROGRAM = """dim B
const N : nat = 2
const S : f64 = 0.25
const C : nat = 3
module M {{
  param g : ℝ[model: 4]  init = normal(std = 0.5)
  param w : ℝ[4, 4]  init = xavier_uniform
  fn apply(x : ℝ[..., model: 4], y : ℝ[..., model: 4], e : f64 = 0.5) -> ℝ[..., model: 4] =
    let h = y * real(e)
    x + ({body})
}}
fn f(θ : params M, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean(M.apply(θ, x, y) + M.apply(θ, y, x, 2.0))
"""


def _fuzz_expr(r, depth: int) -> str:
    if depth <= 0:
        return r.choice(["x", "y", "g", "h", "x", "y", "h", "1.5", "real(e)", "real(S)", "C",
                         "-2"])
    a, k = _fuzz_expr(r, depth - 1), r.randrange(9)
    if k == 0:
        return f"{r.choice(_FUZZ_UNARY)}({a})"
    if k == 1:
        return f"({a} {r.choice('+-*/')} {_fuzz_expr(r, depth - 1)})"
    if k == 2:
        return f"{r.choice(_FUZZ_REDUCE)}(axis model, {a})"
    if k == 3:
        return f"{r.choice(_FUZZ_REDUCE)}({a})"
    if k == 4:
        return f"({a}) ^ {r.choice(['2', '3', 'N', '0.5'])}"
    if k == 5:
        return f"softmax(axis model, {a})"
    if k == 6:
        return f"{r.choice(['min', 'max'])}({a}, {_fuzz_expr(r, depth - 1)})"
    if k == 7:
        return f"-({a})"
    return f"({a} · w)"


@pytest.mark.slow
def test_random_programs_lower_verify_and_agree_in_f64_and_mpfr(tmp_path: Path) -> None:
    """A fixed corpus of random function bodies (seeded, so it does not move): each one
    the frontend accepts lowers to Core that verifies and prints back the same, and f64
    and MPFR at 200 bits agree on it (NaN together; else to 1e-9 relative, 1e-12
    absolute where the value cancels to 0). It found MPFR's failures on ℝ[] reductions
    and its dropped NaNs."""
    import random

    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    from presk.dialects.core import Core
    from presk.frontend.diagnostics import CompileError

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Core)
    r = random.Random(2024)
    path = tmp_path / "p.psk"
    accepted = 0
    for _ in range(500):
        body = _fuzz_expr(r, r.randrange(1, 5))
        path.write_text(_FUZZ_PROGRAM.format(body=body), encoding="utf-8")
        try:
            program = elaborate(str(path))
        except CompileError:
            continue
        accepted += 1
        module = lower_program(program)
        module.verify()
        text = str(module)
        assert str(Parser(ctx, text).parse_module()) == text, body
        entry = E.prepare(module, "f", {"B": 3})
        params, values = E.weights(entry, 0, None), E.inputs(entry, 0, None)
        a, b = (float(np.asarray(ns.to_f64(np.asarray(
                    Interpreter(module, ns).run("f", E.arguments(entry, ns, params, values),
                                                {"B": 3})))))
                for ns in (F64(), MPFR(200)))
        assert np.isnan(a) == np.isnan(b), (body, a, b)
        if not np.isnan(a):
            assert a == b or abs(a - b) <= 1e-9 * abs(b) + 1e-12, (body, a, b)
    assert accepted >= 200  # the corpus exercises the lowering, not only the checker


def test_run_prints_a_tensor_result_with_every_digit_in_mpfr(tmp_path: Path) -> None:
    """A tensor result printed at f64's 17 digits under MPFR (a scalar printed them all),
    so `presk run` showed less of the exact value than it had computed."""
    program = tmp_path / "t.psk"
    program.write_text("dim B\n"
                       "fn f(x : ℝ[batch: B, model: 4]) -> (ℝ[], ℝ[batch: B]) =\n"
                       "  (mean(x), sum(axis model, x))\n", encoding="utf-8")
    done = presk("run", str(program), "--entry", "f", "--dim", "B=2", "--engine", "mpfr",
                 "--bits", "128")
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert lines[0] == "f at B = 2 in mpfr128:"
    x = E.key_rng("input", 0, "x").standard_normal((2, 4))
    with gmpy2.context(precision=128):
        exact = [sum((gmpy2.mpfr(float(v)) for v in row), gmpy2.mpfr(0)) for row in x]
    assert lines[2] == f"result.1 = [{exact[0]}, {exact[1]}]"
    assert len(str(exact[0])) > 30
