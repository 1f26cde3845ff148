"""A smoke test of bench/native.py: `--quick --case tutorial` runs, the implementations
agree (else it exits 1), and the table names every implementation. No time is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_native_quick_tutorial() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "native.py"), "--quick",
                             "--case", "tutorial"], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for name in ("Presk native (all-f64)", "PyTorch eager f64", "PyTorch eager f32",
                 "numpy f64", "numpy f32", "1 thread"):
        assert name in out, (name, out)
    assert "agreement with PyTorch f64" in out
    assert "DISAGREES" not in out
    assert "goal (forward)" in out and "goal (gradient)" in out
