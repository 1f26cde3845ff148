"""An `optimizer` block's values at `presk check` time: the ranges the optimizers accept.

test_diagnostics.py holds one case per rule (E0504, and E0503/E0605 for the warmup and a
value that is not finite), with its message, location and caret. Here: the boundary
values that are accepted; the warning for a warmup longer than the run (W0501); that a refused value is refused by presk/train/optim.py with the
same message (where the runtime checks it); and, against torch.optim itself, where Presk's
rules match torch's and where they are stricter.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main
from presk.datafile import write_stream
from presk.train import optim

# 16 samples in batches of 8 for 2 epochs: a run of 4 steps.
PROGRAM = """\
dim B
module Lin {{
  param w : ℝ[4, 4] init = xavier_uniform
  fn apply(x : ℝ[..., model: 4]) -> ℝ[..., model: 4] = x · w
}}
fn loss(θ : params Lin, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean((Lin.apply(θ, x) - y)^2)
optimizer opt : {kind} {{
{fields}
}}
training run {{
  model     = Lin
  objective = loss
  optimizer = opt
  data      = stream "pairs.psk.d" |> batch(B = 8)
  epochs    : nat = 2
}}
"""
OPTIMIZER_LINE = 9  # `optimizer opt : KIND {`; its first field is on the next line


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    x = np.random.default_rng(0).standard_normal((16, 4))
    write_stream(tmp_path / "pairs.psk.d", "(ℝ[model: 4], ℝ[model: 4])", [(4,), (4,)],
                 [x, 2 * x + 1])
    return tmp_path


def check(capsys, kind: str, *fields: str, before: str = "") -> tuple[int, str, str]:
    """`presk check` in process on PROGRAM with the optimizer's fields, one a line, and
    `before` (whole lines) above it."""
    Path("main.psk").write_text(
        before + PROGRAM.format(kind=kind, fields="\n".join(f"  {f}" for f in fields)),
        encoding="utf-8")
    try:
        rc = main(["check", "main.psk"])
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def field(name: str, value: float) -> str:
    """A field line whose value is written as Python prints it (`-0.5`, `1e-08`)."""
    return f"{name} : f64 = {value!r}"


def refusal(capsys, kind: str, name: str, value: float) -> tuple[str, str]:
    """The code and message of the diagnostic for `name = value`, asserting it stands at
    the value on the field's line."""
    rc, out, err = check(capsys, kind, field(name, value))
    assert (rc, out) == (1, ""), err
    head = re.fullmatch(r"main\.psk:(\d+):(\d+): error\[(E\d{4})\]: (.*)", err.split("\n")[0])
    assert head, err
    line = f"  {field(name, value)}"
    assert (int(head[1]), int(head[2])) == (OPTIMIZER_LINE + 1, line.index("=") + 3), err
    return head[3], head[4]


def runtime(kind: str, name: str, value: float) -> None:
    """Build presk/train/optim.py's optimizer with `name = value`, the others default."""
    (optim.AdamW if kind == "adamw" else optim.SGD)(**{name: value})


# ---- the boundaries are accepted -----------------------------------------------------

@pytest.mark.parametrize("kind, fields", [
    ("adamw", ["lr : f64 = 0", "beta1 : f64 = 0", "beta2 : f64 = 0", "eps : f64 = 5e-324",
               "weight_decay : f64 = 0"]),
    ("adamw", ["beta1 : f64 = 0.9999999999999999", "beta2 : f64 = 1 - 1e-16", "lr : f64 = -0.0"]),
    ("sgd", ["lr : f64 = 0", "momentum : f64 = 0", "dampening : f64 = 1",
             "weight_decay : f64 = 0"]),
    ("sgd", ["dampening : f64 = 0", "momentum : f64 = 1.5"]),
    ("adamw", ["schedule : linear(warmup = 4)"]),  # as long as the run: no warning
    ("sgd", ["schedule : cosine(warmup = 0)"]),
], ids=["adamw-zeros", "adamw-betas-below-one", "sgd-zeros-dampening-one", "sgd-momentum-above-one",
        "warmup-equal-to-the-run", "warmup-zero"])
def test_boundary_values_are_accepted(kind: str, fields: list[str], workdir: Path,
                                      capsys) -> None:
    assert check(capsys, kind, *fields) == (0, "Diagnostics: none\n", "")


def test_a_value_through_a_const_is_refused_at_the_field(workdir: Path, capsys) -> None:
    rc, out, err = check(capsys, "adamw", "beta1 : f64 = B1",
                         before="const B1 : f64 = 0.5 + 0.5\n")
    assert (rc, out) == (1, "")
    err = err.split("\n")
    assert err[0] == f"main.psk:{OPTIMIZER_LINE + 2}:17: error[E0504]: " \
                     "beta1 must be in [0, 1), not 1.0"
    assert err[2] == "   |                 ^^"


# ---- a warmup longer than the run: a warning ---------------------------------------

def test_a_warmup_longer_than_the_run_is_a_warning(workdir: Path, capsys) -> None:
    rc, out, err = check(capsys, "adamw", "schedule : cosine(warmup = 5)")
    assert (rc, out) == (0, "Diagnostics: 0 errors, 1 warning\n")
    assert err.split("\n")[:-1] == [
        f"main.psk:{OPTIMIZER_LINE + 1}:30: warning[W0501]: a warmup of 5 steps is longer than "
        "training `run`: 4 steps (2 epochs × 2 batches of 8 from 16 samples)",
        f"{OPTIMIZER_LINE + 1} |   schedule : cosine(warmup = 5)",
        "   |                              ^",
        "   = note: main.psk:15:3: training `run` uses optimizer `opt`",
        "   = hint: the learning rate never reaches `lr`: shorten the warmup, or train longer "
        "(`epochs`, or `presk train --epochs N`)",
    ]


def test_the_run_length_drops_the_last_partial_batch(workdir: Path, capsys) -> None:
    """15 samples in batches of 8: one batch an epoch, as presk/train/data.py reads it."""
    x = np.zeros((15, 4))
    write_stream(workdir / "pairs.psk.d", "(ℝ[model: 4], ℝ[model: 4])", [(4,), (4,)], [x, x])
    rc, out, err = check(capsys, "sgd", "schedule : linear(warmup = 3)")
    assert (rc, out) == (0, "Diagnostics: 0 errors, 1 warning\n")
    assert "2 steps (2 epochs × 1 batches of 8 from 15 samples)" in err
    assert check(capsys, "sgd", "schedule : linear(warmup = 2)") == \
        (0, "Diagnostics: none\n", "")


# ---- the check and presk/train/optim.py agree --------------------------------------

# Values the check refuses with E0504 and the runtime refuses too.
SHARED = [
    ("adamw", "lr", -0.1), ("sgd", "lr", -1e-3), ("adamw", "beta1", 1.0),
    ("adamw", "beta1", -0.5), ("adamw", "beta2", 1.0), ("adamw", "beta2", 2.5),
    ("adamw", "weight_decay", -0.01), ("sgd", "weight_decay", -0.5),
    ("sgd", "momentum", -0.9), ("adamw", "eps", 0.0), ("sgd", "dampening", 1.5),
    ("sgd", "dampening", -0.25),
]


@pytest.mark.parametrize("kind, name, value", SHARED,
                         ids=[f"{k}-{n}-{v}" for k, n, v in SHARED])
def test_a_refusal_reads_as_the_runtimes(kind: str, name: str, value: float, workdir: Path,
                                         capsys) -> None:
    """presk/train/optim.py refuses what the check refuses, in the check's words (a Python
    API user who passes a bad value reads the same sentence)."""
    code, message = refusal(capsys, kind, name, value)
    assert code == "E0504"
    with pytest.raises(ValueError) as exc:
        runtime(kind, name, value)
    assert str(exc.value) == message


def test_a_negative_eps_reads_as_the_runtimes(workdir: Path, capsys) -> None:
    _, message = refusal(capsys, "adamw", "eps", -1e-8)
    with pytest.raises(ValueError) as exc:
        runtime("adamw", "eps", -1e-8)
    assert str(exc.value) == message


# ---- against torch.optim --------------------------------------------------------------

# (kind, field, value, Presk's code or None when accepted, torch accepts). The rows where
# the two disagree are the documented differences (docs/language.md, E0504).
TORCH = [
    ("adamw", "lr", -0.1, "E0504", False),
    ("adamw", "lr", 0.0, None, True),
    ("adamw", "lr", math.inf, "E0605", True),  # torch takes inf; Presk's values are finite
    ("adamw", "beta1", 0.0, None, True),
    ("adamw", "beta1", 1.0, "E0504", False),
    ("adamw", "beta2", -0.5, "E0504", False),
    ("adamw", "eps", 0.0, "E0504", True),  # stricter: eps = 0 steps by 0/0
    ("adamw", "eps", -1e-8, "E0504", False),
    ("adamw", "eps", math.inf, "E0605", True),
    ("adamw", "weight_decay", -0.01, "E0504", False),
    ("sgd", "lr", -0.1, "E0504", False),
    ("sgd", "momentum", -0.9, "E0504", False),
    ("sgd", "momentum", 0.0, None, True),
    ("sgd", "dampening", 1.0, None, True),
    ("sgd", "dampening", 1.5, "E0504", True),  # stricter: torch leaves dampening unchecked
    ("sgd", "dampening", -0.25, "E0504", True),
    ("sgd", "weight_decay", -0.5, "E0504", False),
]


def torch_accepts(kind: str, name: str, value: float) -> bool:
    torch = pytest.importorskip("torch")
    params = [torch.zeros(1, requires_grad=True)]
    try:
        if kind == "adamw":
            betas = (value if name == "beta1" else 0.9, value if name == "beta2" else 0.999)
            kw = {k: v for k, v in [(name, value)] if k not in ("beta1", "beta2")}
            torch.optim.AdamW(params, betas=betas, **kw)
        else:
            torch.optim.SGD(params, **{name: value})
    except ValueError:
        return False
    return True


@pytest.mark.parametrize("kind, name, value, code, torch_ok", TORCH,
                         ids=[f"{k}-{n}-{v}" for k, n, v, _, _ in TORCH])
def test_against_torch(kind: str, name: str, value: float, code: str | None, torch_ok: bool,
                       workdir: Path, capsys) -> None:
    assert torch_accepts(kind, name, value) == torch_ok
    # inf is written as an overflowing product: a literal that large is refused as a number.
    written = "1e308 * 10" if value == math.inf else repr(value)
    rc, out, err = check(capsys, kind, f"{name} : f64 = {written}")
    if code is None:
        assert (rc, out, err) == (0, "Diagnostics: none\n", "")
    else:
        assert rc == 1 and f"error[{code}]" in err.split("\n")[0], err
