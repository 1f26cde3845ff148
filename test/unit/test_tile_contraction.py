"""The register tiles of the native backend (presk/conversion/kernel_to_std/tile_contraction.py) compute
the kernel interpreter's bits.

A contraction `x · w` of x : ℝ[a: I, b: K] and w : ℝ[K, J] is a `tiled` kernel; its
gradient adds the two transposed contractions (dx = dy · wᵀ, whose j operand is read
transposed and packed; dw = xᵀ · dy, summed over the batch). Sizes are chosen so that
the default layouts take every form — tiles of up to 8 rows (as many as I has: 1, 4, 5, 7
and 8 here) × 4 lanes (J < 16), 16 and 32 columns of 16 f32 or 8 f64 lanes — with rows and
columns left over for the scalar remainder nests, and each is run under all-f64, all-f32 and bf16 parameters.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import Float32Type

from presk.analysis import entry as E
from presk.analysis.kernel_interpret import KernelInterpreter
from presk.analysis.realization import Realization
from presk.pipeline import entry_call
from presk.dialects import kernel as K
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from presk.runtime.compile import native_program
from programs import dot_program

pytestmark = pytest.mark.early(0.48)  # CPU minutes (test/conftest.py)

SIZES = [(5, 3, 6), (9, 5, 37), (4, 7, 16), (7, 2, 70), (1, 4, 33)]
"""(I, K, J): rows, the contracted size, columns."""


def _realization(kind: str) -> Realization | None:
    if kind == "f64":
        return None
    sites = {"M.apply/%3": "f32"} if kind == "f32" else {}
    return Realization(None, sites, {"w": "f32" if kind == "f32" else "bf16"})


@pytest.mark.slow
@pytest.mark.parametrize("i, k, j", SIZES)
@pytest.mark.parametrize("kind", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("entry, grad", [("out", False), ("loss", True)])
def test_tiles_compute_the_interpreters_bits(tmp_path: Path, monkeypatch, i: int, k: int,
                                             j: int, kind: str, entry: str, grad: bool):
    monkeypatch.setenv("PRESK_CACHE", "off")
    core = lower_program(elaborate(str(dot_program(tmp_path, i, k, j))))
    prepared = E.prepare(core, entry, {})
    rng = np.random.default_rng(i * 100 + j)
    params = {f.path: rng.standard_normal(f.shape) for f in prepared.fields}
    values = {n: rng.standard_normal(s) for n, s in prepared.inputs.items()}
    call = entry_call(core, entry, {}, params, values, _realization(kind), True, grad)
    tiled = [k for k in K.kernels(call.pipeline.kernel).values()
             if k.layout.kind.data == "tiled"]
    assert len(tiled) == (3 if grad else 1)
    want = KernelInterpreter(call.pipeline.kernel).run(call.host, call.inputs)
    got = native_program(call.pipeline.kernel).entry(call.host)(call.inputs)
    for name, g, w in zip(call.output_names, got, want):
        assert g.tobytes() == w.tobytes(), (name, g, w)


@pytest.mark.parametrize("unit, fused, want", [
    ((32, 64), True, "tiled, tile [12, 32], lanes 16, order IJ"),  # AVX-512: 24 accumulators
    ((32, 64), False, "tiled, tile [12, 16], lanes 16, order IJ"),  # a multiply and an add
    ((16, 32), True, "tiled, tile [4, 16], lanes 8, order IJ"),  # AVX2: 8 accumulators of 16
    ((16, 32), False, "tiled, tile [4, 16], lanes 8, order IJ"),
])
def test_wide_contractions_take_the_machines_vectors_of_columns(
        tmp_path: Path, monkeypatch, unit: tuple[int, int], fused: bool, want: str) -> None:
    """The default layout of J ≥ 32 f32 columns and I ≥ 12 rows: by 12 rows where the
    machine has 32 vector registers, two vectors of its columns when the product's
    multiply-adds are fused (24 accumulators) and one when they are a multiply and an add
    (nests.py `row_vectors`); else two vectors by as many rows (at most 8) as keep the
    accumulators within half its registers (nests.py `tile_rows`)."""
    from presk.conversion.realize_to_kernel import nests
    monkeypatch.setattr(nests, "vector_unit", lambda: unit)
    core = lower_program(elaborate(str(dot_program(tmp_path, 13, 5, 37))))
    real = _realization("f32")
    if fused:
        real = dataclasses.replace(real, fma=("M.apply/%3",))
    call = entry_call(core, "out", {}, {"w": np.ones((5, 37))}, {"x": np.ones((13, 5))}, real)
    (kernel,) = [k for k in K.kernels(call.pipeline.kernel).values()
                 if k.layout.kind.data == "tiled"]
    assert kernel.layout.text() == want


def test_host_vector_unit_reads_the_flags() -> None:
    """/proc/cpuinfo's flags name the unit the default tile is planned for."""
    from presk.analysis.profile import host_vector_unit
    assert host_vector_unit("flags\t: fpu sse2 avx avx2 fma\n") == (16, 32)
    assert host_vector_unit("flags\t: fpu avx2 avx512f\n") == (32, 64)
    assert host_vector_unit("flags\t: fpu\n") is None


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("entry, grad", [("out", False), ("loss", True)])
def test_split_rows_compute_the_interpreters_bits(tmp_path: Path, monkeypatch, workers: int,
                                                  entry: str, grad: bool) -> None:
    """A contraction large enough to be split (`split = [0, n]`: its rows among n threads,
    as evenly as they go) computes the unsplit nest's bits, value and gradient (the gradient's
    contractions split too)."""
    from presk.conversion import realize_to_kernel
    monkeypatch.setenv("PRESK_CACHE", "off")
    monkeypatch.setattr(realize_to_kernel.nests, "workers", lambda: workers)
    monkeypatch.setattr(realize_to_kernel.nests, "SPLIT_WORK", 1)
    core = lower_program(elaborate(str(dot_program(tmp_path, 25, 6, 40))))
    prepared = E.prepare(core, entry, {})
    rng = np.random.default_rng(7)
    params = {f.path: rng.standard_normal(f.shape) for f in prepared.fields}
    values = {n: rng.standard_normal(s) for n, s in prepared.inputs.items()}
    call = entry_call(core, entry, {}, params, values, _realization("f32"), True, grad)
    split = [k for k in K.kernels(call.pipeline.kernel).values() if k.layout.split.data]
    assert split and all(k.layout.split.data[1].data == workers for k in split)
    want = KernelInterpreter(call.pipeline.kernel).run(call.host, call.inputs)
    got = native_program(call.pipeline.kernel).entry(call.host)(call.inputs)
    for name, g, w in zip(call.output_names, got, want):
        assert g.tobytes() == w.tobytes(), name


def _parse(text: str):
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    from presk.pipeline.passes import PRESK_DIALECTS
    ctx = Context()
    ctx.load_dialect(Builtin)
    for name, factory in PRESK_DIALECTS.items():
        ctx.register_dialect(name, factory)
    return Parser(ctx, text).parse_module()


def test_split_ranges_are_even() -> None:
    """A tiled kernel's rows split as evenly as they go, at most one part a tile's rows:
    a part's rows past its last full tile run as a tile of fewer rows."""
    from presk.transforms.kernel_split import ranges
    text = (Path(__file__).parents[1] / "filecheck" / "kernel_to_std" / "split.mlir").read_text()
    kernel = K.kernels(_parse(text))["k0"]
    assert kernel.layout.tile.data[0].data == 4
    assert ranges(kernel, 2) == [(0, 4), (4, 9)]
    assert ranges(kernel, 3) == [(0, 3), (3, 6), (6, 9)]
    assert ranges(kernel, 5) == [(0, 3), (3, 6), (6, 9)]  # ⌈9/4⌉ = 3 tiles: 3 parts


def _panelled(kernel_module, split: int) -> int:
    """Every tiled kernel's layout with `pack = "panels"` (and `split = [0, split]` when
    split > 1): the number of kernels changed."""
    n = 0
    for k in K.kernels(kernel_module).values():
        if k.layout.kind.data == "tiled":
            tile = [t.data for t in k.layout.tile]
            k.layout = K.LayoutAttr.tiled(tile, k.layout.lanes.data, "IJ",
                                          (0, split) if split > 1 else (), "panels")
            n += 1
    return n


XTG = """builtin.module {
  psk_kernel.kernel @xtg(%0: !psk_kernel.buffer<$T, batch: 19, model: $I>, %1: !psk_kernel.buffer<$T, batch: 19, model: 40>, %2: !psk_kernel.buffer<$T, $I, 40>) attributes {layout = #psk_kernel.layout<tiled, tile = [8, 32], lanes = 16, order = "IJ", pack = "panels", split = [0, 2]>, outputs = 1 : i64, title = "contract"} {
    psk_kernel.for %3 = 0 to $I {
      psk_kernel.for %4 = 0 to 40 {
        %5 = psk_kernel.constant {value = 0.000000e+00 : f64} : $T
        %6 = psk_kernel.for %7 = 0 to 19 iter(%8 = %5) -> ($T) {
          %9 = psk_kernel.load %0[%7, %3] : !psk_kernel.buffer<$T, batch: 19, model: $I> -> $T
          %10 = psk_kernel.load %1[%7, %4] : !psk_kernel.buffer<$T, batch: 19, model: 40> -> $T
          %11 = psk_kernel.mul %9, %10 : $T
          %12 = psk_kernel.add %8, %11 : $T
          psk_kernel.yield %12 : $T
        }
        psk_kernel.store %6, %2[%3, %4] : !psk_kernel.buffer<$T, $I, 40>
        psk_kernel.yield
      }
      psk_kernel.yield
    }
  }
}"""
"""dw = xᵀ·dy over a batch of 19: x's I rows (its last axis) in panels of 8, split in 2."""


@pytest.mark.parametrize("ty, rows, group", [("f32", 64, 2), ("f32", 24, 1), ("f64", 64, 1)])
def test_panels_a_line_at_a_time_compute_the_interpreters_bits(monkeypatch, ty: str,
                                                                rows: int, group: int) -> None:
    """xᵀ·g's x in panels of 8 rows: 8 f32 are half a 64-byte line, so a copy sweep fills
    two panels at once (a whole line of each row of x, tile_contraction.py
    `_line_group`) when a part's panels pair up (64 rows, 32 a part: 4 panels), not
    when a part has one panel (24 rows, 12 a part), nor in f64 (8 lanes fill a line);
    dy, in panels of 32 columns, one at a time. The native launch computes the
    interpreter's bits."""
    from presk.analysis.kernel_interpret import to_storage
    from presk.conversion.kernel_to_std import tile_contraction as T
    from presk.runtime.kernel_timing import harness
    from presk.transforms.kernel_split import KernelSplitPass
    from xdsl.context import Context
    monkeypatch.setenv("PRESK_CACHE", "off")
    groups: list[int] = []
    original = T._line_group
    monkeypatch.setattr(T, "_line_group", lambda *a: groups.append(original(*a)) or groups[-1])
    text = XTG.replace("$T", ty).replace("$I", str(rows))
    kernel = K.kernels(_parse(text))["xtg"]
    module = harness([kernel], [1])
    rng = np.random.default_rng(rows)
    inputs = [to_storage(rng.standard_normal((19, rows)), K.type_name(
        kernel.arg_types[0].element)), to_storage(rng.standard_normal((19, 40)),
                                                  K.type_name(kernel.arg_types[0].element))]
    want = KernelInterpreter(module).run("h0", inputs)
    KernelSplitPass().apply(Context(), module)
    got = native_program(module).entry("h0")(inputs)
    assert got[0].tobytes() == want[0].tobytes()
    assert groups and max(groups) == group, groups  # x's panels, then dy's (1)


@pytest.mark.slow
@pytest.mark.parametrize("i, k, j", SIZES + [(21, 6, 40)])
@pytest.mark.parametrize("kind", ["f64", "f32", "bf16"])
@pytest.mark.parametrize("split", [1, 2])
def test_panels_compute_the_interpreters_bits(tmp_path: Path, monkeypatch, i: int, k: int,
                                              j: int, kind: str, split: int) -> None:
    """The value and gradient with every product's operands packed into panels (the j
    operand by its tile's columns; dw = xᵀ·dy's x by its tile's rows, a split part's rows
    from its own first row) compute the interpreter's bits."""
    from presk.transforms.kernel_split import KernelSplitPass
    from xdsl.context import Context
    monkeypatch.setenv("PRESK_CACHE", "off")
    core = lower_program(elaborate(str(dot_program(tmp_path, i, k, j))))
    prepared = E.prepare(core, "loss", {})
    rng = np.random.default_rng(i * 100 + j + split)
    params = {f.path: rng.standard_normal(f.shape) for f in prepared.fields}
    values = {n: rng.standard_normal(s) for n, s in prepared.inputs.items()}
    call = entry_call(core, "loss", {}, params, values, _realization(kind), True, True)
    kernel = call.pipeline.kernel
    assert _panelled(kernel, split) == 3
    want = KernelInterpreter(kernel).run(call.host, call.inputs)
    if split > 1:
        KernelSplitPass().apply(Context(), kernel)
    got = native_program(kernel).entry(call.host)(call.inputs)
    for name, g, w in zip(call.output_names, got, want):
        assert g.tobytes() == w.tobytes(), (name, g, w)
