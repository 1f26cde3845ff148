"""The bounds (`presk check --precision`, reference §6.4): the sound rules are never below
the measured error, on 200 inputs under two realizations; the tutorial's ordering; the
table; the one-line errors."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

from presk.analysis import entry as E
from presk.analysis import envelope as EV
from presk.analysis.bounds import SOUND, bounds
from presk.analysis.realization import load_realization
from presk.cli import bounds_cmds
from presk.cli.common import UsageError
from presk.pipeline import load_core

pytestmark = pytest.mark.early(0.71)  # CPU minutes (test/conftest.py)

TUTORIAL = "tutorial/07_train.psk"
MIXED = "test/fixtures/realization_mixed.json"
ALL_F32 = "test/fixtures/realization_f32.json"  # every site and parameter of loss in f32
N = 200


@pytest.fixture(scope="module")
def module():
    m, _ = load_core(TUTORIAL)
    return m


@pytest.fixture(scope="module")
def scaled(module):
    """200 inputs at B = 2: the seeded inputs (seeds 0…4) scaled elementwise by random
    factors in [−1, 1], and ONE envelope calibrated over all of them (so it covers them)."""
    dims = {"B": 2}
    prepared = E.prepare(module, "loss", dims)
    params = E.weights(prepared, 0, None)
    rng = np.random.default_rng(7)
    inputs = []
    for i in range(N):
        base = E.inputs(prepared, i % 5, None)
        inputs.append({k: np.asarray(v) * rng.uniform(-1, 1, np.shape(v))
                       for k, v in base.items()})
    mp = pytest.MonkeyPatch()
    mp.setattr(E, "inputs", lambda entry, seed, path: inputs[seed])
    try:
        envelope = EV.calibrate(module, "loss", dims, samples=N)
    finally:
        mp.undo()
    return dims, params, inputs, envelope


def test_all_f32_fixture_covers_every_site(module, scaled):
    envelope = scaled[3]
    real = load_realization(ALL_F32)
    assert set(real.sites) == {s for s, r in envelope.sites.items() if not r.hyperparameter}
    assert set(real.params) == set(envelope.params)
    assert set(real.sites.values()) == set(real.params.values()) == {"f32"}


@pytest.mark.slow
@pytest.mark.parametrize("spec", [MIXED, ALL_F32])
def test_sound_rules_never_below_the_measured_error(module, scaled, spec):
    dims, params, inputs, envelope = scaled
    real = load_realization(spec)
    worst = dict.fromkeys(SOUND, 0.0)
    for values in inputs:
        b = bounds(module, "loss", dims, envelope, real, params, values, do_measure=True)
        assert b.measured is not None and b.measured > 0
        for rule in SOUND:
            assert b.bounds[rule] >= b.measured, (rule, b.bounds, b.measured)
            worst[rule] = max(worst[rule], b.measured / b.bounds[rule])
    print(spec, "max measured/bound:", worst)


@pytest.fixture(scope="module")
def tutorial(module):
    envelope = EV.calibrate(module, "loss", {"B": 4})
    return envelope, bounds(module, "loss", {"B": 4}, envelope, load_realization(MIXED),
                            do_measure=True)


def test_tutorial_ordering(tutorial):
    _, b = tutorial
    v = b.bounds
    assert all(np.isfinite(x) for x in v.values())
    assert v["k"] >= v["normwise"] >= v["cond"] >= b.measured > 0
    assert v["cond"] >= v["rss"]  # √Σt² ≤ Σt
    # per site: a k figure for every reached site, sorted by it
    ks = [s.k for s in b.sites]
    assert ks == sorted(ks, reverse=True)


def test_table_format(tutorial):
    envelope, b = tutorial
    text = bounds_cmds.report(b, "env.json", 3)
    lines = text.splitlines()
    assert lines[0] == "presk check --precision: `loss` under f64+sequential+9sites+4params"
    assert lines[1].startswith("  magnitude   ")
    for i, rule in enumerate(("k", "normwise", "cond")):
        assert lines[2 + i].startswith(f"  bound    {rule}")
        assert "relative)" in lines[2 + i] and lines[2 + i].endswith("× the measured gap")
    assert lines[5].startswith("  estimate rss")
    assert lines[6].startswith("  measured ")
    assert lines[7] == (f"  envelope    env.json over 1 samples, {len(envelope.sites)} "
                        "sites, initial, seed 0")
    head = [i for i, line in enumerate(lines) if line.startswith("site")]
    assert len(head) == 1 and lines[head[0]].split() == [
        "site", "magnitude", "k", "relative", "condition"]
    assert len(lines) == head[0] + 1 + 3


def _args(tmp_path, **kw):
    p = argparse.ArgumentParser()
    p.add_argument("file")
    bounds_cmds.add_to_check(p)
    argv = [TUTORIAL]
    for k, v in kw.items():
        if v is True:
            argv.append(f"--{k}")
        else:
            argv += [f"--{k}", v]
    return p.parse_args(argv)


@pytest.fixture(scope="module")
def envelope_file(module, tmp_path_factory):
    path = tmp_path_factory.mktemp("env") / "envelope.json"
    EV.save_envelope(EV.calibrate(module, "loss", {"B": 4}), str(path))
    return str(path)


def test_cli_prints_the_table(tmp_path, envelope_file, capsys):
    args = _args(tmp_path, precision=envelope_file, realize="@" + MIXED, measure=True,
                 sites="2")
    assert bounds_cmds.check_precision(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("presk check --precision: `loss` under f64+sequential+9sites+4params")
    assert "× the measured gap" in out and len(out.splitlines()) == 9 + 1 + 2


def test_cli_one_rule(tmp_path, envelope_file, capsys):
    assert bounds_cmds.check_precision(_args(tmp_path, precision=envelope_file,
                                             model="cond")) == 0
    out = capsys.readouterr().out
    assert "bound    cond" in out and "bound    normwise" not in out
    assert "  measured " not in out


@pytest.mark.parametrize("case", ["missing", "entry", "dims", "realization", "badjson",
                                  "wrong-entry-realization"])
def test_cli_errors_are_one_line(tmp_path, envelope_file, case):
    kw = {"precision": envelope_file}
    if case == "missing":
        kw["precision"] = str(tmp_path / "nope.json")
    elif case == "entry":
        kw["entry"] = "nope"
    elif case == "dims":
        kw["dim"] = "B=3"
    elif case == "realization":
        kw["realize"] = "@" + str(tmp_path / "nope.json")
    elif case == "badjson":
        (tmp_path / "bad.json").write_text("{")
        kw["precision"] = str(tmp_path / "bad.json")
    else:
        (tmp_path / "r.json").write_text(json.dumps(
            {"format": "presk-realization/1", "entry": "other", "sites": {}, "params": {}}))
        kw["realize"] = "@" + str(tmp_path / "r.json")
    with pytest.raises(UsageError) as exc:
        bounds_cmds.check_precision(_args(tmp_path, **kw))
    msg = str(exc.value)
    assert msg.startswith("presk: ") and "\n" not in msg


def test_fused_contractions_never_raise_a_bound(module, tutorial):
    """The realization fusing the tutorial's contraction (test/fixtures/
    realization_mixed_fma.json): each sound rule's bound is at most the unfused one's and
    still above the error the kernel interpreter measures under it (with its fmas)."""
    from programs import MIXED_FMA
    envelope, unfused = tutorial
    fused = bounds(module, "loss", {"B": 4}, envelope, load_realization(MIXED_FMA),
                   do_measure=True)
    assert fused.name == unfused.name + "+3fma"
    for rule in SOUND:
        assert fused.measured <= fused.bounds[rule] <= unfused.bounds[rule], rule
    assert fused.bounds["k"] < unfused.bounds["k"]  # its products exact but the first
