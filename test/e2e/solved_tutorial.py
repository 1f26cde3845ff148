"""The tutorial's loss at B = 4 calibrated and solved at 1e-3 through the Python API,
once per test session: the API's tour (test_api_tour.py) compares it with `presk solve`'s,
the realized PyTorch export (test_export_realized.py) runs under it. A solve costs tens of
seconds of CPU; two test files share one."""

from __future__ import annotations

import functools
from pathlib import Path

import presk

TUTORIAL = Path(__file__).resolve().parents[2] / "tutorial" / "07_train.psk"


@functools.lru_cache(maxsize=None)
def tutorial_solved():
    """(the program, its envelope, the Solution at budget 1e-3)."""
    prog = presk.load(TUTORIAL)
    envelope = prog.calibrate("loss", B=4)
    return prog, envelope, prog.solve(envelope, budget=1e-3)
