"""`presk memory` (issue 17): the count of one call, its symbolic form, the placed arena.

* The tutorial's loss at B = 4 under test/fixtures/realization_mixed.json gives the
  reference document's §13 figures (parameters 248 bytes: 76 elements, 28 bf16, 48 f32;
  inputs 504; peak 192 at operation 12 of 39, `Block.apply/%8`, iteration 0; outputs 8;
  needs 696; the calls' shares 192/192/0 and own peaks 192/192/80), and `--symbolic`
  64·B + 248 and 48·B.
* An independent measurement: the kernel interpreter, watched (`LiveWatch`: the arrays
  each op reads and writes as it runs), measures the same peak of live bytes on the
  tutorial, tutorials 03–05, the scaled Tower and a deep residual stack, at three batch
  sizes each.
* The polynomials equal the counted figures at 10 random dims off the grid.
* The placement is sound: following every call's base and every alloc's offset, no two
  buffers live at one operation share a byte (checked on the unrolled trace).
"""

from __future__ import annotations

import random
import subprocess
import sys
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import pytest

from presk.analysis import entry as E
from presk.analysis.kernel_interpret import KernelInterpreter, LiveWatch
from presk.analysis.memory import count
from presk.analysis.memory_symbolic import Poly, interpolate, peak_pieces, symbolic
from presk.kernel_abi.lives import align, record_trace
from presk.kernel_abi.placement import place
from presk.pipeline import entry_call, kernel_pipeline
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program

ROOT = Path(__file__).resolve().parents[2]
MIXED = str(ROOT / "test" / "fixtures" / "realization_mixed.json")
PRESK = str(Path(sys.executable).parent / "presk")

PROGRAMS = {
    "07": ROOT / "tutorial" / "07_train.psk",
    "03": ROOT / "tutorial" / "03_activations.psk",
    "04": ROOT / "tutorial" / "04_mlp.psk",
    "05": ROOT / "tutorial" / "05_stack.psk",
    "scaled": ROOT / "bench" / "scaled_tower.psk",
    "deep": ROOT / "test" / "memory_programs" / "deep_residual.psk",
}


@lru_cache(maxsize=None)
def core(name: str):
    return lower_program(elaborate(str(PROGRAMS[name])))


def trace_of(name: str, b: int, realization=None, grad: bool = False):
    pipe = kernel_pipeline(core(name), "loss", {"B": b}, realization, grad=grad)
    return record_trace(pipe.kernel)


def test_tutorial_figures_are_the_references():
    c = count(trace_of("07", 4, MIXED))
    assert (c.parameters, c.parameter_elements) == (248, {"bf16": 28, "f32": 48})
    assert (c.inputs, c.outputs, c.peak, c.needs) == (504, 8, 192, 696)
    assert (c.peak_step + 1, len(c.trace.steps), c.trace.launches) == (12, 39, 27)
    s = c.peak_where
    assert (s.site, s.frame.label, s.frame.host.sym_name.data, s.iteration) == (
        "Block.apply/%8", "blocks", "Block.apply_2", 0)
    assert c.itself == 0
    [tower] = c.boxes
    assert (tower.label, tower.calls, tower.share, tower.own_peak) == ("`Tower.apply`", 1,
                                                                       192, 192)
    assert [(b.label, b.calls, b.share, b.own_peak) for b in tower.inner] == [
        ("blocks", 3, 192, 192), ("final", 1, 0, 80)]


def test_cli_prints_the_table():
    out = subprocess.run([PRESK, "memory", str(PROGRAMS["07"]), "--entry", "loss", "--dim",
                          "B=4", "--realize", "@" + MIXED], capture_output=True, text=True,
                         check=True).stdout
    assert "parameters  248 bytes: 76 elements, 28 in bf16, 48 in f32" in out
    assert ("peak        192 bytes live, at operation 12 of 39, `Block.apply/%8` in blocks "
            "(`Block.apply_2`), iteration 0") in out
    assert "needs       696 bytes: the inputs and the peak" in out
    assert "    blocks ×3         192         192" in out
    sym = subprocess.run([PRESK, "memory", str(PROGRAMS["07"]), "--entry", "loss", "--dim",
                          "B=4", "--realize", "@" + MIXED, "--symbolic"], capture_output=True,
                         text=True, check=True).stdout
    assert "inputs      64 · B + 248" in sym and "peak        48 · B, at operation 12" in sym
    assert "at B = 4: the peak 192, the inputs 504, as counted" in sym


def test_usage_errors_are_one_line():
    r = subprocess.run([PRESK, "memory", str(PROGRAMS["07"]), "--dim", "B=4"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--entry" in r.stderr
    r = subprocess.run([PRESK, "memory", str(PROGRAMS["07"]), "--entry", "loss"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--dim B=N" in r.stderr


def measured_peak(name: str, b: int, realization=None) -> int:
    """The interpreter's own measure of the live bytes, on the seed's weights and inputs."""
    entry = E.prepare(core(name), "loss", {"B": b})
    call = entry_call(core(name), "loss", {"B": b}, E.weights(entry, 0, None),
                      E.inputs(entry, 0, None), realization)
    watch = LiveWatch()
    KernelInterpreter(call.pipeline.kernel, watch=watch).run(call.host, call.inputs)
    return watch.peak


@pytest.mark.parametrize("name,sizes,realization", [
    ("07", (1, 4, 7), MIXED), ("07", (2, 3, 5), None), ("03", (1, 4, 6), None),
    ("04", (2, 3, 8), None), ("05", (1, 4, 5), None), ("scaled", (1, 2, 3), None),
    ("deep", (1, 3, 6), None)])
def test_the_interpreter_measures_the_counted_peak(name, sizes, realization):
    for b in sizes:
        assert measured_peak(name, b, realization) == count(trace_of(name, b,
                                                                     realization)).peak


@pytest.mark.parametrize("name,realization", [("07", MIXED), ("deep", None),
                                              ("05", None)])
def test_symbolic_equals_the_count_off_the_grid(name, realization):
    sym = symbolic({"B": 4}, lambda d: trace_of(name, d["B"], realization))
    grid = set(sym.grid[0]) | {sym.check["B"]}
    rng = random.Random(17)
    values = rng.sample([v for v in range(1, 300) if v not in grid], 10)
    for b in values:
        c = count(trace_of(name, b, realization))
        at = {"B": b}
        assert (sym.peak_at(at), sym.inputs(at), sym.outputs(at)) == (c.peak, c.inputs,
                                                                      c.outputs)
        assert [p(at) for p in sym.buffers] == [x.bytes for x in c.trace.buffers]


def test_interpolation_and_dominance():
    names = ("B", "T")
    exact = Poly.of(names, {(2, 1): Fraction(3), (1, 0): Fraction(-2), (0, 0): Fraction(7)})
    grid = ((1, 2, 3), (2, 5))
    values = {(b, t): int(exact({"B": b, "T": t})) for b in grid[0] for t in grid[1]}
    assert interpolate(names, grid, values) == exact
    assert str(exact) == "3 · B² · T - 2 · B + 7"
    one = ("B",)
    a = Poly.of(one, {(1,): Fraction(48)})
    b = Poly.of(one, {(1,): Fraction(16), (0,): Fraction(100)})
    assert a.at_least(a) and not a.at_least(b) and not b.at_least(a)
    pieces = peak_pieces(one, [b, a])
    # 16·B + 100 ≥ 48·B while B ≤ 3 (100/32 = 3.1)
    assert [(p.poly, p.where) for p in pieces] == [(b, "1 ≤ B ≤ 3"), (a, "B ≥ 4")]


def addresses(trace, plan):
    """Every arena buffer's address range, following the bases of the calls."""
    base: dict[int, int] = {}
    for f in trace.frames:
        base[id(f)] = 0 if f.parent is None else base[id(f.parent)] + plan.offsets[f.call]
    return {i: (base[id(b.frame)] + plan.offsets[b.alloc], align(b.bytes))
            for i, b in enumerate(trace.buffers) if b.kind == "made"}


@pytest.mark.parametrize("name,b,realization,grad", [
    ("07", 4, MIXED, False), ("07", 4, MIXED, True), ("07", 3, None, True),
    ("05", 4, None, True), ("deep", 3, None, False), ("deep", 2, None, True)])
def test_placement_is_sound(name, b, realization, grad):
    trace = trace_of(name, b, realization, grad)
    plan = place(trace)
    where = addresses(trace, plan)
    need = plan.need[trace.entry.sym_name.data]
    live: dict[int, list[int]] = {}
    for i, buf in enumerate(trace.buffers):
        if i in where:
            for s, e in buf.intervals:
                for step in range(s, e + 1):
                    live.setdefault(step, []).append(i)
    for step, bufs in live.items():
        spans = sorted(where[i] for i in bufs)
        for (a, n), (c, _) in zip(spans, spans[1:]):
            assert a + n <= c, f"two buffers share bytes at operation {step + 1}"
        assert all(a + n <= need for a, n in spans)
