"""`expm1` (a new row and math-library program) and `log1p` (a kernel-level row made a
builtin), added for the e-graph optimizer's accuracy rules: end to end in a .psk program,
by test_sinh.py's tests on this program (native = kernel interpreter = C bit for bit,
f64 and f32, value and gradient; value and gradient against MPFR and finite differences).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from presk import ops
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program

from test_sinh import (  # noqa: F401  (pytest runs them here, on this program)
    PRESK, test_native_kernel_interpreter_and_c_compute_the_same_bits,
    test_value_and_gradient_against_mpfr_and_finite_differences,
)

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_the_pytorch_export_matches_the_f64_interpreter",
    "test_native_kernel_interpreter_and_c_compute_the_same_bits[grad-f64]",
}

SOURCE = """\
dim B
const D : nat = 4

module Acc {
  param w : ℝ[D]  init = normal(std = 0.5)

  fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] =
    expm1(x * w * 0.5) - 0.5 * log1p(x * x * w * w)
}

fn loss(θ : params Acc, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean(Acc.apply(θ, x) * y) + sum(expm1(y * 1e-3))
"""


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("expm1") / "acc.psk"
    path.write_text(SOURCE)
    return path


@pytest.fixture(scope="module")
def module(source: Path):
    return lower_program(elaborate(str(source)))


@pytest.mark.parametrize("name", ["expm1", "log1p"])
def test_the_rows_are_smooth_builtins(source: Path, name: str) -> None:
    row = ops.row(name)
    assert row.builtin == name and row.regularity == ops.C_INF and row.core
    assert isinstance(row.compute, ops.Library)
    run = subprocess.run([PRESK, "check", "--summary", str(source)], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr


def test_the_pytorch_export_matches_the_f64_interpreter(tmp_path: Path) -> None:
    """torch.expm1 and torch.log1p in the export, value and gradient."""
    pytest.importorskip("torch")
    from test_export_pytorch import compare_entry
    source = tmp_path / "acc.psk"
    source.write_text(SOURCE)
    compare_entry(source, "acc", "_acc", "Acc", [], "random", tmp_path)
