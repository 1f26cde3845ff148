"""`sinh`, added as one row of the table of element-wise functions (presk/ops) and its
math-library program: end to end in a .psk program.

* the checker accepts it as C∞ and `presk check` runs without xDSL;
* native code, the kernel interpreter and the exported C program compute the same bits,
  under all-f64 and with the stored values in f32, value and gradient; under all-f64 the
  kernel interpreter also gives the PSK-Core f64 interpreter's bits;
* the native value is within a few ulps of MPFR at 128 bits, the gradient within the
  same of MPFR's, and the gradient agrees with central finite differences in MPFR;
* the PyTorch export (torch.sinh) matches the f64 interpreter (test_export_pytorch's
  bound: torch computes with the C library's sinh, so not bit for bit).

The library's accuracy (≤ 1 ulp against MPFR over ~45 000 points per type) and the C and
LLVM emitters' bits over those points are test_mathlib.py's and test_mathlib_llvm.py's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import gmpy2
import numpy as np
import pytest

from presk import ops
from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.kernel_interpret import KernelInterpreter
from presk.analysis.numbers import F64, MPFR
from presk.dialects import core as C
from presk.pipeline.export import export_c
from presk.transforms.differentiate import Differentiator
from programs import PRESK

SOURCE = """\
dim B
const D : nat = 4

module Hyp {
  param w : ℝ[D]  init = normal(std = 0.5)

  fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] =
    sinh(x * w * 9.0) - 0.5 * sinh(x)
}

fn loss(θ : params Hyp, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean(Hyp.apply(θ, x) * y) + sum(sinh(y))
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sinh") / "hyp.psk"
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def module(source: Path, program):
    return program(source)


def _data(module, b: int = 4, seed: int = 3):
    entry = E.prepare(module, "loss", {"B": b})
    params = {k: v + np.random.default_rng(seed).normal(0.0, 0.3, v.shape)
              for k, v in E.weights(entry, seed, None).items()}
    return entry, params, E.inputs(entry, seed, None)


def _all_f32(module, path: Path) -> str:
    """A realization storing every value of the program (and the parameter) in f32."""
    sites = {op.site.data: "f32" for f in module.ops if isinstance(f, C.FuncOp)
             for op in f.body.block.ops if not isinstance(op, C.ReturnOp)}
    path.write_text(json.dumps({"format": "presk-realization/1", "entry": "loss",
                                "sites": sites, "params": {"w": "f32"}}))
    return str(path)


def test_the_row_makes_sinh_a_smooth_builtin(source: Path) -> None:
    row = ops.row("sinh")
    assert row.builtin == "sinh" and row.regularity == ops.C_INF
    assert isinstance(row.compute, ops.Library)
    run = subprocess.run([PRESK, "check", "--summary", str(source)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert "C⁰" not in run.stdout and "C∞" in run.stdout, run.stdout


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                    reason="needs cc and make")
@pytest.mark.parametrize("types", ["f64", "f32"])
@pytest.mark.parametrize("grad", [False, True], ids=["value", "grad"])
def test_native_kernel_interpreter_and_c_compute_the_same_bits(module, types, grad,
                                                               tmp_path: Path) -> None:
    _, params, values = _data(module)
    realization = _all_f32(module, tmp_path / "r.json") if types == "f32" else None
    result = export_c(module, "loss", {"B": 4}, params, values, str(tmp_path / "c"),
                      realization, grad)
    out = tmp_path / "c"
    run = subprocess.run(["make", "-s", "-C", str(out), "check"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr  # C = native, bit for bit
    call = result.call
    want = KernelInterpreter(call.pipeline.kernel).run(call.host, call.inputs)
    for (field, buf), w in zip(result.entry.outputs, want):
        dtype = {"f64": "<f8", "f32": "<f4"}[buf.element]
        c_out = np.fromfile(out / "outputs" / f"{field}.bin", dtype=dtype)
        assert _same_bits(c_out, w.reshape(-1).astype(c_out.dtype.newbyteorder("="))), field
        assert np.isfinite(c_out).all(), field
    if types == "f64" and not grad:
        entry, _, _ = _data(module)
        f64 = F64()
        core = Interpreter(module, f64).run("loss", E.arguments(entry, f64, params, values),
                                            entry.dims)
        native = np.frombuffer(result.data[f"expected/{result.entry.outputs[0][0]}.bin"],
                               dtype="<f8")
        assert _same_bits(native, np.asarray(core, dtype="<f8").reshape(-1))


def _value_vjp(module, numbers, params, values, entry):
    args = E.arguments(entry, numbers, params, values)
    return Interpreter(module, numbers).run("loss.value_vjp",
                                            args + [numbers.constant(1.0)], entry.dims)


def test_value_and_gradient_against_mpfr_and_finite_differences(source: Path, program) -> None:
    module = program(source)
    Differentiator(module, "store").run(["loss"])
    entry, params, values = _data(module)
    value, d_theta, _ = _value_vjp(module, F64(), params, values, entry)
    exact = MPFR(128)
    with exact.context():
        x_value, x_theta, _ = _value_vjp(module, exact, params, values, entry)
    assert isinstance(d_theta, Tree) and isinstance(x_theta, Tree)
    assert abs(float(value) - float(x_value)) <= 1e-13 * abs(float(x_value))
    got, want = dict(d_theta.items())["w"], exact.to_f64(dict(x_theta.items())["w"])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # central differences of the exact loss in w, in MPFR (step 2^-40, error O(h²))
    h = 2.0 ** -40
    for i in range(len(params["w"])):
        losses = []
        for s in (1, -1):
            moved = dict(params)
            moved["w"] = params["w"].copy()
            moved["w"][i] += s * h
            with exact.context():
                args = E.arguments(entry, exact, moved, values)
                losses.append(Interpreter(module, exact).run("loss", args, entry.dims))
        with gmpy2.context(precision=128):
            fd = float((gmpy2.mpfr(losses[0]) - gmpy2.mpfr(losses[1])) / (2 * h))
        assert abs(fd - want[i]) <= 1e-9 * max(1.0, abs(want[i])), (i, fd, want[i])
