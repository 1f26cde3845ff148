"""What the tests share: where things are, and the programs they compile.

`program(name)` is the one loader of a tutorial program (or any .psk path) for every test
file: it elaborates and lowers each source once per session and hands out a fresh
`clone()` each call (1–2 ms against ~0.1 s), so a test that differentiates or rewrites
its module can never change another's. `test/conftest.py` offers it as the `program`
fixture; helpers that run outside a test's arguments import it from here. `blocked_last_axis`
is the oracle of a sum's order (presk/summation.py) that the bit tests compare with.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from functools import lru_cache
from pathlib import Path

import numpy as np
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
MIXED_FMA = str(FIXTURES / "realization_mixed_fma.json")
"""MIXED with its three contractions (the forward's and the reverse sweep's) fused."""
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


def dot_program(tmp: Path, i: int, k: int, j: int) -> Path:
    """A .psk file in `tmp` of one contraction `x · w`, x : ℝ[a: I, b: K], w : ℝ[K, J]:
    `loss` = Σ tanh(x · w) (its gradient adds dy · wᵀ and xᵀ · dy) and `out` = x · w."""
    path = tmp / f"dot_{i}_{k}_{j}.psk"
    path.write_text(
        "module M {\n"
        f"  param w : ℝ[{k}, {j}] init = normal(std = 0.5)\n"
        f"  fn apply(v : ℝ[..., b: {k}]) -> ℝ[..., {j}] = v · w\n"
        "}\n"
        f"fn loss(θ : params M, x : ℝ[a: {i}, b: {k}]) -> ℝ[] =\n"
        "  sum(tanh(M.apply(θ, x)))\n"
        f"fn out(θ : params M, x : ℝ[a: {i}, b: {k}]) -> ℝ[a: {i}, {j}] =\n"
        "  M.apply(θ, x)\n", encoding="utf-8")
    return path


def blocked_last_axis(x: np.ndarray) -> np.ndarray:
    """The kernels' order of a sum over the last axis, written out independently of
    presk/summation.py: 64 partials (fewer, a power of two, for a short row), term k into
    partial k mod 64 from +0, then the partials pairwise, p_j + p_{j+h}."""
    n = x.shape[-1]
    width = 1
    while width < min(n, 64):
        width *= 2
    parts = [np.zeros(x.shape[:-1], dtype=x.dtype) for _ in range(width)]
    for k in range(n):
        parts[k % width] = parts[k % width] + x[..., k]
    while len(parts) > 1:
        h = len(parts) // 2
        parts = [parts[j] + parts[j + h] for j in range(h)]
    return parts[0]


def presk_in_process(argv: list[str], cwd: Path | str | None = None
                     ) -> subprocess.CompletedProcess[str]:
    """`presk *argv` run in `cwd` (default: here) in this process: its exit code, stdout and stderr. The
    script is `sys.exit(main())`, so these are the command's, without a new interpreter's
    imports and compiles each time; an uncaught exception (the script's traceback) is
    raised here. For the tests that are about a command's behaviour, not its process
    (signals, a kill, the script itself stay subprocesses)."""
    from presk.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd or here)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's usage errors end the script so
                code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def presk(*argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    """`presk argv…` in this process (`presk_in_process`); with `check`, exit code 0."""
    done = presk_in_process(list(argv))
    assert not check or done.returncode == 0, done.stderr
    return done


@lru_cache(maxsize=None)
def scaled_call(batch: int):
    """bench/scaled_tower.psk's value and gradient at B = `batch` under the all-f32
    realization (bench/native.py's), recorded with its calls kept: an `EntryCall`, one
    per session (a caller that rewrites its module works on a clone)."""
    from presk.pipeline import entry_call
    sys.path.insert(0, str(ROOT / "bench"))
    from native import all_f32, load_entry
    module, prepared, params, values = load_entry(ROOT / "bench" / "scaled_tower.psk",
                                                  {"B": batch})
    return entry_call(module, "loss", prepared.dims, params, values,
                      all_f32(module, prepared, True), True, True)
