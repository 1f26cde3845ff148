"""What a user sees for a mistake: `presk check` on small wrong programs.

Each case is one distinct mistake, written here as a small program (with its sibling
files when it imports), run through the CLI in process. A case asserts the exit code
(1), the error code, a meaningful part of the message, the exact `file:line:col` of the
span, and for some the caret line and the hint. The command-line mistakes (a missing
file, a directory, a bad flag) are one line on stderr and exit code 2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from presk.cli.main import main
from presk.datafile import write_stream
from presk.frontend.diagnostics import CODES


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """`presk ARGV` in process: (exit code, stdout, stderr). A diagnostic exits with
    SystemExit(1) after printing; a usage error returns 2."""
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch) -> Path:
    """Run in the test's own directory, so diagnostics name files relative to it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def pairs(path: Path, width: int = 4, count: int = 16) -> None:
    """A data file of (x, 2x + 1) pairs of the given width."""
    x = np.random.default_rng(0).standard_normal((count, width))
    write_stream(path, f"(ℝ[model: {width}], ℝ[model: {width}])", [(width,), (width,)],
                 [x, 2 * x + 1])


# A linear layer, used by the cases that import one.
LINEAR = """\
module Linear{In Out : dim} {
  param w : ℝ[In, Out]  init = xavier_uniform
  param b : ℝ[Out]      init = zeros

  fn apply(x : ℝ[..., In]) -> ℝ[..., Out] =
    x · w + b
}
"""

# A complete training run; the training cases change one line of it.
TRAIN = """\
dim B
module Lin {
  param w : ℝ[4, 4] init = xavier_uniform
  fn apply(x : ℝ[..., model: 4]) -> ℝ[..., model: 4] = x · w
}
fn loss(θ : params Lin, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean((Lin.apply(θ, x) - y)^2)
optimizer adamw {
  lr : f64 = 0.01
}
training run {
  model     = Lin
  objective = loss
  optimizer = adamw
  data      = stream "pairs.psk.d" |> batch(B = 8)
  epochs    : nat = 2
}
"""


def train(old: str, new: str) -> str:
    assert old in TRAIN, old
    return TRAIN.replace(old, new, 1)


def sgd(field: str) -> str:
    """TRAIN with an SGD optimizer (still named `adamw`) whose one field is `field`."""
    return train("optimizer adamw {\n  lr : f64 = 0.01", f"optimizer adamw : sgd {{\n  {field}")


@dataclass
class Case:
    id: str
    files: dict[str, str | bytes]  # main.psk and its siblings
    code: str
    message: str  # a substring of the first line
    where: str  # file:line:col
    caret: str | None = None  # the caret line, exactly
    hint: str | None = None  # a substring of the hint line
    note: str | None = None  # a substring of a note line
    source: str | None = None  # the quoted source line, exactly


def case(id: str, main: str | bytes, code: str, message: str, where: str, **kw) -> Case:
    files = {"main.psk": main, **kw.pop("files", {})}
    return Case(id, files, code, message, where, **kw)


CASES = [
    # ---- syntax ----
    case("syntax-unexpected-token", "fn f(x : ℝ[] -> ℝ[] = x\n",
         "E0001", "unexpected `->`", "main.psk:1:14",
         caret="  |              ^^", hint="expected `)`, `,` or `=`"),
    case("syntax-unexpected-character", "fn f(x : ℝ[]) -> ℝ[] = x $ x\n",
         "E0001", "unexpected character `$`", "main.psk:1:26",
         caret="  |                          ^"),
    case("syntax-unexpected-end", "fn f(x : ℝ[]) -> ℝ[] =\n  x +\n",
         "E0001", "unexpected end of file", "main.psk:2:6",
         hint="expected `(`, `-`, a name or a number"),
    case("syntax-end-after-comment", "fn f(x : ℝ[]) -> ℝ[] = x *\n-- more to come\n",
         "E0001", "unexpected end of file", "main.psk:1:27"),
    case("syntax-param-without-init", "module M {\n  param w : ℝ[4] = zeros\n}\n",
         "E0001", "unexpected `=`", "main.psk:2:18", hint="expected `init`"),
    case("syntax-ellipsis-not-first", "fn f(x : ℝ[4, ...]) -> ℝ[4] = x\n",
         "E0308", "`...` may only stand first", "main.psk:1:10",
         caret="  |          ^^^^^^^^^"),
    # ---- reading files ----
    case("empty-file", "", "E0003", "`main.psk` holds no declaration", "main.psk:1:1",
         hint="at least one module"),
    case("only-comments", "-- a file\n-- of comments only\n",
         "E0003", "holds no declaration", "main.psk:2:1"),
    case("invalid-utf8", b"dim B\nfn f(x : \xe2\x84 ) -> R[] = x\n",
         "E0002", "byte 0xe2 at offset 15 is not valid UTF-8", "main.psk:2:10",
         caret="  |          ^", hint="save the file as UTF-8"),
    # ---- imports ----
    case("import-missing", 'import "nothere.psk" as n\ndim B\n',
         "E0101", "the imported file `nothere.psk` does not exist", "main.psk:1:8",
         caret="  |        ^^^^^^^^^^^^^"),
    case("import-cycle", 'import "a.psk" as a\ndim C\n',
         "E0102", "import cycle: a.psk → b.psk → a.psk", "b.psk:2:8",
         files={"a.psk": 'dim A\nimport "b.psk" as b\n', "b.psk": 'dim B\nimport "a.psk" as a\n'}),
    case("import-directory", 'dim B\nimport "lib" as lib\n',
         "E0101", "the imported file `lib` is a directory, not a file", "main.psk:2:8",
         files={"lib/x.psk": "dim X\n"}),
    case("import-error-in-imported-file", 'import "lib.psk" as lib\ndim B\n',
         "E0204", "unknown name `z`", "lib.psk:1:24",
         files={"lib.psk": "fn f(x : ℝ[]) -> ℝ[] = z\n"}),
    # ---- names ----
    case("unknown-name", "fn f(value : ℝ[]) -> ℝ[] =\n  valeu + 1\n",
         "E0204", "unknown name `valeu`", "main.psk:2:3",
         caret="  |   ^^^^^", hint="did you mean `value`?"),
    case("duplicate-top-level", "dim B\nfn f(x : ℝ[]) -> ℝ[] = x\nfn f(y : ℝ[]) -> ℝ[] = y\n",
         "E0201", "`f` is defined twice", "main.psk:3:4",
         note="main.psk:2:4: first defined here"),
    case("duplicate-in-module",
         "module M {\n  param w : ℝ[4] init = zeros\n  param w : ℝ[4] init = ones\n}\n",
         "E0201", "`w` is defined twice in this module", "main.psk:3:3",
         note="main.psk:2:3: first defined here"),
    case("unknown-dim-in-size", "dim B\nfn f(x : ℝ[Bb, 4]) -> ℝ[] = sum(x)\n",
         "E0202", "unknown dim or const `Bb`", "main.psk:2:12", hint="did you mean `B`?"),
    case("f64-const-as-size", "const S : f64 = 4.0\nfn f(x : ℝ[S]) -> ℝ[S] = x\n",
         "E0202", "`S` is an f64 const; a size is a nat", "main.psk:2:12"),
    case("unknown-module", "module M {\n  use inner : Linaer{4, 4}\n}\nmodule Linear {\n}\n",
         "E0203", "unknown module `Linaer`", "main.psk:2:15", hint="did you mean `Linear`?"),
    case("unknown-function-of-module",
         'import "lin.psk" as lin\n'
         "fn f(θ : params lin.Linear{4, 4}, x : ℝ[4]) -> ℝ[4] =\n"
         "  lin.Linear.aply(θ, x)\n",
         "E0205", "`Linear` has no function `aply`", "main.psk:3:3",
         hint="did you mean `apply`?", files={"lin.psk": LINEAR}),
    case("unknown-function", "fn square(x : ℝ[]) -> ℝ[] = x * x\nfn f(x : ℝ[]) -> ℝ[] = sqare(x)\n",
         "E0205", "unknown function `sqare`", "main.psk:2:24", hint="did you mean `square`?"),
    case("recursion", "fn f(x : ℝ[]) -> ℝ[] = g(x)\nfn g(x : ℝ[]) -> ℝ[] = f(x)\n",
         "E0206", "recursion is not supported: f → g → f", "main.psk:2:24"),
    # ---- declarations ----
    case("bad-const-type", "const D : int = 4\n",
         "E0302", "unknown const type `int`", "main.psk:1:11",
         caret="  |           ^^^", hint="a const is a `nat` or an `f64`"),
    case("non-natural-nat-const", "const D : nat = 1.5\n",
         "E0301", "`D : nat` cannot hold 1.5", "main.psk:1:17", hint="a natural number"),
    case("bad-init-name", "module M {\n  param w : ℝ[4] init = xavier\n}\n",
         "E0303", "unknown initializer `xavier`", "main.psk:2:25", hint="did you mean `xavier_"),
    case("bad-init-argument", "module M {\n  param w : ℝ[4] init = normal(sigma = 0.1)\n}\n",
         "E0303", "`normal` takes no argument `sigma`", "main.psk:2:32", hint="mean, std"),
    case("instance-dims",
         'import "lin.psk" as lin\nmodule M {\n  use l : lin.Linear{4}\n}\n',
         "E0304", "`Linear` takes 2 dims (In Out), given 1", "main.psk:3:11",
         caret="  |           ^^^^^^^^^^^^^", files={"lin.psk": LINEAR}),
    case("param-with-ellipsis", "module M {\n  param w : ℝ[..., 4] init = zeros\n}\n",
         "E0305", "a parameter is a tensor of fixed axes", "main.psk:2:13"),
    case("module-uses-itself", "module M {\n  param w : ℝ[4] init = zeros\n  use inner : M\n}\n",
         "E0306", "module `M` contains itself: M → M", "main.psk:1:8"),
    case("result-ellipsis-unbound", "fn f(x : ℝ[4]) -> ℝ[..., 4] = x\n",
         "E0308", "returns `...` but no argument has it", "main.psk:1:19"),
    # ---- expressions and shapes ----
    case("shape-sizes", "fn f(x : ℝ[a: 3], y : ℝ[a: 4]) -> ℝ[a: 3] =\n  x + y\n",
         "E0401", "axis sizes 3 and 4 differ in ℝ[a: 3] and ℝ[a: 4]", "main.psk:2:3",
         caret="  |   ^^^^^"),
    case("shape-names", "fn f(x : ℝ[batch: 3], y : ℝ[model: 3]) -> ℝ[batch: 3] =\n  x * y\n",
         "E0401", "axis `batch` meets axis `model` in ℝ[batch: 3] and ℝ[model: 3]",
         "main.psk:2:3"),
    case("f64-mixed-with-tensor", "fn f(x : ℝ[4], s : f64) -> ℝ[4] =\n  x * s\n",
         "E0402", "`*` cannot combine a tensor ℝ[4] and f64", "main.psk:2:3",
         hint="real(…)"),
    case("result-mismatch", "fn f(x : ℝ[4]) -> ℝ[5] =\n  x\n",
         "E0403", "`f` computes ℝ[4] but is declared to return ℝ[5]", "main.psk:2:3"),
    case("reduction-unknown-axis",
         "fn f(x : ℝ[batch: 3, model: 4]) -> ℝ[batch: 3] =\n  mean(axis modl, x)\n",
         "E0404", "has no axis `modl`", "main.psk:2:8",
         caret="  |        ^^^^^^^^^", hint="its axes are named: batch, model"),
    case("argument-count",
         "fn g(x : ℝ[], y : ℝ[]) -> ℝ[] = x + y\nfn f(x : ℝ[]) -> ℝ[] = g(x)\n",
         "E0405", "`g` takes 2 arguments (x, y), given 1", "main.psk:2:24",
         hint="`y` has no default"),
    case("unknown-keyword",
         "fn g(x : ℝ[], eps : f64 = 1e-6) -> ℝ[] = x\n"
         "fn f(a : ℝ[]) -> ℝ[] = g(a, epsilon = 1e-3)\n",
         "E0405", "`g` has no parameter `epsilon`", "main.psk:2:29", hint="did you mean `eps`?"),
    case("tuple-arity", "fn f(batch : (ℝ[], ℝ[])) -> ℝ[] =\n  let (a, b, c) = batch\n  a\n",
         "E0406", "3 names bound to a tuple of 2", "main.psk:2:3"),
    case("argument-f64-for-tensor", "fn g(x : ℝ[4]) -> ℝ[4] = x\nfn f(a : f64) -> ℝ[4] = g(a)\n",
         "E0407", "argument `x` of `g` is ℝ[4], given f64", "main.psk:2:27"),
    case("argument-wrong-size", "fn g(x : ℝ[4]) -> ℝ[4] = x\nfn f(a : ℝ[5]) -> ℝ[4] = g(a)\n",
         "E0407", "axis size 5 of ℝ[5] does not fit 4 of ℝ[4]", "main.psk:2:28"),
    case("power-f64-exponent", "fn f(x : ℝ[4], s : f64) -> ℝ[4] =\n  x ^ s\n",
         "E0408", "cannot raise a tensor ℝ[4] to the power f64", "main.psk:2:3",
         hint="a natural literal, a nat const or a tensor"),
    case("stack-step-type",
         'import "lin.psk" as lin\n'
         "module Widen {\n"
         "  use proj : lin.Linear{4, 8}\n"
         "  fn apply(x : ℝ[..., 4]) -> ℝ[..., 8] = proj.apply(x)\n"
         "}\n"
         "module Deep {\n"
         "  use blocks : stack{2}(Widen)\n"
         "  fn apply(x : ℝ[..., 4]) -> ℝ[..., 4] = blocks.apply(x)\n"
         "}\n",
         "E0409", "a stack's step must return its argument's type", "main.psk:8:42",
         files={"lin.psk": LINEAR}),
    # ---- gradients ----
    case("grad-not-applied", "fn h(x : ℝ[a: 3]) -> ℝ[] = sum(x)\n"
         "fn g(x : ℝ[a: 3]) -> ℝ[] = grad(h)\n",
         "E0410", "`grad(f)` is a function: apply it", "main.psk:2:28"),
    case("grad-of-non-scalar", "fn h(x : ℝ[a: 3]) -> ℝ[a: 3] = x\n"
         "fn g(x : ℝ[a: 3]) -> ℝ[a: 3] = grad(h)(x)\n",
         "E0410", "`h` returns ℝ[a: 3]; a gradient is taken of a function returning ℝ[]",
         "main.psk:2:37"),
    case("grad-wrt-f64", "fn h(e : f64, x : ℝ[a: 3]) -> ℝ[] = sum(x)\n"
         "fn g(x : ℝ[a: 3]) -> ℝ[] = grad(h)(1.0, x)\n",
         "E0410", "`h`'s first argument is f64", "main.psk:2:28"),
    case("apply-not-a-gradient", "fn h(x : ℝ[a: 3]) -> ℝ[] = sum(x)\n"
         "fn g(x : ℝ[a: 3]) -> ℝ[] = h(x)(x)\n",
         "E0410", "only `grad(f)` and `value_and_grad(f)` are applied", "main.psk:2:28"),
    case("grad-keyword", "fn h(x : ℝ[a: 3]) -> ℝ[] = sum(x)\n"
         "fn g(x : ℝ[a: 3]) -> ℝ[a: 3] = grad(x = h)(x)\n",
         "E0410", "`grad` takes one function by name", "main.psk:2:32"),
    case("grad-of-builtin", "fn g(x : ℝ[a: 3]) -> ℝ[a: 3] = grad(sum)(x)\n",
         "E0410", "not the builtin `sum`", "main.psk:1:37"),
    case("let-hiding-a-builtin", "fn g(x : ℝ[a: 3]) -> ℝ[] =\n  let sum = x\n  sum(sum)\n",
         "E0206", "`sum` is a tensor ℝ[a: 3] here, not a function", "main.psk:3:3"),
    # ---- optimizers ----
    case("optimizer-unknown", train("optimizer adamw {", "optimizer adam {"),
         "E0501", "unknown optimizer `adam`", "main.psk:9:11", hint="did you mean `adamw`?"),
    case("optimizer-unknown-field", train("lr : f64", "learning_rate : f64"),
         "E0501", "`adamw` has no field `learning_rate`", "main.psk:10:3",
         hint="its fields: lr, beta1, beta2, eps, weight_decay, schedule"),
    case("optimizer-field-type", train("lr : f64 = 0.01", "lr : nat = 1"),
         "E0502", "`lr` is an f64, written `lr : f64 = …`", "main.psk:10:3"),
    case("optimizer-unknown-schedule",
         train("lr : f64 = 0.01", "schedule : cosin(warmup = 20)"),
         "E0503", "unknown schedule `cosin`", "main.psk:10:3", hint="cosine(warmup = N)"),
    # A hyperparameter the optimizer refuses (E0504): one case per rule, the caret under
    # the value; the message is presk/train/optim.py's (test_optimizer_diagnostics.py).
    case("optimizer-lr-negative", train("lr : f64 = 0.01", "lr : f64 = -0.1"),
         "E0504", "the learning rate must be ≥ 0, not -0.1", "main.psk:10:14",
         caret="   |              ^^^^"),
    case("optimizer-beta1-one", train("lr : f64 = 0.01", "beta1 : f64 = 1"),
         "E0504", "beta1 must be in [0, 1), not 1.0", "main.psk:10:17",
         caret="   |                 ^", hint="the bias correction 1 − beta1^t"),
    case("optimizer-beta1-negative", train("lr : f64 = 0.01", "beta1 : f64 = -0.5"),
         "E0504", "beta1 must be in [0, 1), not -0.5", "main.psk:10:17",
         caret="   |                 ^^^^"),
    case("optimizer-beta2-one", train("lr : f64 = 0.01", "beta2 : f64 = 1.0"),
         "E0504", "beta2 must be in [0, 1), not 1.0", "main.psk:10:17",
         caret="   |                 ^^^", hint="the bias correction 1 − beta2^t"),
    case("optimizer-eps-zero", train("lr : f64 = 0.01", "eps : f64 = 0.0"),
         "E0504", "eps must be > 0, not 0.0", "main.psk:10:15",
         caret="   |               ^^^", hint="torch.optim.AdamW accepts 0"),
    case("optimizer-adamw-weight-decay-negative",
         train("lr : f64 = 0.01", "weight_decay : f64 = -1e-2"),
         "E0504", "weight_decay must be ≥ 0, not -0.01", "main.psk:10:24",
         caret="   |                        ^^^^^"),
    case("optimizer-sgd-momentum-negative", sgd("momentum : f64 = -0.9"),
         "E0504", "momentum must be ≥ 0, not -0.9", "main.psk:10:20",
         caret="   |                    ^^^^"),
    case("optimizer-sgd-dampening-above-one", sgd("dampening : f64 = 1.5"),
         "E0504", "dampening must be in [0, 1], not 1.5", "main.psk:10:21",
         caret="   |                     ^^^", hint="torch.optim.SGD does not check dampening"),
    case("optimizer-sgd-dampening-negative", sgd("dampening : f64 = 0 - 0.25"),
         "E0504", "dampening must be in [0, 1], not -0.25", "main.psk:10:21",
         caret="   |                     ^^^^^^^^"),
    case("optimizer-sgd-weight-decay-negative", sgd("weight_decay : f64 = -0.5"),
         "E0504", "weight_decay must be ≥ 0, not -0.5", "main.psk:10:24",
         caret="   |                        ^^^^"),
    case("optimizer-value-not-finite", train("lr : f64 = 0.01", "lr : f64 = 1e308 * 10"),
         "E0605", "the value is out of the range of an f64 (inf)", "main.psk:10:14",
         caret="   |              ^^^^^^^^^^"),
    case("optimizer-warmup-negative",
         train("lr : f64 = 0.01", "schedule : linear(warmup = -3)"),
         "E0503", "`warmup` counts steps: a natural, not -3", "main.psk:10:30",
         caret="   |                              ^^"),
    # ---- training runs ----
    case("training-unknown-item", train("epochs    : nat = 2", "epoch     : nat = 2"),
         "E0601", "unknown training item `epoch`", "main.psk:17:3", hint="did you mean `epochs`?"),
    case("training-missing-item", train("  epochs    : nat = 2\n", ""),
         "E0601", "training `run` has no `epochs`", "main.psk:12:10"),
    case("training-objective-type",
         train("  mean((Lin.apply(θ, x) - y)^2)", "  mean(axis model, (Lin.apply(θ, x) - y)^2)")
         .replace("-> ℝ[] =", "-> ℝ[batch: B] ="),
         "E0602", "the objective `loss` must return ℝ[], not ℝ[batch: B]", "main.psk:14:3"),
    case("training-batch-not-a-dim", train("batch(B = 8)", "batch(N = 8)"),
         "E0603", "`batch(N = …)` binds `N`, which is not a dim", "main.psk:16:45"),
    case("training-data-missing", train('"pairs.psk.d"', '"missing.psk.d"'),
         "E0603", "missing.psk.d", "main.psk:16:22",
         caret="   |                      ^^^^^^^^^^^^^^^"),
    case("training-data-sample-type", train('"pairs.psk.d"', '"wide.psk.d"'),
         "E0603", "`wide.psk.d` holds samples of type (ℝ[model: 5], ℝ[model: 5])",
         "main.psk:16:22"),
    case("optimizer-field-twice", train("lr : f64 = 0.01", "lr : f64 = 0.01\n  lr : f64 = 0.02"),
         "E0501", "field `lr` is set twice", "main.psk:11:3"),
    case("optimizer-schedule-argument",
         train("lr : f64 = 0.01", "schedule : cosine(period = 20)"),
         "E0503", "`cosine` takes no argument `period`", "main.psk:10:21"),
    case("training-epochs-not-nat", train("epochs    : nat = 2", "epochs    : f64 = 2.0"),
         "E0601", "`epochs` is a nat, written `epochs : nat = …`", "main.psk:17:3"),
    case("training-checkpoint-every-0",
         train("  epochs    : nat = 2\n", '  epochs    : nat = 2\n  checkpoint every 0 steps to "c/"\n'),
         "E0601", "a checkpoint every 0 steps", "main.psk:18:3"),
    case("training-seed-fraction", train("|> batch", "|> shuffle(seed = 1.5) |> batch"),
         "E0603", "a seed is a natural, not 1.5", "main.psk:16:54"),
    case("training-unknown-stage", train("|> batch", "|> shufle(seed = 1) |> batch"),
         "E0603", "unknown stream stage `shufle`", "main.psk:16:39",
         hint="shuffle(seed = N), batch(DIM = N)"),
    case("training-unknown-objective", train("objective = loss", "objective = los"),
         "E0205", "unknown function `los`", "main.psk:14:15", hint="did you mean `loss`?"),
    case("training-batch-two-dims", train("batch(B = 8)", "batch(B = 8, C = 2)"),
         "E0603", "`batch` binds one dim, given 2", "main.psk:16:39"),
    case("training-two-batch-stages", train("batch(B = 8)", "batch(B = 8) |> batch(B = 4)"),
         "E0603", "the stream has two `batch` stages", "main.psk:16:55"),
    case("training-shuffle-argument", train("|> batch", "|> shuffle(sed = 3) |> batch"),
         "E0603", "`shuffle` takes only `seed = N`", "main.psk:16:39"),
    case("training-data-sample-unreadable", train('"pairs.psk.d"', '"odd.psk.d"'),
         "E0603", "odd.psk.d:2: the sample type `(ℝ[model: 4])` does not read: unexpected `)`",
         "main.psk:16:22", hint="expected `,`",
         files={"odd.psk.d": "presk-data/1\nsample: (ℝ[model: 4])\ndtype: f64\ncount: 0\nend\n"}),
    # ---- static assertions ----
    case("assertion-fails", "const D : nat = 4\nassert D == 5\n",
         "E0604", "static assertion fails: D == 5", "main.psk:2:1",
         caret="  | ^^^^^^^^^^^^^"),
    case("const-not-static", "dim B\nconst D : nat = B + 1\n",
         "E0605", "`B` is a dim, unbound here", "main.psk:2:17"),
    case("const-used-before-its-declaration", "const A : nat = B + 1\nconst B : nat = 1\n",
         "E0204", "unknown const `B`", "main.psk:1:17",
         hint="`B` is declared at line 2: a const uses the consts declared before it"),
    case("const-division-by-zero", "const N : nat = 4\nconst D : nat = N / (N - 4)\n",
         "E0605", "division by zero", "main.psk:2:17"),
    # ---- more of the same kinds, at other places ----
    case("bad-default", "fn f(x : ℝ[4] = 1) -> ℝ[4] = x\n",
         "E0307", "only an f64 or a nat parameter has a default", "main.psk:1:17"),
    case("bad-nat-default", "fn f(x : ℝ[4], n : nat = 2.5) -> ℝ[4] = x\n",
         "E0307", "`n : nat` cannot default to 2.5", "main.psk:1:26"),
    case("unknown-scalar-type", "fn f(x : int) -> ℝ[] = x\n",
         "E0302", "unknown type `int`", "main.psk:1:10"),
    case("unknown-import-alias",
         'import "lin.psk" as lin\nmodule M {\n  use l : lni.Linear{4, 4}\n}\n',
         "E0203", "unknown import `lni` in `lni.Linear`", "main.psk:3:11",
         hint="did you mean `lin`?", files={"lin.psk": LINEAR}),
    case("duplicate-dim-parameter", "module M{D D : dim} {\n}\n",
         "E0201", "dim `D` is declared twice", "main.psk:1:12"),
    case("duplicate-fn-parameter", "fn f(x : ℝ[], x : ℝ[]) -> ℝ[] = x\n",
         "E0201", "parameter `x` is declared twice", "main.psk:1:15"),
    case("unknown-field",
         'import "lin.psk" as lin\n'
         "fn f(θ : params lin.Linear{4, 4}) -> ℝ[4] =\n"
         "  θ.bias\n",
         "E0204", "`Linear{4, 4}` has no field `bias`", "main.psk:3:3",
         hint="its fields: w, b", files={"lin.psk": LINEAR}),
    case("unknown-field-close",
         'import "lin.psk" as lin\n'
         "fn f(θ : params lin.Linear{4, 4}) -> ℝ[4] =\n"
         "  θ.bb\n",
         "E0204", "`Linear{4, 4}` has no field `bb`", "main.psk:3:3",
         hint="did you mean `b`?", files={"lin.psk": LINEAR}),
    case("field-of-a-tensor", "fn f(x : ℝ[4]) -> ℝ[4] =\n  x.w\n",
         "E0206", "`x` is a tensor ℝ[4], which has no field `w`", "main.psk:2:3"),
    case("too-many-arguments", "fn g(x : ℝ[]) -> ℝ[] = x\nfn f(x : ℝ[]) -> ℝ[] = g(x, x, x)\n",
         "E0405", "`g` takes 1 argument (x), given 3", "main.psk:2:29"),
    case("axis-to-a-function", "fn g(x : ℝ[a: 2]) -> ℝ[a: 2] = x\n"
         "fn f(x : ℝ[a: 2]) -> ℝ[a: 2] = g(axis a, x)\n",
         "E0405", "`g` takes no `axis`", "main.psk:2:34"),
    case("builtin-of-f64", "fn f(s : f64) -> ℝ[] =\n  exp(s)\n",
         "E0407", "`exp` applies to a tensor, not f64", "main.psk:2:7", hint="real(…)"),
    case("real-of-tensor", "fn f(x : ℝ[]) -> ℝ[] =\n  real(x)\n",
         "E0407", "`real` converts an f64 or a nat, not a tensor ℝ[]", "main.psk:2:8"),
    case("modulo-of-tensors", "fn f(x : ℝ[4]) -> ℝ[4] =\n  x % x\n",
         "E0402", "`%` applies to naturals, not tensors", "main.psk:2:3"),
    case("contraction-sizes", "fn f(x : ℝ[3, 4], w : ℝ[5, 2]) -> ℝ[3, 2] =\n  x · w\n",
         "E0401", "axis sizes 4 and 5 differ", "main.psk:2:3"),
    case("ascii-contraction-sizes", "fn f(x : R[3, 4], w : R[5, 2]) -> R[3, 2] =\n  x @ w\n",
         "E0401", "axis sizes 4 and 5 differ in ℝ[3, 4] and ℝ[5, 2]", "main.psk:2:3"),
    case("fraction-for-a-nat",
         "fn h(x : ℝ[], n : nat = 2) -> ℝ[] = x\nfn g(x : ℝ[]) -> ℝ[] = h(x, 2.5)\n",
         "E0407", "argument `n` of `h` is nat, given 2.5, not a natural", "main.psk:2:29"),
    case("literal-out-of-range", "fn g(x : ℝ[]) -> ℝ[] =\n  x * 1e309\n",
         "E0605", "the number is out of the range of an f64", "main.psk:2:7"),
    case("axis-name-twice", "fn f(x : ℝ[a: 2, 2]) -> ℝ[a: 2, a: 2] =\n  x\n",
         "E0308", "the axis name `a` appears twice", "main.psk:1:33", caret="  |" + " " * 33 + "^^^^"),
    case("axis-name-twice-computed",
         "fn f(x : ℝ[a: 2, 2], y : ℝ[2, a: 2]) -> ℝ[] =\n  let z = x + y\n  sum(z)\n",
         "E0401", "the result, ℝ[a: 2, a: 2], would have the axis `a` twice", "main.psk:2:11",
         hint="name the axes apart"),
    case("axis-name-twice-through-a-call",
         "fn g(x : ℝ[..., a: 2]) -> ℝ[..., a: 2] = x\n"
         "fn f(x : ℝ[a: 2, 2]) -> ℝ[] =\n  sum(g(x))\n",
         "E0401", "would have the axis `a` twice", "main.psk:3:7"),
    case("power-of-tuple", "fn f(p : (ℝ[], ℝ[])) -> ℝ[] =\n  p ^ 2\n",
         "E0408", "cannot raise (ℝ[], ℝ[]) to a power", "main.psk:2:3"),
    case("field-of-a-use-without-theta",
         'import "lin.psk" as lin\nmodule M {\n  use l : lin.Linear{4, 4}\n'
         "  fn apply(x : ℝ[4]) -> ℝ[4] = l.b\n}\n",
         "E0204", "unknown name `l.b`", "main.psk:4:32", hint="read through θ: `θ.l.b`",
         files={"lin.psk": LINEAR}),
    case("field-of-a-parameter", "module M {\n  param w : ℝ[4] init = zeros\n"
         "  fn apply(x : ℝ[4]) -> ℝ[4] = w.b\n}\n",
         "E0206", "`w` is a tensor ℝ[4], which has no field `b`", "main.psk:3:32"),
    case("function-of-a-parameter", "module M {\n  param p : ℝ[4] init = zeros\n"
         "  fn apply(x : ℝ[4]) -> ℝ[4] = p.apply(x)\n}\n",
         "E0206", "`p` is a parameter, ℝ[4], not a sub-module", "main.psk:3:32"),
    case("function-of-a-tree",
         'import "lin.psk" as lin\nfn f(θ : params lin.Linear{4, 4}, x : ℝ[4]) -> ℝ[4] =\n'
         "  θ.apply(x)\n",
         "E0206", "`θ` is params Linear{4, 4}, which has no functions", "main.psk:3:3",
         hint="`Linear.apply(θ, …)`", files={"lin.psk": LINEAR}),
    case("stack-with-axis",
         'import "lin.psk" as lin\nmodule S {\n  use s : stack{2}(lin.Linear{4, 4})\n'
         "  fn apply(x : ℝ[..., 4]) -> ℝ[..., 4] = s.apply(axis q)\n}\n",
         "E0405", "`s.apply` takes its one argument by position", "main.psk:4:50",
         files={"lin.psk": LINEAR}),
    case("stack-with-two-arguments",
         'import "lin.psk" as lin\nmodule S {\n  use s : stack{2}(lin.Linear{4, 4})\n'
         "  fn apply(x : ℝ[..., 4]) -> ℝ[..., 4] = s.apply(x, x)\n}\n",
         "E0405", "`s.apply` takes 1 argument, given 2", "main.psk:4:42",
         files={"lin.psk": LINEAR}),
    # ---- regressions: each of these once gave a traceback or a wrong place ----
    case("static-overflow", "const X : f64 = 10.0 ^ 400\n",
         "E0605", "the value is too large", "main.psk:1:17"),
    case("static-complex", "const X : f64 = (0 - 8) ^ 0.5\n",
         "E0605", "-8 ^ 0.5 is not a real number", "main.psk:1:17"),
    case("static-infinite", "const X : nat = 1e400\n",
         "E0605", "out of the range of an f64", "main.psk:1:17"),
    case("literal-too-long", "const X : nat = " + "9" * 5000 + "\n",
         "E0605", "the number is too large", "main.psk:1:17"),
    case("size-too-long", "fn f(x : ℝ[" + "9" * 5000 + "]) -> ℝ[] = sum(x)\n",
         "E0308", "is not a size: a size is at most 2^62", "main.psk:1:12"),
    case("size-superscript-digit", "fn f(x : ℝ[²]) -> ℝ[] = sum(x)\n",
         "E0202", "unknown dim or const `²`", "main.psk:1:12"),
    case("reserved-word-as-name", "fn let(x : ℝ[]) -> ℝ[] = x\n",
         "E0006", "`let` is a reserved word; it cannot be a name", "main.psk:1:4",
         caret="  |    ^^^", hint="rename it, e.g. `let_`"),
    case("nesting-too-deep", "fn f(x : ℝ[]) -> ℝ[] =\n  x" + " + x" * 5000 + "\n",
         "E0005", "the expression nests more than 150 levels deep", "main.psk:2:3",
         hint="split it with `let`"),
    case("calls-nested-too-deep", "fn f(x : ℝ[]) -> ℝ[] =\n  " + "exp(" * 300 + "x" + ")" * 300
         + "\n", "E0005", "the expression nests more than 150 levels deep", "main.psk:2:295"),
    case("function-chain-too-long",
         "".join(f"fn f{i}(x : ℝ[]) -> ℝ[] = f{i + 1}(x)\n" for i in range(300))
         + "fn f300(x : ℝ[]) -> ℝ[] = x\n",
         "E0005", "calls nest more than 64 functions deep: f0 → f1 → … → f64 → …",
         "main.psk:64:26"),
    case("module-chain-too-long",
         "".join(f"module M{i} {{\n  use u : M{i + 1}\n}}\n" for i in range(1000))
         + "module M1000 {\n  param w : ℝ[2] init = zeros\n}\n",
         "E0005", "modules nest more than 64 deep: M0 → M1 → … → M64 → …", "main.psk:193:8"),
    case("import-chain-too-long", 'import "i1.psk" as m\n',
         "E0005", "imports nest more than 64 files deep: main.psk → i1.psk → … → i63.psk → "
         "i64.psk", "i63.psk:1:8",
         files={f"i{i}.psk": f'import "i{i + 1}.psk" as m\n' for i in range(1, 100)}),
    case("syntax-hint-is-exact", "dim B ]\n",
         "E0001", "unexpected `]`", "main.psk:1:7",
         hint="expected `assert`, `const`, `dim`, `fn`, `import`, `module`, `optimizer`, "
         "`training`, a name or the end of the file"),
    case("line-separator-in-comment", "-- a\u2028b\fc\nfn f(x : ℝ[]) -> ℝ[] = y\n",
         "E0204", "unknown name `y`", "main.psk:2:24", source="2 | fn f(x : ℝ[]) -> ℝ[] = y"),
    case("import-path-nul", 'import "a\0b.psk" as a\ndim B\n',
         "E0101", "an import path cannot hold a NUL character", "main.psk:1:8",
         source='1 | import "a\ufffdb.psk" as a'),
    case("data-path-nul", train('"pairs.psk.d"', '"pa\0irs.psk.d"'),
         "E0603", "a data path cannot hold a NUL character", "main.psk:16:22"),
    case("control-character", "dim B\x0b\n",
         "E0001", "unexpected character U+000B", "main.psk:1:6", source="1 | dim B\ufffd"),
    case("right-to-left-override-in-excerpt", "-- \u202e\nfn f(x : ℝ[]) -> ℝ[] = z -- \u202e x\n",
         "E0204", "unknown name `z`", "main.psk:2:24",
         source="2 | fn f(x : ℝ[]) -> ℝ[] = z -- \ufffd x"),
    case("softmax-unknown-axis", "fn f(x : ℝ[a: 4]) -> ℝ[a: 4] =\n  softmax(axis b, x)\n",
         "E0404", "ℝ[a: 4] has no axis `b`", "main.psk:2:11", hint="its axes are named: a"),
    case("hyperparameter-arithmetic", "fn f(x : ℝ[], s : f64) -> ℝ[] =\n  x * real(s * 2)\n",
         "E0402", "arithmetic on f64 and nat is static only", "main.psk:2:12",
         hint="compute in ℝ: real(s) * …"),
    case("hyperparameter-modulo", "fn f(x : ℝ[], n : nat) -> ℝ[] =\n  x * real(n % 2)\n",
         "E0402", "`%` on a hyperparameter argument", "main.psk:2:12"),
    case("crlf-line-endings", "dim B\r\nfn f(x : ℝ[]) -> ℝ[] =\r\n  y\r\n",
         "E0204", "unknown name `y`", "main.psk:3:3", source="3 |   y", caret="  |   ^"),
    case("tab-before-the-span", "fn f(x : ℝ[]) -> ℝ[] =\n\tx +\tq\n",
         "E0204", "unknown name `q`", "main.psk:2:6", source="2 |  x + q", caret="  |      ^"),
    case("invalid-utf8-after-bom", b"\xef\xbb\xbfdim B \xff\n",
         "E0002", "byte 0xff at offset 9", "main.psk:1:7", source="1 | dim B \ufffd"),
]


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_mistake(c: Case, workdir: Path, capsys) -> None:
    write(workdir, c.files)
    pairs(workdir / "pairs.psk.d")
    pairs(workdir / "wide.psk.d", width=5)
    rc, out, err = run(capsys, "check", "main.psk")
    assert rc == 1, err
    assert out == ""
    assert "Traceback" not in err
    lines = err.split("\n")[:-1]  # not splitlines: it would break at U+2028 and others
    head = re.fullmatch(r"(\S+:\d+:\d+): error\[(E\d{4})\]: (.*)", lines[0])
    assert head, lines[0]
    where, code, message = head.groups()
    assert (where, code) == (c.where, c.code), lines[0]
    assert c.message in message
    # The source line and the caret under the span.
    line_no = int(c.where.split(":")[-2])
    assert lines[1].startswith(f"{line_no} | ")
    col = int(c.where.split(":")[-1])
    gutter = " " * len(str(line_no))
    assert re.fullmatch(rf"{gutter} \| {' ' * (col - 1)}\^+", lines[2]), lines[2]
    if c.source is not None:
        assert lines[1] == c.source
    if c.caret is not None:
        assert lines[2] == c.caret
    # A hint and a note stand with their `=` under the excerpt's `|`.
    pad = " " * (len(gutter) + 1)
    hints = [x for x in lines[3:] if x.startswith(f"{pad}= hint: ")]
    notes = [x for x in lines[3:] if x.startswith(f"{pad}= note: ")]
    assert len(lines) == 3 + len(hints) + len(notes), err
    if c.hint is not None:
        assert len(hints) == 1 and c.hint in hints[0], err
    if c.note is not None:
        assert any(c.note in x for x in notes), err


def test_cases_are_distinct_and_cover_the_codes() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({(c.code, c.message, c.where) for c in CASES}) == len(CASES)
    assert len(CASES) >= 35
    # Every error code but "a file cannot be read" (E0004: permissions) has a case.
    errors = {k for k in CODES if k.startswith("E")} - {"E0004"}
    assert errors <= {c.code for c in CASES}


# ---- warnings: exit code 0, the warning on stderr, the count on stdout ----------------

WARNINGS = [
    ("unused-let", "fn f(x : ℝ[4]) -> ℝ[4] =\n  let unused = x * 2\n  x\n",
     "main.psk:2:7", "`unused` is never used", "  |       ^^^^^^"),
    ("unused-tuple-name", "fn f(p : (ℝ[], ℝ[])) -> ℝ[] =\n  let (a, b) = p\n  a\n",
     "main.psk:2:11", "`b` is never used", "  |           ^"),
    ("shadowed-before-use", "fn f(x : ℝ[]) -> ℝ[] =\n  let y = x\n  let y = x * 2\n  y\n",
     "main.psk:2:7", "`y` is never used", "  |       ^"),
]


@pytest.mark.parametrize("program, where, message, caret", [w[1:] for w in WARNINGS],
                         ids=[w[0] for w in WARNINGS])
def test_warning(program: str, where: str, message: str, caret: str, workdir: Path,
                 capsys) -> None:
    write(workdir, {"main.psk": program})
    rc, out, err = run(capsys, "check", "main.psk")
    assert rc == 0
    assert out == "Diagnostics: 0 errors, 1 warning\n"
    lines = err.splitlines()
    assert lines[0] == f"{where}: warning[W0001]: {message}"
    assert lines[2] == caret
    assert lines[3] == "  = hint: remove the let, or use it"
    assert len(lines) == 4


def test_two_warnings_are_counted(workdir: Path, capsys) -> None:
    write(workdir, {"main.psk": "fn f(x : ℝ[]) -> ℝ[] =\n  let a = x\n  let b = x\n  x\n"})
    rc, out, err = run(capsys, "check", "main.psk")
    assert rc == 0
    assert out == "Diagnostics: 0 errors, 2 warnings\n"
    assert err.count("warning[W0001]") == 2


# ---- the command line: one line on stderr, exit code 2 -------------------------------

def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "usage:" not in err and "Traceback" not in err
    return err.rstrip("\n")


def test_missing_main_file(workdir: Path, capsys) -> None:
    rc, out, err = run(capsys, "check", "nothere.psk")
    assert (rc, out) == (2, "")
    assert one_line(err) == "presk: nothere.psk: does not exist"


def test_directory_as_main_file(workdir: Path, capsys) -> None:
    (workdir / "models").mkdir()
    rc, out, err = run(capsys, "check", "models")
    assert (rc, out) == (2, "")
    assert one_line(err) == "presk: models: is a directory, not a file"


def test_unknown_flag(workdir: Path, capsys) -> None:
    write(workdir, {"main.psk": "dim B\n"})
    rc, out, err = run(capsys, "check", "--frobnicate", "main.psk")
    assert (rc, out) == (2, "")
    assert "unrecognized arguments: --frobnicate" in one_line(err)


def test_unknown_command(workdir: Path, capsys) -> None:
    rc, out, err = run(capsys, "chekc", "main.psk")
    assert (rc, out) == (2, "")
    assert "invalid choice: 'chekc'" in one_line(err)


def test_check_without_a_file(workdir: Path, capsys) -> None:
    rc, out, err = run(capsys, "check")
    assert (rc, out) == (2, "")
    assert "required: file" in one_line(err)


def test_dump_without_stage(workdir: Path, capsys) -> None:
    write(workdir, {"main.psk": "dim B\n"})
    rc, out, err = run(capsys, "dump", "main.psk")
    assert (rc, out) == (2, "")
    assert "--stage" in one_line(err)


def test_dump_with_an_unknown_stage(workdir: Path, capsys) -> None:
    write(workdir, {"main.psk": "dim B\n"})
    rc, out, err = run(capsys, "dump", "main.psk", "--stage", "nonsense")
    assert (rc, out) == (2, "")
    assert "invalid choice: 'nonsense'" in one_line(err)


def test_dump_reports_a_mistake_like_check(workdir: Path, capsys) -> None:
    write(workdir, {"main.psk": "fn f(x : ℝ[]) -> ℝ[] = y\n"})
    rc, out, err = run(capsys, "dump", "main.psk", "--stage", "elab")
    assert (rc, out) == (1, "")
    assert err.startswith("main.psk:1:24: error[E0204]: unknown name `y`\n")


# ---- regressions that are not mistakes --------------------------------------------------

def test_one_file_imported_under_two_spellings(tmp_path: Path, monkeypatch, capsys) -> None:
    """`lib.psk` and `./lib.psk` (or a symlink) are one file: it once raised KeyError
    when the main file lay above the working directory."""
    write(tmp_path, {"app/lib.psk": LINEAR,
                     "app/main.psk": 'import "lib.psk" as a\nimport "./lib.psk" as b\n'
                     'import "link.psk" as c\ndim B\n'})
    (tmp_path / "app" / "link.psk").symlink_to("lib.psk")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    rc, out, err = run(capsys, "check", "../app/main.psk")
    assert (rc, out, err) == (0, "Diagnostics: none\n", "")


def test_import_cycle_above_the_working_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    """The cycle once named some files by their absolute real path, some relatively."""
    write(tmp_path, {"app/a.psk": 'import "b.psk" as b\ndim A\n',
                     "app/b.psk": 'import "a.psk" as a\ndim B\n'})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    rc, out, err = run(capsys, "check", "../app/a.psk")
    assert rc == 1
    assert err.splitlines()[0] == ("../app/b.psk:1:8: error[E0102]: import cycle: "
                                   "../app/a.psk → ../app/b.psk → ../app/a.psk")


def test_a_long_sum_within_the_nesting_limit(workdir: Path, capsys) -> None:
    write(workdir, {"main.psk": "fn f(x : ℝ[]) -> ℝ[] =\n  x" + " + x" * 140 + "\n"})
    assert run(capsys, "check", "main.psk") == (0, "Diagnostics: none\n", "")


def test_deep_expressions_in_a_chain_of_calls(workdir: Path, capsys) -> None:
    """Each limit holds, but together they exceed Python's recursion limit: the error is
    at the function being checked when it was reached (which one depends on the stack the
    caller already uses)."""
    write(workdir, {"main.psk": "".join(f"fn f{i}(x : ℝ[]) -> ℝ[] =\n  f{i + 1}(x)"
                                        + " + x" * 140 + "\n" for i in range(20))
                    + "fn f20(x : ℝ[]) -> ℝ[] = x\n"})
    rc, out, err = run(capsys, "check", "main.psk")
    assert (rc, out) == (1, "")
    lines = err.split("\n")
    head = re.fullmatch(r"main\.psk:(\d+):4: error\[E0005\]: the program nests too deeply to "
                        r"check: calls f0 → f1 → .*f(\d+), each deep inside an expression",
                        lines[0])
    assert head, lines[0]
    assert lines[1] == f"{head[1]} | fn f{head[2]}(x : ℝ[]) -> ℝ[] ="
    assert lines[3].strip() == "= hint: split the expressions with `let`"
