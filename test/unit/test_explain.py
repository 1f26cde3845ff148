"""`presk explain`: the document's sections, its figures beside the reference's, its
artifacts' checksums and C check, every appendix command's output found verbatim in it, the
golden copy in docs/explain/ (`make explain`), honest degradation on other programs, and the
command's failures (one line and exit 2, or the program's diagnostic and exit 1)."""

from __future__ import annotations

import filecmp
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from programs import PRESK, ROOT

pytestmark = pytest.mark.early(1.26)  # CPU minutes (test/conftest.py)

TUTORIAL_ARGS = ["tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4", "--budget", "1e-3",
                 "--profile", "test/fixtures/profile-frozen.json", "--threads", "2",
                 "--target", "native,c,pytorch"]
"""`make explain`'s command line (the Makefile's `explain` target), run from the root."""

SECTIONS = ["## The parameters", "## §0 Summary", "## §1 The source", "## §2 Elaboration",
            "## §3 PSK-Core", "## §4 Differentiation", "## §5 The e-graph optimizer",
            "## §6 Precision", "### §6.1 The envelope", "### §6.2 The sensitivities",
            "### §6.3 The realization", "### §6.4 The bound and the measurement",
            "## §7 Fusion", "## §8 The machine and the layout plan",
            "## §9 The kernels and the host", "## §10 Targets", "## §11 Measured",
            "## §12 Sites through every stage", "## §13 Memory",
            "## Appendix: the commands"]


def sci(x: float) -> str:
    """`6.153e-1`: three digits, the exponent unpadded, as the document writes a figure."""
    mantissa, exponent = f"{x:.3e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def explain(out: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([PRESK, "explain", *args, "-o", str(out)], cwd=cwd,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "doc"
    r = explain(out, *TUTORIAL_ARGS)
    assert r.returncode == 0, r.stderr
    return out


def document(d: Path) -> str:
    return (d / "explain.md").read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = re.search(r"^##+ ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + (nxt.start() if nxt else len(text))]


def appendix(text: str) -> list[str]:
    block = section(text, "## Appendix: the commands")
    return re.search(r"```sh\n(.*?)\n```", block, re.S).group(1).split("\n")


@pytest.mark.slow
def test_every_section_in_order(tutorial):
    text = document(tutorial)
    at = [text.index(h) for h in SECTIONS]
    assert at == sorted(at)
    for h in SECTIONS[2:-1]:
        if h not in ("## §6 Precision", "## §12 Sites through every stage"):
            assert "```sh\npresk " in section(text, h) or "Not " in section(text, h), h
    assert "| |" not in text and "|  |" not in text  # no empty cell


@pytest.mark.slow
def test_figures_equal_the_references(tutorial):
    """The weight-independent figures of the reference, each where the reference has it."""
    text = document(tutorial)
    assert "4 tensors, 76 reals at these dimensions" in section(text, "## §2 Elaboration")
    assert "presk calibrate: 30 sites over 1 samples" in section(text, "### §6.1")
    assert "  sites       9 narrowable, 9 assigned away from f64 (11 stored values, 2 not " \
        "offered)" in section(text, "### §6.3")
    assert "Over one call, fusion takes 39 launches to 27" in section(text, "## §7 Fusion")
    kernels = section(text, "## §9")
    assert "-- 9 kernels, 27 launches" in kernels
    assert "-- fusion: 39 launches without it, 12 saved (31%)" in kernels
    memory = section(text, "## §13 Memory")
    assert "  needs       696 bytes: the inputs and the peak" in memory
    assert "  peak        48 · B, at operation 12 (`Block.apply/%8`)" in memory
    # Ours differs for a reason the document gives: the product's `add` is its epilogue.
    plan = section(text, "## §8")
    assert "-- 9 nests, " in plan
    assert "The reference's tutorial plan has 10 nests; ours has 9" in plan
    summary = section(text, "## §0 Summary")
    assert "| Fusion | 39 launches without it, 27 with it: 12 saved | decision | §7 |" in summary
    assert "| Kernels | 9 distinct, 27 launches a call | fact | §9 |" in summary
    assert "696 bytes a call: the inputs, 504 bytes, and the peak of live bytes, 192" in summary


@pytest.mark.slow
def test_summary_figures_are_the_sections(tutorial):
    """§0's measured gap and estimate are §6.3's, the cond bound §6.4's."""
    text = document(tutorial)
    solve = section(text, "### §6.3")
    measured = re.search(r"  measured    (\S+) against", solve).group(1)
    estimate = re.search(r"  estimate    (\S+) \(", solve).group(1)
    summary = section(text, "## §0 Summary")
    assert f"| Measured gap | {measured} against" in summary
    assert f"| Solver's estimate | {estimate}:" in summary
    cond = re.search(r"bound    cond\s+(\S+)", section(text, "### §6.4")).group(1)
    mantissa, exp = cond.split("e")
    assert f"| Bound, rule cond | {float(mantissa):.3f}e{exp}" in summary


@pytest.mark.slow
def test_artifacts_checksums_and_c_check(tutorial):
    arts = tutorial / "artifacts"
    listed = {ln.split("  ", 1)[1] for ln in (arts / "SHA256SUMS").read_text().splitlines()}
    on_disk = {str(p.relative_to(arts)) for p in arts.rglob("*") if p.is_file()}
    assert listed == on_disk - {"SHA256SUMS"}
    assert {"envelope.json", "realization.json", "plan.json", "profile.json"} <= listed
    r = subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=arts,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    c = tutorial.parent / "c-check"  # a copy: the build's files stay out of the fixture
    shutil.copytree(arts / "c", c)
    r = subprocess.run(["make", "-s", "-C", str(c), "check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    text = document(tutorial)
    for name in ("envelope.json", "realization.json", "plan.json"):
        digest = next(ln.split()[0] for ln in (arts / "SHA256SUMS").read_text().splitlines()
                      if ln.endswith("  " + name))
        assert f"`$DOC/artifacts/{name}` | computed in this run | {digest} |" in text


def run_appendix(doc: Path, cwd: Path) -> list[tuple[str, str]]:
    """Every appendix command, run by the shell from `cwd` with DOC set: (line, what it
    printed, `$DOC` for DOC's value). A command that fails must be one the document says
    did not run, with its first line of error."""
    copy = doc.parent / (doc.name + "-appendix")
    shutil.copytree(doc, copy)
    env = dict(os.environ, DOC=str(copy), PATH=f"{Path(PRESK).parent}:{os.environ['PATH']}")
    text = document(copy)
    out = []
    for line in appendix(text):
        r = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True,
                           text=True)
        if r.returncode != 0:
            first = next(ln for ln in r.stderr.splitlines() if ln.strip())
            assert f"Not run: {first.replace(str(copy), '$DOC')}" in text, (line, r.stderr)
            continue
        out.append((line, r.stdout.replace(str(copy), "$DOC").rstrip("\n")))
    return out


def holds(doc: Path, output: str) -> bool:
    """The output is in the document, or is one of its listings whole."""
    if output in document(doc):
        return True
    return any(p.read_text(encoding="utf-8") == output + "\n"
               for p in (doc / "listings").glob("*") if p.is_file())


@pytest.mark.slow
def test_every_appendix_command_prints_what_the_document_holds(tutorial):
    runs = run_appendix(tutorial, ROOT)
    assert len(runs) >= 15
    for line, output in runs:
        assert output, line
        assert holds(tutorial, output), line


@pytest.mark.slow
def test_the_golden_copy_is_current(tutorial):
    """docs/explain/ is `make explain`'s output: this run, byte for byte (and so two runs
    are the same: no time, no path of the machine)."""
    golden = ROOT / "docs" / "explain"
    assert (golden / "explain.md").exists(), "run `make explain`"
    cmp = filecmp.dircmp(golden, tutorial)
    diffs = _differences(cmp)
    assert not diffs, f"docs/explain/ is not current ({diffs[:5]}): run `make explain`"
    text = document(tutorial)
    assert str(tutorial) not in text and str(ROOT) not in text
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text)


def _differences(cmp: filecmp.dircmp) -> list[str]:
    out = [f"only in {cmp.left}: {n}" for n in cmp.left_only if n != "explain.pdf"]
    out += [f"only in {cmp.right}: {n}" for n in cmp.right_only]
    _, mismatch, errors = filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)
    out += [f"differs: {os.path.join(cmp.left, n)}" for n in mismatch + errors]
    for sub in cmp.subdirs.values():
        out += _differences(sub)
    return out


MADE_UP = """\
dim B
const D : nat = 3

module Lin {
  param w : ℝ[D, D]  init = xavier_uniform
  fn apply(x : ℝ[..., D]) -> ℝ[..., D] = tanh(x · w)
}

fn predict(θ : params Lin, x : ℝ[batch: B, 3]) -> ℝ[batch: B, 3] = Lin.apply(θ, x)
"""


def _honest(text: str) -> None:
    """Every section present; an absent step says `Not run`/`Not measured`, never an empty
    table."""
    at = [text.index(h) for h in SECTIONS]
    assert at == sorted(at)
    assert "| |" not in text
    for block in re.findall(r"```text\n(.*?)```", text, re.S):
        assert block.strip(), "an empty listing"


@pytest.mark.slow
def test_the_training_runs_loss_curve(tutorial, tmp_path):
    """§10 makes the training run and draws its loss: the log it keeps equals the run made
    by the Python-driven step (`--steps-per-call 0`, another path through the step), and the
    table's figures are the log's."""
    import csv
    log = (tutorial / "listings" / "train-log.csv").read_text(encoding="utf-8")
    r = subprocess.run([PRESK, "train", "tutorial/07_train.psk", "--quiet", "--steps-per-call",
                        "0", "--out", str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run" / "log.csv").read_text(encoding="utf-8") == log
    rows = list(csv.DictReader(log.splitlines()))
    losses = [float(x["loss"]) for x in rows]
    epochs: dict[str, list[float]] = {}
    for x in rows:
        epochs.setdefault(x["epoch"], []).append(float(x["loss"]))
    means = [sum(v) / len(v) for v in epochs.values()]
    targets = section(document(tutorial), "## §10 Targets")
    assert f"| steps | {len(rows)} |" in targets
    assert f"| epochs | {len(epochs)} |" in targets
    assert f"| loss at step {rows[-1]['step']} | {sci(losses[-1])} |" in targets
    assert f"| the last epoch's mean | {sci(means[-1])} |" in targets
    assert "](figures/loss.png)" in targets
    assert (tutorial / "figures" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_no_train_says_so(tmp_path):
    r = explain(tmp_path / "d", "tutorial/07_train.psk", "--entry", "loss", "--dim", "B=4",
                "--target", "pytorch", "--no-train")
    assert r.returncode == 0, r.stderr
    targets = section(document(tmp_path / "d"), "## §10 Targets")
    assert "Not run: `--no-train` (so no loss curve is drawn)." in targets
    assert not (tmp_path / "d" / "figures" / "loss.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["03_activations", "04_mlp", "05_stack"])
def test_other_tutorials_degrade_honestly(tmp_path, name):
    """No --budget, no --profile: §6.3 and §8 say they did not run and why; the rest is
    computed, and the appendix prints what the document holds."""
    out = tmp_path / "doc"
    r = explain(out, f"tutorial/{name}.psk", "--entry", "loss", "--dim", "B=2",
                "--target", "native,pytorch")
    assert r.returncode == 0, r.stderr
    text = document(out)
    _honest(text)
    assert "Not run: no `--budget` was given" in section(text, "### §6.3")
    assert "Not run: no `--profile` was given" in section(text, "## §8")
    assert "Not measured: `--measure` was not given" in section(text, "## §11")
    assert not (out / "artifacts" / "c").exists()
    for line, output in run_appendix(out, ROOT):
        assert holds(out, output), line


@pytest.mark.slow
def test_a_tensor_result_without_training(tmp_path):
    prog = tmp_path / "prog"
    prog.mkdir()
    (prog / "lin.psk").write_text(MADE_UP, encoding="utf-8")
    out = tmp_path / "doc"
    r = explain(out, "lin.psk", "--entry", "predict", "--dim", "B=2", "--budget", "1e-2",
                "--profile", str(ROOT / "test/fixtures/profile-frozen.json"),
                "--solve-price", "time", "--target", "c", cwd=prog)
    assert r.returncode == 0, r.stderr
    text = document(out)
    _honest(text)
    assert "No training step: `predict` is no training run's objective." in text
    assert "`predict` calls no `grad`" in text
    assert "a result of shape [2, 3]" in section(text, "### §6.2")
    for line, output in run_appendix(out, prog):
        assert holds(out, output), line


def test_bad_flags_are_one_line_and_exit_2(tmp_path):
    cases = [["--entry", "loss", "--target", "cuda"], ["--entry", "loss", "--budget", "2"],
             ["--entry", "loss", "--bits", "20"], ["--entry", "loss", "--dim", "B"],
             ["--entry", "loss", "--solve-price", "time"]]
    for extra in cases:
        r = explain(tmp_path / "d", "tutorial/07_train.psk", *extra)
        assert r.returncode == 2, (extra, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, (extra, r.stderr)
        assert not (tmp_path / "d").exists()


def test_refuses_a_directory_it_did_not_write(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    r = explain(tmp_path / "mine", "tutorial/07_train.psk", "--entry", "loss")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "refusing to replace it" in r.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_a_mistake_in_the_program_is_its_diagnostic(tmp_path):
    bad = tmp_path / "bad.psk"
    bad.write_text("fn f(x : ℝ[3]) -> ℝ[3] = x + y\n", encoding="utf-8")
    r = explain(tmp_path / "d", str(bad), "--entry", "f")
    assert r.returncode == 1, r.stderr
    assert re.search(r"bad\.psk:1:\d+: error\[E\d+\]", r.stderr), r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "d").exists()
    assert not list(tmp_path.glob(".d.explain-tmp*"))


def test_the_command_lines_quote_what_the_shell_would_split():
    from presk.cli.explain.run import Command
    c = Command(("solve", "my prog.psk", "--precision", "$DOC/artifacts/envelope.json",
                 "--realize", "@$DOC/artifacts/realization.json"))
    assert shlex.split(c.text().replace("$DOC", "/d")) == [
        "presk", "solve", "my prog.psk", "--precision", "/d/artifacts/envelope.json",
        "--realize", "@/d/artifacts/realization.json"]


@pytest.mark.slow
def test_pdf_pages_render_with_the_pictures(tmp_path):
    """--pdf: DIR/explain.pdf, its pages rendered by pdftoppm, the document's text and its
    pictures in it."""
    if not shutil.which("pdftoppm") or not shutil.which("pdftotext"):
        pytest.skip("poppler (pdftoppm, pdftotext) is not installed")
    out = tmp_path / "doc"
    r = explain(out, "tutorial/04_mlp.psk", "--entry", "loss", "--dim", "B=2", "--target",
                "native", "--pdf")
    assert r.returncode == 0, r.stderr
    pdf = out / "explain.pdf"
    r = subprocess.run(["pdftoppm", "-r", "20", "-png", str(pdf), str(tmp_path / "page")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    pages = list(tmp_path.glob("page*.png"))
    assert len(pages) >= 5
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True,
                          text=True).stdout
    assert "Sites through every stage" in text and "Appendix: the commands" in text
    pictures = list((out / "figures").glob("*.png"))
    assert pictures  # sensitivities and memory, drawn without a budget too
    if shutil.which("pdfimages"):
        listed = subprocess.run(["pdfimages", "-list", str(pdf)], capture_output=True,
                                text=True).stdout.strip().split("\n")[2:]
        assert len(listed) >= len(pictures)
