"""A smoke test of bench/peers.py: `--quick --case tutorial --dtype f64` with PyTorch eager
and JAX (when installed) runs, every implementation agrees with PyTorch f64 (else it exits
1), the table has the three workloads, and the threads are stated. No time is asserted."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_peers_quick_tutorial() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "peers.py"), "--quick",
                             "--case", "tutorial", "--dtype", "f64", "--peers", "eager,jax",
                             "--no-solve", "--threads", "1"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for name in ("Presk native f64", "PyTorch eager f64", "forward median", "value+gradient",
                 "AdamW step", "the process pinned to 1 CPU", "torch.set_num_threads(1)",
                 "agreement with PyTorch eager f64", "peer compile: not asked for"):
        assert name in out, (name, out)
    if importlib.util.find_spec("jax") is None:
        assert "peer missing — jax: not installed" in out, out
    else:
        assert "JAX jit f64" in out, out
    assert "DISAGREES" not in out
