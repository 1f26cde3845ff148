"""psk-fuse-reduce keeps the bits (issue 16 item 4): with `fuse_reductions`, native code,
the kernel interpreter and the exported C program compute bit for bit what the program
computes without it, and it launches fewer kernels.

Programs: a layer norm, logsumexp of a product, max over the batch axis, min of tanh, a
sum over the batch axis, a mean over every axis (every reduction kind, over the last
axis, the first, and all), in f64 and all-f32, value and gradient, at short and
blocked lengths; the tutorial's loss (all-f64 and the mixed realization with bf16
parameters) and the scaled Tower's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from presk.analysis.kernel_interpret import KernelInterpreter, to_storage
from presk.analysis.realization import Realization
from presk.dialects import core as C
from presk.emit.c_program import c_sources, entry_c
from presk.emit.kernel_listing import count
from presk.kernel_abi.arena import entry_signatures
from presk.pipeline import kernel_pipeline, load_core
from presk.pipeline.export import _little_endian, write_into
from presk.runtime import pool
from presk.runtime.compile import native_program

pytestmark = pytest.mark.early(0.47)  # CPU minutes (test/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
MIXED = "@" + str(ROOT / "test" / "fixtures" / "realization_mixed.json")
CAN_C = shutil.which("cc") is not None and shutil.which("make") is not None

KINDS = """\
dim N
dim R
fn layer(x : ℝ[batch: R, model: N], g : ℝ[model: N]) -> ℝ[batch: R, model: N] =
  let m = mean(axis model, x)
  let c = x - m
  let v = mean(axis model, c^2)
  c / sqrt(v + 0.00001) * g
fn kinds(x : ℝ[batch: R, model: N], g : ℝ[model: N]) -> ℝ[] =
  let y = layer(x, g)
  let a = sum(logsumexp(axis model, exp(y) * g))
  let b = sum(max(axis batch, y * y))
  let c = sum(min(axis model, tanh(x)))
  let d = sum(sum(axis batch, x * y) - g)
  a + b + c + d + mean((y - x)^2)
"""


def all_f32(core, entry: str) -> Realization:
    sites = {op.site.data: "f32" for f in core.ops if isinstance(f, C.FuncOp)
             for op in f.body.block.ops
             if op.results and "site" in op.attributes and
             isinstance(op.results[0].type, C.TensorAttr)}
    return Realization(entry=entry, sites=sites)


def launches(module) -> int:
    """Launches one call of the entry runs (an inlined callee's ops are written once per
    caller, so the module's launch ops are not what a call runs)."""
    return count(module).launches


def runs(core, entry: str, dims: dict, realization, grad: bool):
    """Per fusion (off, on): the kernel module, its inputs, the native outputs' bytes;
    the interpreter's equal native's."""
    out = []
    for fused in (False, True):
        pipe = kernel_pipeline(core, entry, dims, realization, grad=grad,
                               fuse_reductions=fused)
        (sig,) = entry_signatures(pipe.kernel)
        rng = np.random.default_rng(5)
        inputs = [to_storage(rng.uniform(-1.5, 1.5, b.shape), b.element) for b in sig.inputs]
        native = [o.tobytes() for o in native_program(pipe.kernel).entry(sig.host)(inputs)]
        interp = KernelInterpreter(pipe.kernel).run(sig.host, inputs)
        assert [np.asarray(o).tobytes() for o in interp] == native, (fused, "interpreter")
        out.append((pipe.kernel, inputs, native))
    return out


@pytest.fixture(scope="module")
def kinds(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("fuse_reduce") / "kinds.psk"
    path.write_text(KINDS)
    core, _ = load_core(str(path))
    return core


# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set). The fast
# set keeps every kind short in both types, blocked in f64, and the short gradient in f64.
SLOW_CASES = {
    "test_programs_keep_their_bits[gradient-tutorial-f64]",
    "test_programs_keep_their_bits[gradient-tutorial-mixed]",
    "test_every_reduction_kind_keeps_its_bits[value-blocked-f32]",
    "test_every_reduction_kind_keeps_its_bits[gradient-short-f32]",
    "test_every_reduction_kind_keeps_its_bits[gradient-blocked-f64]",
    "test_every_reduction_kind_keeps_its_bits[gradient-blocked-f32]",
    "test_c_is_native[f32]",
    "test_c_is_native[f64]",
}


@pytest.mark.parametrize("t", ["f64", "f32"])
@pytest.mark.parametrize("dims", [{"N": 5, "R": 3}, {"N": 129, "R": 7}], ids=["short", "blocked"])
@pytest.mark.parametrize("grad", [False, True], ids=["value", "gradient"])
def test_every_reduction_kind_keeps_its_bits(kinds, t, dims, grad) -> None:
    real = all_f32(kinds, "kinds") if t == "f32" else None
    (plain, _, want), (fused, _, got) = runs(kinds, "kinds", dims, real, grad)
    assert got == want
    assert launches(fused) < launches(plain)
    if grad:  # the forward keeps most reduced values for the reverse sweep: fewer fuse
        return
    titles = {k.title.data for k in fused.ops if k.name == "psk_kernel.kernel"}
    for kind in ("mean axis model", "logsumexp axis model", "max axis batch",
                 "min axis model", "sum axis batch"):
        assert any(s.startswith("fused") and s.endswith(kind) for s in titles), kind


@pytest.mark.parametrize("path, dims, realization", [
    ("tutorial/07_train.psk", {"B": 4}, None),
    ("tutorial/07_train.psk", {"B": 4}, MIXED),
    pytest.param("bench/scaled_tower.psk", {"B": 8}, None, marks=pytest.mark.slow),
], ids=["tutorial-f64", "tutorial-mixed", "scaled"])
@pytest.mark.parametrize("grad", [False, True], ids=["value", "gradient"])
def test_programs_keep_their_bits(path, dims, realization, grad) -> None:
    core, _ = load_core(str(ROOT / path))
    (plain, _, want), (fused, _, got) = runs(core, "loss", dims, realization, grad)
    assert got == want
    assert launches(fused) < launches(plain)


def test_rmsnorm_is_one_nest() -> None:
    """The tutorial's forward, its calls inlined (psk-inline): in each Block, RMSNorm's
    square, mean, add, sqrt, div and mul and the gelu reading them in one kernel, then the
    product with the bias and the residual adds as its epilogue; the final RMSNorm with
    the loss's difference and square in one kernel, and the mean: 3 kernels, 8 launches."""
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 4}, None, fuse_reductions=True)
    titles = [k.title.data for k in pipe.kernel.ops if k.name == "psk_kernel.kernel"]
    assert titles == ["fused 7 steps, mean axis model", "dot+add+add",
                      "fused 8 steps, mean axis model", "mean"]
    assert launches(pipe.kernel) == 8


def test_the_gradient_s_square_joins_its_mean() -> None:
    """The reverse sweep spreads the mean's cotangent over the square's shape (its
    `like`): a shape, not a read, so RMSNorm's square still joins the mean that alone
    reads it (and the loss's (a − y)² its mean) — no kernel squares alone. The scaled
    Tower all-f32, as bench/peers.py times it: its blocks' forward and reverse sweep
    recorded in one function. (Under all-f64 the blocks stay a fold, and the square
    leaves the fold's forward function as a residual for the reverse one: that return is
    a read, and the square stays a launch of its own.)"""
    core, _ = load_core(str(ROOT / "bench" / "scaled_tower.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 8}, all_f32(core, "loss"), grad=True,
                           fuse_reductions=True)
    titles = [k.title.data for k in pipe.kernel.ops if k.name == "psk_kernel.kernel"]
    assert "pow 2" not in titles
    assert "fused 4 steps, mean axis model" in titles  # x², mean, + eps, sqrt
    assert "fused 2 steps, mean" in titles  # the loss's (a − y)² and its mean


@pytest.mark.skipif(not CAN_C, reason="needs cc and make on PATH")
@pytest.mark.parametrize("t", ["f64", "f32"])
def test_c_is_native(kinds, tmp_path: Path, t) -> None:
    real = all_f32(kinds, "kinds") if t == "f32" else None
    (_, _, want), (fused, inputs, got) = runs(kinds, "kinds", {"N": 129, "R": 7}, real, True)
    assert got == want
    files = c_sources(fused, None, pool.source_files())
    names = entry_c(fused)
    for relative, content in files.items():
        write_into(str(tmp_path), relative, content)
    for (f, _), a in zip(names.inputs, inputs):
        write_into(str(tmp_path), f"inputs/{f}.bin", _little_endian(a))
    for (f, _), w in zip(names.outputs, want):
        write_into(str(tmp_path), f"expected/{f}.bin", w)
    done = subprocess.run(["make", "-s", "-C", str(tmp_path), "check"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("bit for bit") == len(want), done.stdout
