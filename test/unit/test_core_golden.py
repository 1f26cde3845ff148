"""`presk dump --stage core`: the listing against its golden file, the MLIR text through
presk-opt and back.

test/golden/core_loss.txt is §3 of the reference document (the listing of the functions
`loss` reaches in tutorial/07_train.psk), line for line: it was checked against the
reference when it was written, the one difference being the reference's typographic
apostrophe in "program’s", which its HTML rendering introduced. `make golden` writes it
again with the command below; this test holds it current.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from presk.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tutorial"
GOLDEN = ROOT / "test" / "golden" / "core_loss.txt"
BIN = Path(sys.executable).parent


def _presk(capsys, *argv: str) -> str:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_core_listing_of_loss_is_the_golden_file(capsys) -> None:
    out = _presk(capsys, "dump", str(TUTORIAL / "07_train.psk"), "--stage", "core",
                 "--entry", "loss")
    expected = GOLDEN.read_text(encoding="utf-8")
    assert out.splitlines() == expected.splitlines(), "run `make golden` if this is intended"
    assert out == expected


def test_golden_file_has_the_references_shape() -> None:
    """What the reference's §3 shows, independently of how the file was produced."""
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "The functions loss reaches (5 of the program's 12):"
    assert lines[1] == ""
    headers = [line for line in lines if line.startswith("fn ")]
    assert headers == [
        "fn Linear.apply{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In]) -> ℝ[..., Out] {",
        "fn RMSNorm.apply{D}(θ : params RMSNorm{D}, x : ℝ[..., model: D], eps : f64) "
        "-> ℝ[..., model: D] {",
        "fn Block.apply(θ : params Block, x : ℝ[..., model: 4]) -> ℝ[..., model: 4] {",
        "fn Tower.apply(θ : params Tower, x : ℝ[..., model: 4]) -> ℝ[..., model: 4] {",
        "fn loss{B}(θ : params Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) "
        "-> ℝ[] {",
    ]
    assert "  %3 : ℝ[..., model: 4] = fold 3 Block.apply(stacked blocks; acc x)" in lines
    assert "  %7 : ℝ[..., 4] = call Linear.apply{In = 4, Out = 4}(proj, %5)" in lines
    assert len(lines) == 51


def test_listing_without_entry_lists_every_function(capsys) -> None:
    out = _presk(capsys, "dump", str(TUTORIAL / "07_train.psk"), "--stage", "core")
    golden = GOLDEN.read_text(encoding="utf-8")
    # The program's own functions are the five loss reaches, in the same order.
    assert out == golden.split("\n", 2)[2]


@pytest.mark.parametrize("name", sorted(p.name for p in TUTORIAL.glob("0*.psk")))
def test_mlir_round_trips_through_presk_opt(capsys, tmp_path: Path, name: str) -> None:
    text = _presk(capsys, "dump", str(TUTORIAL / name), "--stage", "core", "--format", "mlir")
    assert text.startswith("builtin.module {")
    path = tmp_path / "core.mlir"
    path.write_text(text, encoding="utf-8")
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    once = subprocess.run([str(BIN / "presk-opt"), str(path)], capture_output=True,
                          text=True, encoding="utf-8", env=env)
    assert once.returncode == 0, once.stderr
    # presk-opt, like xdsl-opt, ends its output with a blank line; the IR is the same.
    assert once.stdout.rstrip("\n") == text.rstrip("\n")
    twice = subprocess.run([str(BIN / "presk-opt")], input=once.stdout, capture_output=True,
                           text=True, encoding="utf-8", env=env)
    assert twice.returncode == 0, twice.stderr
    assert twice.stdout == once.stdout


@pytest.mark.parametrize("name", sorted(p.name for p in TUTORIAL.glob("0*.psk")))
def test_lowered_tutorial_verifies(name: str) -> None:
    """`presk dump` and `presk run` print and run the lowering without verifying it."""
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    lower_program(elaborate(str(TUTORIAL / name))).verify()


NAT_ARGUMENT = """\
dim B
const K : nat = 3
fn p(x : ℝ[batch: B, model: 4], n : nat = 2) -> ℝ[batch: B, model: 4] =
  x * real(n)
fn f(x : ℝ[batch: B, model: 4]) -> ℝ[] =
  mean(p(x)) + mean(p(x, K)) + mean(p(x, 5))
"""


def test_nat_arguments_lower_to_a_module_that_verifies(tmp_path: Path) -> None:
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    path = tmp_path / "nat.psk"
    path.write_text(NAT_ARGUMENT, encoding="utf-8")
    lower_program(elaborate(str(path))).verify()
    # And it computes what it says: real(n) at n = 2 (the default), K = 3 and 5.
    import numpy as np

    from presk.analysis.interpret import Interpreter
    from presk.analysis.numbers import F64, MPFR
    module = lower_program(elaborate(str(path)))
    x = np.random.default_rng(0).normal(size=(3, 4))
    expected = float(np.mean(x * 2.0) + np.mean(x * 3.0) + np.mean(x * 5.0))
    for numbers in (F64(), MPFR(80)):
        with numbers.context():
            arg = numbers.array(x)
        got = float(Interpreter(module, numbers).run("f", [arg], {"B": 3}))
        # numpy's means and ours add in different orders: a few ulps apart
        assert abs(got - expected) <= 1e-14 * abs(expected) + 1e-300
