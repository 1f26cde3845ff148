"""Gradients through the command line: `presk run --grad`, `grad(f)` and
`value_and_grad(f)` written in a program, and `presk-opt -p psk-differentiate`.

The reference is the interpreter on the differentiated module (`loss.value_vjp(θ, batch,
1.0)`), on the weights and inputs `presk run` draws from its seed (presk.analysis.entry).
"""

from __future__ import annotations

import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.parser import Parser

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64, MPFR
from presk.analysis.weights import load_tensors
from presk.dialects import core as C
from presk.dialects.core import Core
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from presk.transforms.differentiate import Differentiator
from programs import TUTORIAL, program

TRAIN = str(TUTORIAL / "07_train.psk")
BIN = Path(sys.executable).parent
PRESK, PRESK_OPT = str(BIN / "presk"), str(BIN / "presk-opt")
B = 4

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_presk_opt_differentiates_the_tutorials_mlir[remat=recompute entries=loss]",
}


def run(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done


@lru_cache(maxsize=None)
def reference(engine: str = "f64", remat: str = "store") -> dict[str, np.ndarray]:
    """`result` and `grad.<path>` as the interpreter computes them, seed 0."""
    module = program(TRAIN)
    Differentiator(module, remat).run(["loss"])
    entry = E.prepare(module, "loss", {"B": B})
    numbers = F64() if engine == "f64" else MPFR(128)
    args = E.arguments(entry, numbers, E.weights(entry, 0, None), E.inputs(entry, 0, None))
    with numbers.context():
        one = numbers.constant(1.0)
    value, d_theta, _ = Interpreter(module, numbers).run("loss.value_vjp", args + [one],
                                                          entry.dims)
    assert isinstance(d_theta, Tree)
    out = {"result": numbers.to_f64(value)}
    out.update({f"grad.{k}": numbers.to_f64(v) for k, v in d_theta.items()})
    return out


def assert_same(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for k in expected:
        assert np.asarray(got[k]).shape == np.asarray(expected[k]).shape, k
        assert np.array_equal(got[k], expected[k]), k


# --------------------------------------------------------------------------------------
# presk run --grad
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("remat", ["store", "recompute"])
def test_run_grad_writes_the_interpreters_gradient(tmp_path: Path, remat: str) -> None:
    out = tmp_path / "g.safetensors"
    done = run(PRESK, "run", TRAIN, "--entry", "loss", "--dim", f"B={B}", "--grad",
               "--engine", "f64", "--remat", remat, "--out", str(out))
    tensors = load_tensors(str(out))
    assert sorted(tensors) == ["grad.blocks.norm.γ", "grad.blocks.proj.b", "grad.blocks.proj.w",
                               "grad.final.γ", "result"]
    assert_same(tensors, reference("f64"))
    assert tensors["result"].shape == ()
    for path in tensors:
        assert f"  {path} = " in done.stdout


def test_run_grad_in_mpfr_is_the_interpreters(tmp_path: Path) -> None:
    out = tmp_path / "g.safetensors"
    run(PRESK, "run", TRAIN, "--entry", "loss", "--dim", f"B={B}", "--grad", "--engine", "mpfr",
        "--out", str(out))
    tensors = load_tensors(str(out))
    assert_same(tensors, reference("mpfr"))
    f64 = reference("f64")
    for k in f64:  # MPFR rounded to f64 is within a few ulps of the f64 run
        np.testing.assert_allclose(tensors[k], f64[k], rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------------------
# grad(f) and value_and_grad(f) in the language
# --------------------------------------------------------------------------------------

BATCH = "(ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])"


def grad_program(tmp_path: Path) -> Path:
    path = tmp_path / "grads.psk"
    path.write_text(f"""-- Gradients of tutorial/07_train.psk's loss, taken in the language.
import "{(TUTORIAL / '06_tower.psk').as_posix()}" as t
import "{(TUTORIAL / '07_train.psk').as_posix()}" as train

dim B

fn g(θ : params t.Tower, batch : {BATCH}) -> params t.Tower =
  grad(train.loss)(θ, batch)

fn vg(θ : params t.Tower, batch : {BATCH}) -> (ℝ[], params t.Tower) =
  value_and_grad(train.loss)(θ, batch)

fn parts(θ : params t.Tower, batch : {BATCH}) -> (ℝ[], ℝ[4], ℝ[3, 4, 4], ℝ[3, 4], ℝ[3, 4]) =
  let (value, d) = value_and_grad(train.loss)(θ, batch)
  let e = grad(train.loss)(θ, batch)
  (value, d.final.γ, e.blocks.proj.w, d.blocks.proj.b, e.blocks.norm.γ)
""", encoding="utf-8")
    return path


def test_grad_in_the_language_reads_like_presk_run_grad(tmp_path: Path) -> None:
    """Fields of grad(loss) and value_and_grad(loss), returned as a tuple of tensors."""
    program = grad_program(tmp_path)
    run(PRESK, "check", str(program))
    out = tmp_path / "parts.safetensors"
    run(PRESK, "run", str(program), "--entry", "parts", "--dim", f"B={B}", "--engine", "f64",
        "--out", str(out))
    got = load_tensors(str(out))
    expected = reference("f64")
    assert_same(got, {"result.0": expected["result"],
                      "result.1": expected["grad.final.γ"],
                      "result.2": expected["grad.blocks.proj.w"],
                      "result.3": expected["grad.blocks.proj.b"],
                      "result.4": expected["grad.blocks.norm.γ"]})


def test_grad_in_the_language_in_mpfr(tmp_path: Path) -> None:
    program = grad_program(tmp_path)
    out = tmp_path / "parts.safetensors"
    run(PRESK, "run", str(program), "--entry", "parts", "--dim", f"B={B}", "--engine", "mpfr",
        "--out", str(out))
    got, expected = load_tensors(str(out)), reference("mpfr")
    assert np.array_equal(got["result.0"], expected["result"])
    assert np.array_equal(got["result.2"], expected["grad.blocks.proj.w"])


def test_grad_is_replaced_by_a_call_of_value_vjp(tmp_path: Path) -> None:
    module = lower_program(elaborate(str(grad_program(tmp_path))))
    assert any(isinstance(op, C.GradOp) for f in module.ops if isinstance(f, C.FuncOp)
               for op in f.body.block.ops)
    Differentiator(module, "store").run([])
    module.verify()
    calls = []
    for f in module.ops:
        if isinstance(f, C.FuncOp) and f.sym_name.data in ("g", "vg", "parts"):
            assert not any(isinstance(op, C.GradOp) for op in f.body.block.ops)
            calls += [op.callee_name for op in f.body.block.ops if isinstance(op, C.CallOp)]
    assert calls == ["loss.value_vjp"] * 4


@pytest.mark.parametrize("entry, prefix", [("g", "result."), ("vg", "result.1.")])
def test_an_entry_returning_a_gradient_tree(tmp_path: Path, entry: str, prefix: str) -> None:
    """grad(loss) and value_and_grad(loss) returned whole: the tree's tensors by path."""
    program = grad_program(tmp_path)
    out = tmp_path / f"{entry}.safetensors"
    done = run(PRESK, "run", str(program), "--entry", entry, "--dim", f"B={B}", "--engine", "f64",
               "--out", str(out))
    assert "Tree(" not in done.stdout
    got = load_tensors(str(out))
    expected = {prefix + k[len("grad."):]: v for k, v in reference("f64").items()
                if k.startswith("grad.")}
    if entry == "vg":
        expected["result.0"] = reference("f64")["result"]
    assert_same(got, expected)
    for path in got:
        assert f"  {path} = " in done.stdout


# --------------------------------------------------------------------------------------
# presk-opt -p psk-differentiate
# --------------------------------------------------------------------------------------

def parse(text: str):
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Core)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


@pytest.mark.parametrize("options", ["entries=loss", "remat=recompute entries=loss"])
def test_presk_opt_differentiates_the_tutorials_mlir(tmp_path: Path, options: str) -> None:
    core = tmp_path / "core.mlir"
    core.write_text(run(PRESK, "dump", TRAIN, "--stage", "core", "--format", "mlir").stdout,
                    encoding="utf-8")
    done = run(PRESK_OPT, str(core), "-p", f"psk-differentiate{{{options}}}")
    assert "@loss.vjp" in done.stdout
    module = parse(done.stdout)
    names = {op.sym_name.data for op in module.ops if isinstance(op, C.FuncOp)}
    assert {"loss.fwd", "loss.bwd", "loss.vjp", "loss.value_vjp", "Tower.apply.bwd",
            "Block.apply.bwd", "Linear.apply.bwd", "RMSNorm.apply.bwd"} <= names
    # What presk-opt made runs: presk run --grad on it finds loss.fwd … already made.
    vjp = tmp_path / "vjp.mlir"
    vjp.write_text(done.stdout, encoding="utf-8")
    out = tmp_path / "g.safetensors"
    run(PRESK, "run", str(vjp), "--entry", "loss", "--dim", f"B={B}", "--grad", "--engine",
        "f64", "--out", str(out))
    assert_same(load_tensors(str(out)), reference("f64"))
