"""What the tests share: where things are, and the programs they compile.

`program(name)` is the one loader of a tutorial program (or any .psk path) for every test
file: it elaborates and lowers each source once per session and hands out a fresh
`clone()` each call (1–2 ms against ~0.1 s), so a test that differentiates or rewrites
its module can never change another's. `test/conftest.py` offers it as the `program`
fixture; helpers that run outside a test's arguments import it from here.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "tutorial"
FIXTURES = ROOT / "test" / "fixtures"
TRAIN = str(TUTORIAL / "07_train.psk")
"""The tutorial's program: its `loss`, `train` and realizations are the references'."""
MIXED = str(FIXTURES / "realization_mixed.json")
AT_MIXED = "@" + MIXED
"""The reference's realization as a command's or the Python API's `@file` argument."""
ALL_F32 = str(FIXTURES / "realization_f32.json")
PRESK = str(Path(sys.executable).parent / "presk")
LOSSES = ["03_activations", "04_mlp", "05_stack", "07_train"]
"""The tutorial programs with a `loss` entry over a batch B."""


def source(name: str | Path) -> Path:
    """`07_train` → tutorial/07_train.psk; a path (with a suffix) stays itself."""
    path = Path(name)
    return path if path.suffix else TUTORIAL / f"{name}.psk"


@lru_cache(maxsize=None)
def _lowered(path: str) -> ModuleOp:
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    return lower_program(elaborate(path))


def program(name: str | Path) -> ModuleOp:
    """The PSK-Core module of a tutorial program (by name) or of a .psk file: a fresh
    copy, so the caller may mutate it."""
    return _lowered(str(source(name).resolve())).clone()
