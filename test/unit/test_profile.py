"""The machine profile (`presk-profile/2`): this machine's facts read from sysfs and
/proc/cpuinfo (compared with the files themselves), a frozen profile shown as the
reference's tables, refusals of a bad profile (one line, exit 2), the fit recovering
known constants, and Spearman's ρ against a direct computation."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from presk.analysis.profile import (ProfileError, load_profile, read_machine,
    render_profile, vector_registers)

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ROOT / "test" / "fixtures" / "profile-frozen.json"


def test_machine_from_the_os():
    m = read_machine()
    assert m.workers == len(os.sched_getaffinity(0))
    cpu = min(os.sched_getaffinity(0))
    index = Path(f"/sys/devices/system/cpu/cpu{cpu}/cache")
    sizes = {}
    for d in index.glob("index*"):
        level, kind = (d / "level").read_text().strip(), (d / "type").read_text().strip()
        sizes[(level, kind)] = (d / "size").read_text().strip()
    assert f"{m.l2 >> 10}K" == sizes[("2", "Unified")]
    assert f"{m.l1 >> 10}K" == sizes[("1", "Data")]


@pytest.mark.parametrize("flags, expected", [
    ({"sse2", "avx", "avx2", "avx512f"}, (32, 64)), ({"sse2", "avx2"}, (16, 32)),
    ({"sse2"}, (16, 16)), ({"asimd"}, (32, 16))])
def test_vector_registers(flags, expected):
    assert vector_registers(flags) == expected


def test_no_cache_sizes(tmp_path):
    with pytest.raises(ProfileError, match="reports no L1 data or L2 cache"):
        read_machine(tmp_path, "flags : sse2\n")


def test_show_frozen():
    text = render_profile(load_profile(str(FROZEN)))
    assert text.startswith("Machine\n") and "\nLayout model\n" in text
    data = json.loads(FROZEN.read_text())
    assert f"{data['model']['p']:.3g}" in text
    assert f"{data['machine']['l2'] >> 10} KiB" in text


def test_split_fields_optional():
    """A profile without split_work / split_bandwidth (the frozen one) prices a split at
    its efficiency for every term; with them, they are read and shown."""
    frozen = load_profile(str(FROZEN))
    assert (frozen.model.split_work, frozen.model.split_bandwidth) == (0.0, 1.0)
    data = json.loads(FROZEN.read_text())
    data["model"].update(split_work=2e-6, split_bandwidth=0.5)
    profile = load_profile(json.dumps(data))
    assert (profile.model.split_work, profile.model.split_bandwidth) == (2e-6, 0.5)
    assert "half of it at 2 µs of work a part; past L2, 0.50 of that" in \
        render_profile(profile)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="presk-profile/1"), "profile format version 1"),
    (lambda d: d.update(format="presk-plan/1"), "is a presk-plan/1 artifact"),
    (lambda d: d["model"].update(p=0.5), '"p" is 0.5, not ≥ 1'),
    (lambda d: d["model"]["bandwidth"].update(l2=0), '"l2" is 0'),
    (lambda d: d["machine"].pop("l2"), 'no "l2" field'),
    (lambda d: d["model"].update(extra=1), 'unknown field "extra"'),
    (lambda d: d["model"].update(split_work="2 µs"), '"split_work" is not a number'),
    (lambda d: d["model"].update(split_bandwidth=-1), '"split_bandwidth" is -1'),
])
def test_bad_profiles(edit, message):
    data = json.loads(FROZEN.read_text())
    edit(data)
    with pytest.raises(ProfileError, match=message):
        load_profile(json.dumps(data))


def test_cli_refusals(tmp_path):
    import subprocess
    bad = tmp_path / "p.json"
    bad.write_text('{"format": "presk-profile/9"}')
    for arg in (str(bad), str(tmp_path / "missing.json")):
        r = subprocess.run([str(ROOT / ".venv" / "bin" / "presk"), "profile", "show", arg],
                           capture_output=True, text=True)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_nnls_and_spearman():
    from presk.pipeline.profile import nnls, spearman
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, (50, 4))
    x = np.array([0.5, 0.0, 2.0, 1.0])
    assert np.allclose(nnls(a, a @ x), x, atol=1e-9)
    u, v = rng.standard_normal(30), rng.standard_normal(30)
    ru, rv = np.argsort(np.argsort(u)), np.argsort(np.argsort(v))
    n = len(u)
    direct = 1 - 6 * np.sum((ru - rv) ** 2) / (n * (n * n - 1))
    assert spearman(u, v) == pytest.approx(direct)


@pytest.mark.parametrize("seed", range(6))
def test_nnls_against_every_active_set(seed):
    """NNLS on columns whose scales span twenty decades (as the profile's features do),
    one of them zero, against the brute-force optimum: every subset of columns solved
    by least squares, the best whose solution is non-negative."""
    from itertools import combinations
    from presk.pipeline.profile import nnls
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, (40, 6)) * 10.0 ** rng.uniform(-10, 10, 6)
    a[:, 3] = 0.0
    b = rng.uniform(0.5, 1.5, 40)
    unit = a / np.where(a.any(axis=0), np.linalg.norm(a, axis=0), 1.0)
    best = np.inf
    for k in range(1, 6):
        for cols in combinations((0, 1, 2, 4, 5), k):
            z = np.linalg.lstsq(unit[:, cols], b, rcond=None)[0]
            if (z >= 0).all():
                best = min(best, float(np.sum((unit[:, cols] @ z - b) ** 2)))
    x = nnls(a, b)
    assert (x >= 0).all() and x[3] == 0.0
    assert float(np.sum((a @ x - b) ** 2)) == pytest.approx(best, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n, m", [(8, 16), (4, 4)])
def test_strided_lines_counted(tmp_path, n, m):
    """A contraction as written walks down a column of its right operand: every k step
    of every output needs its own cache line once a row of w is a line or more; its left
    operand and its output are read along their rows (no line of their own)."""
    from presk.analysis.cost_model import count
    from presk.dialects import kernel as K
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.profile import CALIBRATION
    (tmp_path / "cal.psk").write_text(CALIBRATION, encoding="utf-8")
    core, _ = load_core(str(tmp_path / "cal.psk"))
    pipe = kernel_pipeline(core, "cal", {"N": n, "M": m})
    dots = [k for k in pipe.kernel.ops if isinstance(k, K.KernelOp)
            and k.title.data == "dot"]
    assert dots
    for k in dots:
        (i, kk), (_, j) = k.arg_types[0].shape, k.arg_types[1].shape
        c = count(k, 64)
        row = j * 8  # a row of w, f64
        assert c.strided[1] == (i * j * kk if row >= 64 else 0)
        assert c.strided[0] == 0 and c.strided[-1] == 0
        assert count(k, row + 8).strided[1] == 0  # a longer line holds the next k's


def test_fit_recovers_known_constants():
    """Samples made by known constants (and a call overhead over each call's launches)
    are fitted back: every prediction equals its made time."""
    from presk.analysis.cost_model import FEATURES, count
    from presk.analysis.profile import read_machine
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.profile import Sample, _predict, fit_constants
    from presk.transforms.plan_layout import layout_space
    from presk.dialects import kernel as K
    machine = load_profile(str(FROZEN)).machine
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    samples = []
    theta = np.zeros(len(FEATURES) + 1)
    theta[[0, 2, 3, 7, 8, 6, 11, 12, 15, 16]] = [5e-9, 3e-11, 1.5e-11, 4e-11, 2e-11,
                                                 2e-10, 2e-10, 2e-12, 5e-10, 1e-10]
    theta[-1] = 2e-7
    from presk.analysis.cost_model import features
    for b in (1, 4, 16, 64):
        pipe = kernel_pipeline(core, "loss", {"B": b})
        for k in pipe.kernel.ops:
            if isinstance(k, K.KernelOp):
                c = count(k, machine.cache_line)
                for point in layout_space(k, 1):
                    x = np.array([[*features(c, point, machine, 0, 32), 1 / 4]])
                    samples.append(Sample(k.title.data, c, point,
                                          float(_predict(x, theta, 1.0)[0]), 4))
    fit = fit_constants(samples, machine, np.ones(len(samples), dtype=bool))
    y = np.array([s.seconds for s in samples])
    assert fit.width == 32 and fit.p == 1.0
    assert np.allclose(_predict(fit.x, fit.theta, fit.p), y, rtol=1e-6)


def test_fit_recovers_a_split_priced_by_its_work():
    """Samples made by known constants and a known split — an efficiency had at a work
    a part of 2 µs (half of it), a spawn of 50 ns — are fitted
    back: the grid finds the split, and every prediction equals its made time. The split
    is recomputed independently here (split_terms), not read from the fit."""
    from presk.analysis.cost_model import (FEATURES, Split, combine, count, features,
                                           split_parts, split_terms, terms)
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.profile import Sample, fit_constants
    from presk.transforms.plan_layout import layout_space
    from presk.dialects import kernel as K
    machine = load_profile(str(FROZEN)).machine
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    theta = np.zeros(len(FEATURES))
    theta[[0, 1, 2, 3, 7, 8, 6, 11, 12, 13, 15, 16]] = [5e-9, 5e-8, 3e-11, 1.5e-11, 4e-11,
                                                        2e-11, 2e-10, 2e-10, 2e-12, 3e-11,
                                                        5e-10, 1e-10]
    split = Split(0.6, 2e-6, 0.5)
    samples = []
    for b in (4, 64, 256, 1024, 4096):
        pipe = kernel_pipeline(core, "loss", {"B": b})
        for k in pipe.kernel.ops:
            if isinstance(k, K.KernelOp):
                c = count(k, machine.cache_line)
                for point in layout_space(k, 2):
                    t = terms(features(c, point, machine, 0, 32)[None], theta)
                    t = split_terms(t, np.array([split_parts(c, point)]), split, 1.0)
                    samples.append(Sample(k.title.data, c, point, float(combine(t, 1.0)[0]),
                                          32))
    assert any(s.point.split > 1 for s in samples)
    fit = fit_constants(samples, machine, np.ones(len(samples), dtype=bool))
    y = np.array([s.seconds for s in samples])
    # (the tutorial's nests fit in L2: no traffic past it tells the bandwidth's share)
    assert (fit.split.efficiency, fit.split.work) == (0.6, 2e-6)
    assert np.allclose(fit.predict(), y, rtol=1e-4)


def test_chains_blocked_sums_and_math_ops_counted(tmp_path):
    """A contraction as written runs each output's k loop in order: I·J·K steps of a
    chain, when K is past UNROLLED (none of a blocked sum's); a row sum is blocked
    (presk/summation.py): N runs × its partials, and no chain; exp's call counts the
    operations of its program (arguments and constants left out), read from the program
    itself."""
    from presk.analysis.cost_model import UNROLLED, count
    from presk.dialects import kernel as K
    from presk.emit import mathlib
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.profile import CALIBRATION
    from presk.summation import partials_for
    (tmp_path / "cal.psk").write_text(CALIBRATION, encoding="utf-8")
    core, _ = load_core(str(tmp_path / "cal.psk"))
    n, m = 8, 32
    kernels = {}
    for entry in ("cal", "ex"):
        for k in kernel_pipeline(core, entry, {"N": n, "M": m}).kernel.ops:
            if isinstance(k, K.KernelOp):
                kernels.setdefault(k.title.data, k)
    dot = count(kernels["dot"])
    assert m > UNROLLED and dot.chain == n * m * m and dot.blocked == 0
    rows = count(kernels["sum axis model"])
    assert rows.chain == 0 and rows.blocked == n * partials_for(m)
    ops = sum(1 for i in mathlib.program("exp", "f64").instrs if i.op not in ("arg", "const"))
    assert count(kernels["exp"]).math_ops == {"f64": n * m * ops, "f32": 0.0}


def test_newer_terms_optional():
    """The frozen profile (without chain, blocked, spill, math_op_*, panel_spill) prices as
    before: a step in order at `step`, a spill at a tile's load, the rest nothing; a
    profile with them reads and shows them."""
    from presk.analysis.cost_model import FEATURES, constants
    frozen = load_profile(str(FROZEN))
    theta = dict(zip(FEATURES, constants(frozen.model)))
    assert theta["chain"] == frozen.model.step
    assert theta["spills"] == frozen.model.loads["tile"]
    assert theta["blocked"] == theta["math_ops_f64"] == theta["panel_spills"] == 0
    assert "in order" not in render_profile(frozen)
    data = json.loads(FROZEN.read_text())
    data["model"].update(chain=5e-10, blocked=1e-10, spill=2e-10, math_op_f64=6e-11,
                         math_op_f32=3e-11, panel_spill=4e-11)
    profile = load_profile(json.dumps(data))
    theta = dict(zip(FEATURES, constants(profile.model)))
    assert (theta["chain"], theta["spills"], theta["panel_spills"]) == (5e-10, 2e-10, 4e-11)
    text = render_profile(profile)
    assert "A step of a sum in order                   0.5 ns" in text
    assert "0.2 ns (+ 0.04 ns when its tile reads panels)" in text


def test_reread_sweep_and_copies(tmp_path):
    """xᵀ·g of the scaled Tower's size (a 256 × 256 output over k = 1024, f64): its j
    operand is 2 MiB, a 2 MiB L2's size. Without `reuse` (the frozen profile) its re-reads
    come from L2 and a k block prices as its whole-k point; with reuse 1 the strips beside
    it push them to L3, a k block of 256 keeps them in L2 and pays its accumulators'
    reloads. A tile's copies are counted (its panels: both operands; with k in blocks the
    j operand is read in place, so only x's), priced by `copy`."""
    from dataclasses import replace
    from presk.analysis.cost_model import FEATURES, constants, count, features, reread_level
    from presk.dialects import kernel as K
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.profile import CALIBRATION
    from presk.transforms.plan_layout import Point
    (tmp_path / "cal.psk").write_text(CALIBRATION, encoding="utf-8")
    core, _ = load_core(str(tmp_path / "cal.psk"))
    pipe = kernel_pipeline(core, "cal", {"N": 1024, "M": 256}, grad=True)
    [xg] = [k for k in pipe.kernel.ops if isinstance(k, K.KernelOp)
            and k.title.data == "contract" and k.arg_types[-1].shape == (256, 256)]
    machine = replace(load_profile(str(FROZEN)).machine, l1=48 << 10, l2=2 << 20, l3=32 << 20)
    c = count(xg, 64)
    assert c.buffer_bytes[1] == machine.l2
    assert c.copied == (0.0, 2 * machine.l2, machine.l2)
    whole, blocked = Point((8, 16), 1, True), Point((8, 16), 1, True, 256)
    assert reread_level(c, whole, machine, 0.0) == reread_level(c, blocked, machine, 0.0) == 1
    assert reread_level(c, whole, machine, 1.0) == 2
    assert reread_level(c, blocked, machine, 1.0) == 1
    apart = features(c, whole, machine) - features(c, blocked, machine)
    # the blocked point copies g's 2 MiB less: a load and a store an element, and the bytes
    assert {FEATURES[i]: v for i, v in enumerate(apart) if v} == \
        {"load_f64": 2 * machine.l2 // 8, "copied": machine.l2}
    loads = FEATURES.index("tile_loads")
    extra = features(c, blocked, machine, 0, 32, 1.0)[loads] - \
        features(c, whole, machine, 0, 32, 1.0)[loads]
    assert extra == (256 // 8) * (256 // 16) * 2 * 8 * 4 * 3  # R·v accumulators, 3 seams
    theta = dict(zip(FEATURES, constants(load_profile(str(FROZEN)).model)))
    assert theta["copied"] == 0


def test_a_transposed_copy_swept_unpanelled(tmp_path):
    """g·wᵀ (the calibration's gradient at N = 1024, M = 256, f64): its j operand w is
    read transposed, so an unpanelled tile sweeps its j-last copy (512 KiB) once per row
    of tiles — `swept_copy` counts those bytes; its panelled twin and x·w (w read in
    place, nothing copied unpanelled) count none. The frozen profile prices it 0."""
    from presk.analysis.cost_model import FEATURES, constants, count, features
    from presk.dialects import kernel as K
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.profile import CALIBRATION
    from presk.transforms.plan_layout import Point
    (tmp_path / "cal.psk").write_text(CALIBRATION, encoding="utf-8")
    core, _ = load_core(str(tmp_path / "cal.psk"))
    pipe = kernel_pipeline(core, "cal", {"N": 1024, "M": 256}, grad=True)
    products = [count(k, 64) for k in pipe.kernel.ops if isinstance(k, K.KernelOp)
                and k.title.data.startswith(("dot", "contract"))]
    machine = load_profile(str(FROZEN)).machine
    swept = FEATURES.index("swept_copy")
    rows = sorted([features(c, Point((8, 16), 1, p), machine)[swept] for p in (False, True)]
                  for c in products)
    w = 256 * 256 * 8
    assert rows == [[0.0, 0.0], [0.0, 0.0], [w * 1024 / 8, 0.0]], rows
    theta = dict(zip(FEATURES, constants(load_profile(str(FROZEN)).model)))
    assert theta["swept_copy"] == 0
