"""`presk plan`: with the frozen profile, the tutorial's loss at B = 4 under the mixed
realization is planned as test/golden/plan_loss.txt holds (9 nests, the contraction
tiled [4, 4]); the chosen point of every nest is the cheapest its terms predict, the
table's figures are the model's (recomputed here from the profile's constants and the
nest's counts); the plan file applies to `presk run --plan` with the default's bits;
every point of every nest of the tutorial and of a scaled Tower computes the default's
bits."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_run_with_the_plan",
    "test_run_measure",
}


ROOT = Path(__file__).resolve().parents[2]
PRESK = str(ROOT / ".venv" / "bin" / "presk")
FROZEN = "test/fixtures/profile-frozen.json"
ARGS = ["plan", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4", "--realize",
        "@test/fixtures/realization_mixed.json", "--profile", FROZEN]


def _presk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PRESK, *args], capture_output=True, text=True, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PRESK_THREADS": ""})


def test_golden():
    r = _presk(*ARGS)
    assert r.returncode == 0, r.stderr
    assert r.stdout == (ROOT / "test" / "golden" / "plan_loss.txt").read_text()
    table = [line for line in r.stdout.splitlines() if line.startswith("Linear.apply/%3 ")]
    assert "tiled, tile [4, 4], split none" in table[0]
    assert "-- 9 nests," in r.stdout


def test_choices_are_the_models(tmp_path):
    """Each nest's chosen point is the minimum of the model recomputed from the profile."""
    from presk.analysis.cost_model import (Split, combine, constants, count, features,
                                          split_parts, split_terms, terms)
    from presk.analysis.profile import load_profile
    from presk.pipeline import kernel_pipeline, load_core
    from presk.transforms.plan_layout import layout_space, load_plan
    out = tmp_path / "plan.json"
    assert _presk(*ARGS, "--out", str(out)).returncode == 0
    plan = load_plan(str(out))
    profile = load_profile(str(ROOT / FROZEN))
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 4}, "@" + str(ROOT / "test" / "fixtures" /
                                                               "realization_mixed.json"))
    theta = constants(profile.model)
    kernels = {k.sym_name.data: k for k in pipe.kernel.ops if hasattr(k, "layout")}
    from presk.pipeline.plan import resident_bytes
    resident = resident_bytes(pipe.kernel)
    for nest in plan.nests:
        k = kernels[nest.kernel]
        space = layout_space(k, plan.workers)
        c = count(k, profile.machine.cache_line)
        split = Split.of(profile.model)
        seconds = [float(combine(split_terms(terms(features(c, p, profile.machine,
                                                            resident,
                                                            profile.model.tile_width),
                                                   theta), split_parts(c, p), split,
                                             profile.model.p),
                                 profile.model.p)) for p in space]
        assert nest.point == space[int(np.argmin(seconds))]
        assert nest.predicted == pytest.approx(min(seconds))


def test_run_with_the_plan(tmp_path):
    out = tmp_path / "plan.json"
    assert _presk(*ARGS, "--out", str(out)).returncode == 0
    run = ["run", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4", "--realize",
           "@test/fixtures/realization_mixed.json"]
    a, b = _presk(*run), _presk(*run, "--plan", f"@{out}")
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    assert a.stdout == b.stdout
    bad = _presk("run", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=5",
                 "--realize", "@test/fixtures/realization_mixed.json", "--plan", f"@{out}")
    assert bad.returncode == 2 and "the plan was made for `loss` at B=4" in bad.stderr


def test_bad_profile_flag(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"format": "presk-profile/7"}))
    r = _presk(*ARGS[:-1], str(bad))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.slow
def test_calibrate_quick(tmp_path):
    """`presk profile calibrate --quick` writes a profile that reads back, kept for this
    CPU in the cache directory, with u and ρ computed on its held-out points; `presk plan`
    without --profile then uses it."""
    import os
    from presk.analysis.profile import load_profile
    env = {"PATH": "/usr/bin:/bin", "PRESK_CACHE_DIR": str(tmp_path / "cache")}
    out = tmp_path / "p.json"
    r = subprocess.run([PRESK, "profile", "calibrate", "--quick", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    p = load_profile(str(out))
    assert 0 < p.model.held_out < p.model.points and 0 <= p.model.u <= p.model.u90
    assert f"u = {p.model.u:.3f}" in r.stdout
    kept = list((tmp_path / "cache" / "profiles").glob("*.json"))
    assert len(kept) == 1 and kept[0].read_text() == out.read_text()
    r = subprocess.run([PRESK, *ARGS[:-2]], capture_output=True, text=True, cwd=ROOT,
                       env=env)
    assert r.returncode == 0 and f"priced by the profile {kept[0]}" in r.stdout, r.stderr
    assert os.path.exists(kept[0])


def test_call_seconds():
    """A call's predicted time is its launches, each at its plan's point times the call's
    launches of it, plus the host's conversions, copies and fills (here the mixed
    realization's: its bf16 and f32 parameters converted where a kernel reads them wider
    or narrower than stored)."""
    from presk.analysis.profile import load_profile
    from presk.dialects import kernel as K
    from presk.emit.kernel_listing import host_runs
    from presk.pipeline import kernel_pipeline, load_core
    from presk.pipeline.plan import call_seconds, host_op_seconds, make_plan, resident_bytes
    profile = load_profile(str(ROOT / FROZEN))
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    mixed = "@" + str(ROOT / "test" / "fixtures" / "realization_mixed.json")
    report = make_plan(core, "loss", {"B": 4}, profile, "frozen", mixed)
    pipe = kernel_pipeline(core, "loss", {"B": 4}, mixed)
    launches = sum(n.launches * n.chosen.seconds for n in report.nests)
    resident = resident_bytes(pipe.kernel)
    hosts = K.hosts(pipe.kernel)
    host = sum(runs * host_op_seconds(op, profile, resident)
               for name, runs in host_runs(pipe.kernel).items()
               for op in hosts[name].body.walk()
               if isinstance(op, (K.ConvertOp, K.CopyOp, K.FillOp)))
    assert call_seconds(pipe.kernel, profile) == pytest.approx(launches + host)


def test_run_measure():
    """`presk run --measure`: a row per kernel (its prediction, its time, their ratio), the
    call and the host's share, u and ρ over the kernels; refused off the native engine."""
    r = _presk("run", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4",
               "--realize", "@test/fixtures/realization_mixed.json", "--measure",
               "--profile", FROZEN)
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("  k")
            and not line.startswith("  kernel")]
    assert [row[0] for row in rows] == [f"k{i}" for i in range(9)]
    assert "over this program's 9 kernels: u = " in r.stdout and "a call " in r.stdout
    # the host's phases: as many conversions and fills as the recorded hosts run
    from presk.dialects import kernel as K
    from presk.emit.kernel_listing import host_runs
    from presk.pipeline import kernel_pipeline, load_core
    core, _ = load_core(str(ROOT / "tutorial" / "07_train.psk"))
    pipe = kernel_pipeline(core, "loss", {"B": 4}, "@" + str(ROOT / "test" / "fixtures" /
                                                               "realization_mixed.json"))
    hosts = K.hosts(pipe.kernel)
    for kind, phase in ((K.ConvertOp, "conversions"), (K.FillOp, "fills")):
        n = sum(runs * sum(isinstance(op, kind) for op in hosts[name].body.walk())
                for name, runs in host_runs(pipe.kernel).items())
        assert f"    {n} {phase} (predicted)" in r.stdout, r.stdout
    assert "a bare call into native code (measured)" in r.stdout
    bad = _presk("run", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4",
                 "--engine", "kernel", "--measure")
    assert bad.returncode == 2 and "--measure and --profile apply to --engine native" \
        in bad.stderr
