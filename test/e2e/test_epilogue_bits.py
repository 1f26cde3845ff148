"""Epilogues and fusion across calls keep the bits (issue 16 items 3-4): a contraction
launched with its element-wise reader as its epilogue (`dot+add+relu+add`: bias,
activation, residual; the backward's `contract+add`), and psk-inline's fusion across calls (`fuse_reductions`),
compute in native code, the kernel interpreter and the exported C program bit for bit
what the unfused program computes: every op its own kernel (no psk-fuse, no epilogue:
`realize_to_kernel(…, epilogues=False)`).

Programs: a residual block `v + relu(Lin.apply(v))` (the product, bias, activation and
residual in three functions; its value read twice, so that no reduction takes it) in f64, all-f32 and all-f32 with its contractions fused
(llvm.fma), value and gradient, at short and tiled sizes; the tutorial's MLP (04) and
Tower (07); the scaled Tower (slow).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from presk.analysis.kernel_interpret import KernelInterpreter, to_storage
from presk.analysis.realization import Realization
from presk.analysis.sensitivity import contraction_sites
from presk.conversion.realize_to_kernel import realize_to_kernel
from presk.emit.c_program import c_sources, entry_c
from presk.emit.kernel_listing import count
from presk.kernel_abi.arena import entry_signatures
from presk.pipeline import differentiate, kernel_pipeline, load_core
from presk.pipeline.export import _little_endian, write_into
from presk.pipeline.record import record_entry
from presk.runtime import pool
from presk.runtime.compile import native_program

from test_fuse_reduce_bits import all_f32

pytestmark = pytest.mark.early(0.43)  # CPU minutes (test/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
CAN_C = shutil.which("cc") is not None and shutil.which("make") is not None

BLOCK = """\
const N : nat = {n}
dim R
module Lin {
  param w : ℝ[N, N] init = normal(std = 0.3)
  param b : ℝ[N]    init = normal(std = 0.3)
  fn apply(x : ℝ[..., N]) -> ℝ[..., N] = x · w + b
}
module Blk {
  use lin : Lin
  fn apply(v : ℝ[..., model: N]) -> ℝ[..., model: N] = v + relu(lin.apply(v))
}
fn loss(θ : params Blk, x : ℝ[batch: R, model: N]) -> ℝ[] =
  let y = Blk.apply(θ, x)
  sum(tanh(y)) + max(y)
"""


def titles(module) -> set[str]:
    return {k.title.data for k in module.ops if k.name == "psk_kernel.kernel"}


def outputs(module, inputs) -> list[bytes]:
    """Native outputs' bytes; the interpreter's must be the same."""
    (sig,) = entry_signatures(module)
    native = [o.tobytes() for o in native_program(module).entry(sig.host)(inputs)]
    interp = KernelInterpreter(module).run(sig.host, inputs)
    assert [np.asarray(o).tobytes() for o in interp] == native, "interpreter"
    return native


def compare(core, entry: str, dims: dict, realization, grad: bool):
    """(the fused kernel module, its inputs, its outputs): psk-inline, psk-fuse,
    psk-fuse-reduce and the epilogues, checked bit for bit against every op alone."""
    realize, _ = record_entry(core, entry, dims, realization, fuse=False, grad=grad)
    alone = realize_to_kernel(realize, epilogues=False)
    fused = kernel_pipeline(core, entry, dims, realization, grad=grad,
                            fuse_reductions=True).kernel
    (sig,) = entry_signatures(fused)
    rng = np.random.default_rng(11)
    inputs = [to_storage(rng.uniform(-1.5, 1.5, b.shape), b.element) for b in sig.inputs]
    want, got = outputs(alone, inputs), outputs(fused, inputs)
    assert got == want
    assert count(fused).launches < count(alone).launches
    return fused, inputs, got


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory):
    """The block at a width N (a const: its modules' shapes), loaded once."""
    made: dict[int, object] = {}

    def at(n: int):
        if n not in made:
            path = tmp_path_factory.mktemp("epilogue") / f"block_{n}.psk"
            path.write_text(BLOCK.replace("{n}", str(n)))
            made[n] = load_core(str(path))[0]
        return made[n]
    return at


def realization(core, t: str, grad: bool):
    if t == "f64":
        return None
    real = all_f32(core, "loss")
    if t == "f32+fma":  # every contraction fused, the reverse sweep's too
        if grad:
            core = core.clone()
            differentiate(core, ["loss"], "store")
        sites = contraction_sites(core, "loss.value_vjp" if grad else "loss")
        real = Realization(real.entry, real.sites, real.params, tuple(sites))
    return real


# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set). The fast
# set keeps every value case, and the gradient in f64 short and f32+fma both sizes.
SLOW_CASES = {
    "test_block_keeps_its_bits[gradient-short-f32]",
    "test_block_keeps_its_bits[gradient-tiled-f64]",
    "test_block_keeps_its_bits[gradient-tiled-f32]",
    "test_c_is_native[f64]",
    "test_block_keeps_its_bits[gradient-tiled-f32+fma]",
    "test_programs_keep_their_bits[gradient-tutorial/07_train.psk]",
    "test_programs_keep_their_bits[gradient-tutorial/04_mlp.psk]",
    "test_block_keeps_its_bits[gradient-short-f32+fma]",
}


@pytest.mark.parametrize("t", ["f64", "f32", "f32+fma"])
@pytest.mark.parametrize("n, r", [(5, 3), (40, 19)], ids=["short", "tiled"])
@pytest.mark.parametrize("grad", [False, True], ids=["value", "gradient"])
def test_block_keeps_its_bits(blocks, t, n, r, grad) -> None:
    block = blocks(n)
    fused, _, _ = compare(block, "loss", {"R": r}, realization(block, t, grad), grad)
    made = titles(fused)
    if not grad:  # the bias, the activation, the residual
        assert "dot+add+relu+add" in made, made
    else:  # the forward keeps relu's operand for the reverse sweep; there, a product
        # finished by the residual's cotangent
        assert {"dot+add", "contract+add"} <= made, made


@pytest.mark.parametrize("path", ["tutorial/04_mlp.psk", "tutorial/07_train.psk",
                                  pytest.param("bench/scaled_tower.psk",
                                               marks=pytest.mark.slow)])
@pytest.mark.parametrize("grad", [False, True], ids=["value", "gradient"])
def test_programs_keep_their_bits(path, grad) -> None:
    core, _ = load_core(str(ROOT / path))
    fused, _, _ = compare(core, "loss", {"B": 4}, None, grad)
    # gelu is a math-library call: it stays a kernel of its own, never in a tile
    assert not any("gelu" in t for t in titles(fused) if t.startswith(("dot", "contract")))


@pytest.mark.skipif(not CAN_C, reason="needs cc and make on PATH")
@pytest.mark.parametrize("t", ["f64", "f32+fma"])
def test_c_is_native(blocks, tmp_path: Path, t) -> None:
    block = blocks(40)
    fused, inputs, want = compare(block, "loss", {"R": 19}, realization(block, t, True), True)
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
