"""A layout never changes bits: every point of the layout space of every nest of the
tutorial's loss (its value, and its value and gradient) and of the scaled Tower's (bench/
scaled_tower.psk at B = 8, D = 256: its contractions 8 × 256 × 256), and of the tutorial's
value and gradient with its contractions fused (llvm.fma), and of a residual block fused
across calls (its products' epilogues, k-blocked points included), is compiled beside the
nest in its default layout, all in one module (presk/runtime/kernel_timing.py's harness),
run on the same inputs, and its outputs compared bit for bit with the default's."""

from __future__ import annotations

import numpy as np
import pytest

from presk.dialects import kernel as K
from presk.pipeline import kernel_pipeline, load_core
from presk.transforms.plan_layout import Point, layout_space
from programs import AT_MIXED, MIXED_FMA, ROOT, TRAIN, dot_program

pytestmark = pytest.mark.early(0.81)  # CPU minutes (test/conftest.py)


def _every_point_same_bits(pipe, workers: int = 2, kblocked: bool = False) -> int:
    """Every point of every nest (`kblocked`: the k-blocked points only, each nest that has
    any beside its default) gives the default's bits; how many points ran."""
    from presk.analysis.kernel_interpret import to_storage
    from presk.runtime.compile import native_program
    from presk.runtime.kernel_timing import harness
    variants, owner = [], []
    for k in pipe.kernel.ops:
        if not isinstance(k, K.KernelOp):
            continue
        space = [p for p in layout_space(k, workers) if p.kblock or not kblocked]
        if not space:
            continue
        for point in [Point(), *space]:
            v = k.clone()
            v.layout = point.attr()
            variants.append(v)
            owner.append((k.sym_name.data, point))
    program = native_program(harness(variants, [1] * len(variants)))
    rng = np.random.default_rng(7)
    inputs: dict[str, list] = {}
    reference: dict[str, list[bytes]] = {}
    for i, (name, point) in enumerate(owner):
        entry = program.entry(f"h{i}")
        if name not in inputs:
            inputs[name] = [to_storage(rng.uniform(0.5, 1.5, b.shape), b.element)
                            for b in entry.sig.inputs]
        got = [o.tobytes() for o in entry(inputs[name])]
        if point == Point():
            reference[name] = got
        assert got == reference[name], f"{name} at {point.text()}"
    return len(owner)


@pytest.mark.parametrize("grad", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_tutorial(grad):
    core, _ = load_core(TRAIN)
    assert _every_point_same_bits(kernel_pipeline(core, "loss", {"B": 4}, AT_MIXED,
                                                  grad=grad)) > 20


@pytest.mark.slow
def test_tutorial_fused():
    """The tutorial's value and gradient with its three contractions fused (llvm.fma): a
    layout still never changes bits."""
    core, _ = load_core(TRAIN)
    assert _every_point_same_bits(kernel_pipeline(core, "loss", {"B": 4}, "@" + MIXED_FMA,
                                                  grad=True)) > 20


# Slow (half a minute of CPU each): make test-fast keeps the tutorial's value points
# (test_tutorial[False]), make test runs all.
@pytest.mark.slow
@pytest.mark.parametrize("fused", [False, True])
def test_k_blocks(tmp_path, fused):
    """The k-blocked points (`kblock = 256`, offered where k ≥ 512): x · w with K = 520
    and the gradient's xᵀ·g over a batch of 530 (blocks of 256, 256 and the rest), fused
    and not."""
    from presk.analysis.realization import Realization
    for i, k, j in ((9, 520, 40), (530, 7, 33)):
        core, _ = load_core(str(dot_program(tmp_path, i, k, j)))
        fma = ("M.apply/%3", "M.apply.bwd/%7", "M.apply.bwd/%8") if fused else ()
        real = Realization(None, {"M.apply/%3": "f32"}, {"w": "f32"}, fma)
        pipe = kernel_pipeline(core, "loss", {}, real, grad=True)
        blocked = [p for kern in pipe.kernel.ops if isinstance(kern, K.KernelOp)
                   for p in layout_space(kern, 2) if p.kblock]
        assert blocked
        # Each nest's other points run in the tests above; here its k-blocked ones.
        assert _every_point_same_bits(pipe, kblocked=True) == len(blocked) + \
            len({id(kern) for kern in pipe.kernel.ops if isinstance(kern, K.KernelOp)
                 and any(p.kblock for p in layout_space(kern, 2))})


@pytest.mark.slow
def test_scaled_tower():
    core, _ = load_core(str(ROOT / "bench" / "scaled_tower.psk"))
    assert _every_point_same_bits(kernel_pipeline(core, "loss", {"B": 8})) > 40


@pytest.mark.slow
@pytest.mark.parametrize("grad", [False, True], ids=["value", "gradient"])
def test_epilogue_points(tmp_path, grad):
    """Every point — k-blocked ones included (K = 520) — of the residual block's nests
    fused across calls (`fuse_reductions`: x·w + b + relu + residual as one dot's
    epilogue, the reverse sweep's contract+add): the default's bits."""
    from test_epilogue_bits import BLOCK
    path = tmp_path / "block.psk"
    path.write_text(BLOCK.replace("{n}", "520"))
    core, _ = load_core(str(path))
    pipe = kernel_pipeline(core, "loss", {"R": 9}, None, grad=grad, fuse_reductions=True)
    titles = {k.title.data for k in pipe.kernel.ops if isinstance(k, K.KernelOp)}
    assert ({"dot+add", "contract+add"} if grad else {"dot+add+relu+add"}) <= titles, titles
    assert any(p.kblock for k in pipe.kernel.ops if isinstance(k, K.KernelOp)
               and k.title.data.startswith(("dot+", "contract+")) for p in layout_space(k, 2))
    assert _every_point_same_bits(pipe) > 40
