"""The machine profile (`presk-profile/1`): this machine's facts read from sysfs and
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


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(format="presk-profile/2"), "profile format version 2"),
    (lambda d: d.update(format="presk-plan/1"), "is a presk-plan/1 artifact"),
    (lambda d: d["model"].update(p=0.5), '"p" is 0.5, not ≥ 1'),
    (lambda d: d["model"]["bandwidth"].update(l2=0), '"l2" is 0'),
    (lambda d: d["machine"].pop("l2"), 'no "l2" field'),
    (lambda d: d["model"].update(extra=1), 'unknown field "extra"'),
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
