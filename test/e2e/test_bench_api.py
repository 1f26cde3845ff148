"""A smoke test of bench/api.py: `--quick` runs, the API's results agree with the bare
native call's (else it exits 1), and every way of calling is in the table. No time is
asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_api_quick() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "api.py"), "--quick"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("bare native call", "API, the same arrays", "API, a new batch each call",
                 "API, the same, copy=False", "API, torch tensors", "value and gradient",
                 "goal, the same arrays:", "goal, the same, copy=False:"):
        assert name in result.stdout, (name, result.stdout)
    assert "DISAGREES" not in result.stdout
