"""`presk export --target pytorch` against Presk's f64 interpreter.

The tutorials' entries (03, 04, 05, 07) are exported, then run in a fresh `python -I`
whose imports of presk and xdsl fail (the generated code needs only torch, and safetensors
for the weights), on the weights `presk init` writes (loaded with `load_state_dict(strict=
True)`) and on random ones unlike the initializers', at B = 4 and 7. Their value and
torch-autograd gradient (θ's by path, the batch's) must match `loss.value_vjp` run by the
f64 interpreter to 1e-13: max |torch − presk| / max |presk| per tensor. 01, 02 and 06 have
no entry: their modules' `apply` are compared on inputs with a two-axis `...`.

Run with `-s` to see the largest difference per program.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64
from presk.cli.main import main as presk_main
from presk.emit.pytorch import ExportError, pytorch_sources
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from presk.transforms.differentiate import Differentiator
from programs import ROOT, TUTORIAL, program

pytestmark = pytest.mark.early(0.62)  # CPU minutes (test/conftest.py)

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_sinh_matches_the_f64_interpreter",
    "test_more_ops_match_the_f64_interpreter",
    "test_float32_follows_the_parameters_dtype",
    "test_module_apply_matches_the_f64_interpreter[02_norm]",
    "test_module_apply_matches_the_f64_interpreter[06_tower]",
}

BOUND = 1e-13
# The entry's parameter module: (generated module, class).
ENTRIES = {"03_activations": ("_03_activations", "Act"), "04_mlp": ("_04_mlp", "MLP"),
           "05_stack": ("_05_stack", "Deep"), "07_train": ("_06_tower", "Tower")}
FIGURES: dict[str, float] = {}

# Run in `python -I`: presk and xdsl cannot be imported, the export's directory first on
# sys.path; reads a JSON job from argv, writes its results as safetensors.
RUNNER = r"""
import importlib, importlib.abc, json, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("presk", "xdsl"):
            raise ImportError(f"the export imported {name}")
sys.meta_path.insert(0, Refuse())
job = json.loads(sys.argv[1])
sys.path.insert(0, job["dir"])
import torch
from safetensors.torch import load_file, save_file

dtype = getattr(torch, job["dtype"])
cls = getattr(importlib.import_module(job["module"]), job["class"])
theta = cls(*job.get("dims", []), dtype=dtype)
theta.load_state_dict(load_file(job["weights"]), strict=True)
inputs = {k: v.to(dtype).requires_grad_() for k, v in load_file(job["inputs"]).items()}
if "entry" in job:
    mod, name = job["entry"]
    fn = getattr(importlib.import_module(mod), name)
    value = fn(theta, tuple(inputs[f"batch.{i}"] for i in range(len(inputs))))
    value.backward()
    out = {"value": value.detach()}
    out.update({f"grad.{k}": p.grad for k, p in theta.named_parameters()})
    out.update({f"grad.{k}": t.grad for k, t in inputs.items()})
else:
    out = {"value": theta(inputs["x"]).detach()}
out = {k: v.contiguous() for k, v in out.items()}
assert not [m for m in sys.modules if m.split(".")[0] in ("presk", "xdsl")]
save_file(out, job["out"])
"""


def run_isolated(job: dict) -> dict[str, np.ndarray]:
    proc = subprocess.run([sys.executable, "-I", "-c", RUNNER, json.dumps(job)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return load_file(job["out"])


@lru_cache(maxsize=None)
def differentiated(name: str):
    """The program `name` (a tutorial's, or a path) with `loss` differentiated."""
    module = program(name)
    Differentiator(module, "store").run(["loss"])
    return module


def export(name: str, out: Path) -> Path:
    code = presk_main(["export", str(TUTORIAL / f"{name}.psk"), "--target", "pytorch",
                       "-o", str(out)])
    assert code == 0
    return out


def difference(got: np.ndarray, expected: np.ndarray) -> float:
    scale = np.max(np.abs(expected))
    return float(np.max(np.abs(got - expected)) / scale) if scale else float(np.max(np.abs(got)))


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    if FIGURES:
        print("\n[pytorch export vs f64] largest difference, max|torch − presk| / max|presk|:")
        print("\n".join(f"  {k}: {v:.3g}" for k, v in sorted(FIGURES.items())))


def _note(key: str, diffs: dict[str, float]) -> None:
    FIGURES[key] = max(FIGURES.get(key, 0.0), max(diffs.values()))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["init", "random"])
@pytest.mark.parametrize("name", list(ENTRIES))
def test_entry_matches_the_f64_interpreter(name: str, kind: str, tmp_path: Path) -> None:
    mod, cls = ENTRIES[name]
    compare_entry(TUTORIAL / f"{name}.psk", name, mod, cls, [], kind, tmp_path)


# Ops the tutorials leave out: a sum over a named axis broadcast back (`s[..., None]`),
# a method besides apply, ℝ[] constants under sqrt and as Python numbers, real, minimum
# and maximum, softmax, a top-level helper, a contraction with an unnamed axis, max of all.
MISC = """\
dim B
module M{D : dim} {
  param a : ℝ[D]  init = normal(std = 0.5)
  param m : ℝ[D, 3] init = xavier_normal

  fn scale(x : ℝ[..., model: D]) -> ℝ[..., model: D] =
    x * sqrt(2.0) + real(3)

  fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] =
    let s = sum(axis model, x)
    let t = max(x, scale(x)) - s
    min(t, a) + softmax(axis model, t)
}

fn helper(x : ℝ[batch: B, model: 4]) -> ℝ[batch: B] = logsumexp(axis model, x) / 2.0

fn loss(θ : params M{4}, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  let z = M.apply(θ, x)
  mean(helper(z) * sum(axis model, y)) + max(z · θ.m)
"""


def test_more_ops_match_the_f64_interpreter(tmp_path: Path) -> None:
    source = tmp_path / "misc.psk"
    source.write_text(MISC)
    compare_entry(source, "misc", "_misc", "M", [4], "random", tmp_path)


def test_sinh_matches_the_f64_interpreter(tmp_path: Path) -> None:
    """sinh, one row of presk/ops: torch.sinh in the export, value and gradient."""
    from test_sinh import SOURCE
    source = tmp_path / "hyp.psk"
    source.write_text(SOURCE)
    compare_entry(source, "hyp", "_hyp", "Hyp", [], "random", tmp_path)


def compare_entry(source: Path, name: str, mod: str, cls: str, dims: list[int], kind: str,
                  tmp_path: Path) -> None:
    """Export `source`, run its `loss` isolated at B = 4 and 7, compare with value_vjp."""
    out = tmp_path / "pt"
    assert presk_main(["export", str(source), "--target", "pytorch", "-o", str(out)]) == 0
    module = differentiated(str(source))
    for b in (4, 7):
        entry = E.prepare(module, "loss", {"B": b})
        weights_file = tmp_path / f"w{b}.safetensors"
        assert presk_main(["init", str(source), "--entry", "loss", "--dim", f"B={b}",
                           "-o", str(weights_file)]) == 0
        params = {k: np.asarray(v, dtype=np.float64) for k, v in load_file(weights_file).items()}
        if kind == "random":
            rng = np.random.default_rng(29 + b)
            for f in entry.fields:
                params[f.path] = rng.uniform(0.5, 1.5, f.shape) if f.path.endswith(
                    ("power", "γ", "gain")) else rng.normal(0.0, 0.5, f.shape)
            save_file(params, str(weights_file))
        values = E.inputs(entry, b, None)
        save_file(values, str(tmp_path / "x.safetensors"))
        got = run_isolated({
            "dir": str(out), "module": mod, "class": cls, "dims": dims,
            "entry": [python_name(source.stem), "loss"], "dtype": "float64",
            "weights": str(weights_file), "inputs": str(tmp_path / "x.safetensors"),
            "out": str(tmp_path / "out.safetensors")})
        numbers = F64()
        args = E.arguments(entry, numbers, params, values)
        value, d_theta, d_batch = Interpreter(module, numbers).run(
            "loss.value_vjp", args + [numbers.constant(1.0)], entry.dims)
        assert isinstance(d_theta, Tree)
        expected = {"value": np.asarray(value)}
        expected.update({f"grad.{k}": v for k, v in d_theta.items()})
        expected.update({f"grad.batch.{i}": v for i, v in enumerate(d_batch)})
        assert set(got) == set(expected)
        diffs = {k: difference(got[k], np.asarray(v)) for k, v in expected.items()}
        _note(f"{name} value", {"value": diffs["value"]})
        _note(f"{name} gradient", {k: d for k, d in diffs.items() if k != "value"})
        assert all(d <= BOUND for d in diffs.values()), {k: d for k, d in diffs.items()
                                                          if d > BOUND}


def python_name(tutorial: str) -> str:
    return "_" + tutorial


# (tutorial, generated module, class, its dims, Core function, the interpreter's dims,
# its extra arguments)
MODULES = [
    ("01_linear", "_01_linear", "Linear", [4, 3], "Linear.apply", {"In": 4, "Out": 3}, []),
    ("02_norm", "_02_norm", "RMSNorm", [4], "RMSNorm.apply", {"D": 4}, [1e-6]),
    ("06_tower", "_06_tower", "Tower", [], "Tower.apply", {}, []),
]


@pytest.mark.parametrize("case", MODULES, ids=[m[0] for m in MODULES])
def test_module_apply_matches_the_f64_interpreter(case, tmp_path: Path) -> None:
    name, mod, cls, dims, fn, env, extra = case
    out = export(name, tmp_path / "pt")
    module = program(name)
    func = E.find_entry(module, fn)
    from presk.analysis.weights import tree_fields
    from presk.dialects import core as C
    params_type = func.function_type.inputs.data[0]
    assert isinstance(params_type, C.ParamsAttr)
    rng = np.random.default_rng(5)
    params = {f.path: rng.normal(0.0, 0.7, f.shape)
              for f in tree_fields(module, params_type.substitute(env))}
    x = rng.normal(size=(2, 5, 4))  # `...` binds two unnamed axes
    save_file(params, str(tmp_path / "w.safetensors"))
    save_file({"x": x}, str(tmp_path / "x.safetensors"))
    got = run_isolated({"dir": str(out), "module": mod, "class": cls, "dims": dims,
                        "dtype": "float64", "weights": str(tmp_path / "w.safetensors"),
                        "inputs": str(tmp_path / "x.safetensors"),
                        "out": str(tmp_path / "out.safetensors")})
    expected = Interpreter(module, F64()).run(fn, [Tree(params), x, *extra], env)
    diff = difference(got["value"], expected)
    _note(f"{name} {fn}", {"value": diff})
    assert got["value"].shape == expected.shape
    assert diff <= BOUND


def test_float32_follows_the_parameters_dtype(tmp_path: Path) -> None:
    out = export("07_train", tmp_path / "pt")
    entry = E.prepare(differentiated("07_train"), "loss", {"B": 4})
    params, values = E.weights(entry, 0, None), E.inputs(entry, 0, None)
    save_file(params, str(tmp_path / "w.safetensors"))
    save_file(values, str(tmp_path / "x.safetensors"))
    job = {"dir": str(out), "module": "_06_tower", "class": "Tower",
           "entry": ["_07_train", "loss"], "weights": str(tmp_path / "w.safetensors"),
           "inputs": str(tmp_path / "x.safetensors"), "out": str(tmp_path / "out.safetensors")}
    f32 = run_isolated(job | {"dtype": "float32"})
    f64 = run_isolated(job | {"dtype": "float64"})
    assert f32["value"].dtype == np.float32 and f32["grad.blocks.proj.w"].dtype == np.float32
    assert difference(f32["value"], f64["value"]) < 1e-5
    assert difference(f32["grad.blocks.proj.w"], f64["grad.blocks.proj.w"]) < 1e-4


def test_the_source_mirrors_core(tmp_path: Path) -> None:
    """Every Core op's site is a comment of the file of its function; no presk import;
    the files are the reference's four."""
    program = elaborate(str(TUTORIAL / "07_train.psk"))
    sources = pytorch_sources(program)
    assert list(sources) == ["_01_linear.py", "_02_norm.py", "_06_tower.py", "_07_train.py"]
    text = "\n".join(sources.values())
    assert "presk" not in text.replace("`presk export", "").replace("`presk dump", "")\
        .replace("Presk", "")
    module = lower_program(program)
    from presk.dialects import core as C
    for func in module.ops:
        if isinstance(func, C.FuncOp):
            for op in func.body.block.ops:
                assert f"# {op.site.data}" in text, op.site.data
    assert "def loss(θ: _06_tower.Tower, batch: tuple[torch.Tensor, torch.Tensor])" \
        in sources["_07_train.py"]
    assert "self.blocks = Block(stack=(*stack, 3), dtype=dtype)" in sources["_06_tower.py"]
    assert "_8 = x / _7[..., None]  # RMSNorm.apply/%8" in sources["_02_norm.py"]


def test_core_module_exports_as_one_file(tmp_path: Path) -> None:
    """From PSK-Core alone (an .mlir file has no files): one `_<name>.py`, the same value."""
    module = program("07_train")
    sources = pytorch_sources(module, "tower")
    assert list(sources) == ["_tower.py"]
    (tmp_path / "pt").mkdir()
    (tmp_path / "pt" / "_tower.py").write_text(sources["_tower.py"])
    entry = E.prepare(differentiated("07_train"), "loss", {"B": 4})
    params, values = E.weights(entry, 1, None), E.inputs(entry, 1, None)
    save_file(params, str(tmp_path / "w.safetensors"))
    save_file(values, str(tmp_path / "x.safetensors"))
    got = run_isolated({"dir": str(tmp_path / "pt"), "module": "_tower", "class": "Tower",
                        "entry": ["_tower", "loss"], "dtype": "float64",
                        "weights": str(tmp_path / "w.safetensors"),
                        "inputs": str(tmp_path / "x.safetensors"),
                        "out": str(tmp_path / "out.safetensors")})
    numbers = F64()
    expected = Interpreter(module, numbers).run(
        "loss", E.arguments(entry, numbers, params, values), entry.dims)
    assert difference(got["value"], np.asarray(expected)) <= BOUND


def test_a_differentiated_op_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"^[\w.]+/%\d+: psk_core\.\w+ has no "
                       r"PyTorch form"):
        pytorch_sources(differentiated("07_train"))


def test_user_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = [[str(tmp_path / "missing.psk"), "-o", str(tmp_path / "out")],
             [str(TUTORIAL / "01_linear.psk"), "-o", str(blocker)],
             [str(TUTORIAL / "01_linear.psk"), "-o", str(blocker / "sub")]]
    for argv in cases:
        proc = subprocess.run([sys.executable, "-m", "presk.cli.main", "export", "--target",
                               "pytorch", *argv], capture_output=True, text=True, cwd=ROOT)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
