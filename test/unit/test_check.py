"""`presk check` and `presk dump --stage elab` on correct programs: the acceptance facts
of the frontend (types, regularity, effects, the training run, assertions, parameter
counts), the tutorial, ASCII spellings, and that checking stays light (no xDSL)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from presk.cli.main import main

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = sorted((REPO / "tutorial").glob("0*.psk"))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def in_repo(monkeypatch) -> Path:
    monkeypatch.chdir(REPO)
    return REPO


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def summary(capsys, path: str) -> list[str]:
    rc, out, err = run(capsys, "check", "--summary", path)
    assert (rc, err) == (0, ""), err
    return out.splitlines()


# ---- the tutorial's training program ----------------------------------------------------

def test_train_checks_clean(in_repo: Path, capsys) -> None:
    assert run(capsys, "check", "tutorial/07_train.psk") == (0, "Diagnostics: none\n", "")


def test_train_summary(in_repo: Path, capsys) -> None:
    lines = summary(capsys, "tutorial/07_train.psk")
    for expected in ["loss : [θ C∞, batch C∞] uses none",
                     "Tower.init : [key C∞] uses Rand",
                     "    dims    : B = 8"]:
        assert expected in lines
    assert any("4 tensors, 76 reals" in line for line in lines)
    assert lines[-1] == "Diagnostics: none"


def test_train_summary_details(in_repo: Path, capsys) -> None:
    lines = summary(capsys, "tutorial/07_train.psk")
    assert "07_train.psk loss : ℝ[]" in lines
    assert "    let x : ℝ[batch: B, model: 4]" in lines
    assert "RMSNorm.apply : [θ C∞, x C∞, eps C∞] uses none" in lines
    # cosine(warmup = 20): piecewise smooth in the step.
    assert "adamw.lr : [t C⁰⁺, total C⁰⁺] uses none" in lines
    assert ("training run: model Tower, objective loss, optimizer adamw") in lines
    assert "    sample  : (ℝ[model: 4], ℝ[model: 4])" in lines
    assert "    ckpt    : every 50 steps to ckpt/" in lines
    assert "Static assertions: none." in lines
    start = lines.index("The parameters of loss, its first argument: 4 tensors, 76 reals.")
    table = [line.split() for line in lines[start + 1:start + 5]]
    assert table == [["blocks.norm.γ", "ℝ[3,", "4]", "12"],
                     ["blocks.proj.w", "ℝ[3,", "4,", "4]", "48"],
                     ["blocks.proj.b", "ℝ[3,", "4]", "12"],
                     ["final.γ", "ℝ[4]", "4"]]
    assert sum(int(row[-1]) for row in table) == 76  # 3·4 + 3·4·4 + 3·4 + 4


def test_dump_elab_tower_instance(in_repo: Path, capsys) -> None:
    rc, out, err = run(capsys, "dump", "tutorial/07_train.psk", "--stage", "elab")
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    tower = lines.index("Tower:")
    assert lines[tower + 1:tower + 5] == ["  blocks.norm.γ : ℝ[3, 4]",
                                          "  blocks.proj.w : ℝ[3, 4, 4]",
                                          "  blocks.proj.b : ℝ[3, 4]",
                                          "  final.γ : ℝ[4]"]
    assert tower > lines.index("== instances")
    assert "== tutorial/07_train.psk (main)" in lines


@pytest.mark.parametrize("path", TUTORIAL, ids=[p.name for p in TUTORIAL])
def test_tutorial_checks_clean(path: Path, in_repo: Path, capsys) -> None:
    assert run(capsys, "check", str(path.relative_to(REPO))) == (0, "Diagnostics: none\n", "")
    rc, out, err = run(capsys, "check", "--summary", str(path))
    assert (rc, err) == (0, "") and out.endswith("\nDiagnostics: none\n")


def test_tutorial_is_all_there() -> None:
    assert [p.name[:2] for p in TUTORIAL] == ["01", "02", "03", "04", "05", "06", "07"]


# ---- ASCII spellings ---------------------------------------------------------------------

UNICODE = """\
-- the same program in Unicode and in ASCII
dim B
const D : nat = 3
module Lin{In Out : dim} {
  param w : ℝ[In, Out]  init = xavier_uniform
  fn apply(x : ℝ[…, In]) → ℝ[…, Out] =
    x · w
}
module Net {
  use l : Lin{D, D}
  param γ : ℝ[D] init = ones
  fn apply(x : ℝ[..., model: D]) → ℝ[..., model: D] =
    l.apply(x) * γ
}
fn loss(θ : params Net, x : ℝ[batch: B, model: D]) → ℝ[] =
  mean(axis batch, sum(axis model, relu(Net.apply(θ, x)) ^ 2))
"""

ASCII = UNICODE.replace("ℝ", "R").replace("→", "->").replace("·", "@").replace("…", "...")


def test_ascii_spelling_gives_the_same_summary(workdir: Path, capsys) -> None:
    assert not set("ℝ→·…") & set(ASCII)
    for d, text in (("u", UNICODE), ("a", ASCII)):
        (workdir / d).mkdir()
        (workdir / d / "net.psk").write_text(text, encoding="utf-8")
    unicode_summary = summary(capsys, "u/net.psk")
    assert summary(capsys, "a/net.psk") == unicode_summary
    assert "net.psk loss : ℝ[]" in unicode_summary
    assert "Lin.apply : [θ C∞, x C∞] uses none" in unicode_summary
    assert "loss : [θ C⁰, x C⁰] uses none" in unicode_summary
    assert "The parameters of loss, its first argument: 2 tensors, 12 reals." in unicode_summary
    _, u_dump, _ = run(capsys, "dump", "u/net.psk", "--stage", "elab")
    _, a_dump, _ = run(capsys, "dump", "a/net.psk", "--stage", "elab")
    assert a_dump.replace("== a/net.psk", "== u/net.psk") == u_dump
    assert "  fn apply(x : ℝ[..., In]) -> ℝ[..., Out]" in u_dump.splitlines()


@pytest.mark.parametrize("unicode, ascii", [("≤", "<="), ("≥", ">="), ("≠", "!=")])
def test_ascii_comparisons(unicode: str, ascii: str, workdir: Path, capsys) -> None:
    for op in (unicode, ascii):
        (workdir / "main.psk").write_text(f"const D : nat = 3\nassert D {op} 3 or D {op} 4\n",
                                          encoding="utf-8")
        assert f"  main.psk:2  D {op} 3 or D {op} 4  holds" in summary(capsys, "main.psk")


# ---- regularity ------------------------------------------------------------------------

@pytest.mark.parametrize("body, expected", [
    ("sum(axis a, relu(x) + y)", "[x C⁰, y C∞]"),
    ("sum(axis a, abs(x) * y)", "[x C⁰, y C∞]"),
    ("max(axis a, x) + sum(axis a, y)", "[x C⁰, y C∞]"),
    ("min(axis a, y) + mean(axis a, x)", "[x C∞, y C⁰]"),
    ("sum(axis a, max(x, y))", "[x C⁰, y C⁰]"),
    ("sum(axis a, min(x, 0.5) + y)", "[x C⁰, y C∞]"),
    ("sum(axis a, tanh(x) * softplus(y) + gelu(x))", "[x C∞, y C∞]"),
    ("logsumexp(axis a, x) + mean(axis a, softmax(axis a, y))", "[x C∞, y C∞]"),
], ids=["relu", "abs", "max-axis", "min-axis", "max-pair", "min-literal", "smooth",
        "logsumexp-softmax"])
def test_regularity_of_kinked_builtins(body: str, expected: str, workdir: Path,
                                       capsys) -> None:
    program = f"fn f(x : ℝ[b: 2, a: 4], y : ℝ[b: 2, a: 4]) -> ℝ[b: 2] =\n  {body}\n"
    (workdir / "main.psk").write_text(program, encoding="utf-8")
    assert f"f : {expected} uses none" in summary(capsys, "main.psk")


def test_regularity_flows_through_calls_and_parameters(workdir: Path, capsys) -> None:
    (workdir / "main.psk").write_text("""\
module Gate {
  param w : ℝ[4] init = ones
  fn apply(x : ℝ[..., 4], s : ℝ[..., 4]) -> ℝ[..., 4] =
    relu(w) * x + s
}
fn kinks(x : ℝ[4], y : ℝ[4]) -> ℝ[] =
  sum(abs(x) + y)
fn outer(a : ℝ[4], b : ℝ[4]) -> ℝ[] =
  kinks(b, a)
fn gated(θ : params Gate, a : ℝ[4], b : ℝ[4]) -> ℝ[4] =
  Gate.apply(θ, a, relu(b))
""", encoding="utf-8")
    lines = summary(capsys, "main.psk")
    assert "Gate.apply : [θ C⁰, x C∞, s C∞] uses none" in lines
    assert "kinks : [x C⁰, y C∞] uses none" in lines
    assert "outer : [a C∞, b C⁰] uses none" in lines
    assert "gated : [θ C⁰, a C∞, b C⁰] uses none" in lines
    assert "Gate.init : [key C∞] uses Rand" in lines


# ---- optimizers, schedules and assertions ------------------------------------------------

TRAINING = """\
dim B
const D : nat = 4
assert D == 4
assert B <= 64
module Lin {
  param w : ℝ[D, D] init = xavier_uniform
  fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] = x · w
}
fn loss(θ : params Lin, batch : (ℝ[batch: B, model: D], ℝ[batch: B, model: D])) -> ℝ[] =
  let (x, y) = batch
  mean((Lin.apply(θ, x) - y)^2)
optimizer opt : adamw {
  lr : f64 = 0.01
  SCHEDULE
}
training run {
  model     = Lin
  objective = loss
  optimizer = opt
  data      = stream "pairs.psk.d" |> batch(B = 8)
  epochs    : nat = 1
}
"""


@pytest.fixture
def pairs_file(workdir: Path) -> Path:
    import numpy as np

    from presk.datafile import write_stream
    x = np.random.default_rng(0).standard_normal((16, 4))
    path = workdir / "pairs.psk.d"
    write_stream(path, "(ℝ[model: 4], ℝ[model: 4])", [(4,), (4,)], [x, 2 * x + 1])
    return path


@pytest.mark.parametrize("schedule, step", [
    ("schedule : cosine(warmup = 2)", "C⁰⁺"),
    ("schedule : linear(warmup = 1)", "C⁰⁺"),
    ("schedule : constant", "C∞"),
    ("", "C∞"),
], ids=["cosine-warmup", "linear-warmup", "constant", "default"])
def test_schedule_regularity(schedule: str, step: str, workdir: Path, pairs_file: Path,
                             capsys) -> None:
    (workdir / "main.psk").write_text(TRAINING.replace("SCHEDULE", schedule), encoding="utf-8")
    lines = summary(capsys, "main.psk")
    assert f"opt.lr : [t {step}, total {step}] uses none" in lines
    assert f"opt.step : [θ C∞, s C∞, g C∞, t {step}, total {step}] uses none" in lines
    assert "opt.init : [θ C∞] uses none" in lines


def test_static_assertions_are_listed(workdir: Path, pairs_file: Path, capsys) -> None:
    (workdir / "main.psk").write_text(TRAINING.replace("SCHEDULE", ""), encoding="utf-8")
    lines = summary(capsys, "main.psk")
    i = lines.index("Static assertions: 2.")
    assert lines[i + 1:i + 3] == ["  main.psk:3  D == 4  holds",
                                  "  main.psk:4  B <= 64  holds at B = 8"]


def test_assertion_on_an_unbound_dim_is_deferred(workdir: Path, capsys) -> None:
    (workdir / "main.psk").write_text("dim B\nassert B > 0\n", encoding="utf-8")
    lines = summary(capsys, "main.psk")
    assert "  main.psk:2  B > 0  deferred until B is bound" in lines


def test_assertion_failing_at_the_training_dims(workdir: Path, pairs_file: Path,
                                                capsys) -> None:
    program = TRAINING.replace("SCHEDULE", "").replace("assert B <= 64", "assert B % 3 == 0")
    (workdir / "main.psk").write_text(program, encoding="utf-8")
    rc, out, err = run(capsys, "check", "main.psk")
    assert rc == 1
    assert err.splitlines()[0] == \
        "main.psk:4:1: error[E0604]: static assertion fails at B = 8: B % 3 == 0"


# ---- checking stays light ----------------------------------------------------------------

def test_check_does_not_import_xdsl_or_llvmlite() -> None:
    code = ("import sys; from presk.cli.main import main; "
            "main(['check', 'tutorial/07_train.psk']); "
            "print('xdsl' in sys.modules, 'llvmlite' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["Diagnostics: none", "False False"]


def test_summary_of_a_tree_without_tensors(workdir: Path, capsys) -> None:
    """It once raised ValueError (the width of an empty table)."""
    (workdir / "main.psk").write_text("module Empty {\n}\nfn f(θ : params Empty) -> ℝ[] = 1\n",
                                      encoding="utf-8")
    lines = summary(capsys, "main.psk")
    assert "The parameters of f, its first argument: 0 tensors, 0 reals." in lines


def test_summary_counts_one_tensor_in_the_singular(workdir: Path, capsys) -> None:
    (workdir / "main.psk").write_text("module One {\n  param w : ℝ[3] init = zeros\n}\n"
                                      "fn f(θ : params One) -> ℝ[] = sum(θ.w)\n",
                                      encoding="utf-8")
    lines = summary(capsys, "main.psk")
    i = lines.index("The parameters of f, its first argument: 1 tensor, 3 reals.")
    assert lines[i + 1].split() == ["w", "ℝ[3]", "3"]


def test_an_argument_named_like_a_function_does_not_hide_it(workdir: Path, capsys) -> None:
    """Calls look up functions first: `f(f)` calls the function `f` on the argument `f`."""
    (workdir / "main.psk").write_text("fn f(x : ℝ[]) -> ℝ[] = x\nfn g(f : ℝ[]) -> ℝ[] = f(f)\n",
                                      encoding="utf-8")
    assert "g : [f C∞] uses none" in summary(capsys, "main.psk")
