"""Fuzzing the frontend: whatever the input, `presk check` answers with exit code 0, 1 or 2
and never a Python traceback.

(a) The tutorial programs, mutated: characters, tokens or lines deleted, duplicated or
swapped, random Unicode inserted. The mutated file takes the place of one tutorial file
and `tutorial/07_train.psk`, which imports the others, or the file itself is checked.
(b) Random bytes as a file.

A diagnostic (exit code 1: main() raises SystemExit(1) after printing) must be well
formed: `file:line:col: error[Ennnn]: message` with a known code, then the source line
it names, quoted as the file holds it, and a caret within that line.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from presk.cli.main import main
from presk.frontend.diagnostics import CODES, source_lines

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_mutated_tutorial",
}


REPO = Path(__file__).resolve().parents[2]
NAMES = sorted(p.name for p in (REPO / "tutorial").glob("0*.psk"))
ORIGINAL = {name: (REPO / "tutorial" / name).read_text(encoding="utf-8") for name in NAMES}

HEADER = re.compile(r"(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): "
                    r"(?P<kind>error|warning)\[(?P<code>[EW]\d{4})\]: .+")
TOKEN = re.compile(r"\w+|\s+|.", re.S)
VOCABULARY = ["module", "fn", "param", "use", "import", "dim", "const", "assert", "stack",
              "params", "init", "=", "->", "→", ":", ",", "(", ")", "[", "]", "{", "}", "·",
              "@", "...", "…", "ℝ", "R", "^", "+", "-", "*", "/", "%", "|>", "axis", "model",
              "0", "1", "2.5", "1e400", "x", "θ", "f64", "nat", "training", "optimizer",
              '"', '"06_tower.psk"', "--", "\n", "\t", "relu", "mean", "real", "==", "and"]

# PRESK_FUZZ_EXAMPLES=20000 for a longer hunt; the default keeps the file within seconds.
FAST = settings(max_examples=int(os.environ.get("PRESK_FUZZ_EXAMPLES", 200)), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@pytest.fixture(scope="module")
def tutorial_copy(tmp_path_factory) -> Path:
    """A copy of the tutorial (its programs and data) that a test may overwrite."""
    root = tmp_path_factory.mktemp("tutorial")
    shutil.copytree(REPO / "tutorial", root, dirs_exist_ok=True)
    return root


def presk(*argv: str) -> tuple[int, str, str]:
    """`presk ARGV` in process; any exception but SystemExit escapes the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def check(path: Path) -> tuple[int, str, str]:
    """`presk check PATH`; when it passes, the summary and the elab dump must too."""
    rc, out, err = presk("check", str(path))
    if rc == 0:
        for argv in (("check", "--summary", str(path)), ("dump", str(path), "--stage", "elab")):
            more = presk(*argv)
            assert more[0] == 0 and more[2] == err, (argv, more)
    return rc, out, err


def visible(line: str) -> str:
    """What an excerpt shows of a line: control and format characters as U+FFFD."""
    return "".join("\ufffd" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
                   for c in line)


def assert_well_formed(rc, out: str, err: str) -> None:
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err and "Traceback" not in out
    if rc == 0:
        assert re.fullmatch(r"Diagnostics: (none|0 errors, \d+ warnings?)", out.splitlines()[-1])
        return
    if rc == 2:
        assert out == "" and err.count("\n") == 1, err
        return
    assert out == ""
    # Warnings may come first when elaboration stopped later; the error is the last item.
    lines = err.split("\n")
    headers = [(i, m) for i, x in enumerate(lines) if (m := HEADER.fullmatch(x))]
    assert headers and headers[-1][1]["kind"] == "error", err
    for i, m in headers:
        assert m["code"] in CODES, m["code"]
        path = Path(m["file"])  # as displayed: absolute, or relative to the working directory
        line, col = int(m["line"]), int(m["col"])
        text = source_lines(path.read_bytes().decode("utf-8", errors="replace")
                            .removeprefix("\ufeff"))
        assert 1 <= line <= len(text), (line, len(text), err)
        quoted = visible(text[line - 1].expandtabs(1))
        assert lines[i + 1] == f"{line} | {quoted}", err
        gutter = " " * len(str(line))
        caret = re.fullmatch(rf"{gutter} \| ( *)(\^+)", lines[i + 2])
        assert caret and len(caret[1]) == col - 1, err
        assert col - 1 <= len(quoted) + 1, err


# ---- (a) mutated tutorial programs -------------------------------------------------------

def mutate(data, text: str, names_only: bool = False) -> str:
    """Apply one to three random edits to `text`: on characters, tokens or lines, delete,
    duplicate, swap, insert or replace; on tokens also rename (a word of the file or of
    the language for a word). Renames alone mostly keep the syntax and reach elaboration."""
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        unit = "token" if names_only else \
            data.draw(st.sampled_from(["char", "token", "line"]), label="unit")
        if unit == "char":
            parts = list(text)
        elif unit == "token":
            parts = TOKEN.findall(text)
        else:
            parts = text.splitlines(keepends=True)
        if not parts:
            parts = [""]
        ops = ["delete", "duplicate", "swap", "insert", "replace"]
        op = "rename" if names_only else \
            data.draw(st.sampled_from(ops + ["rename"] if unit == "token" else ops), label="op")
        if op == "rename":
            words = [i for i, p in enumerate(parts) if re.fullmatch(r"\w+", p)]
            if words:
                i = data.draw(st.sampled_from(words), label="word")
                choices = sorted({parts[k] for k in words} | set(filter(str.isidentifier,
                                                                         VOCABULARY)))
                parts[i] = data.draw(st.sampled_from(choices), label="new word")
            text = "".join(parts)
            continue
        i = data.draw(st.integers(0, len(parts) - 1), label="at")
        j = data.draw(st.integers(i, min(len(parts), i + 8)), label="to")
        if op == "delete":
            del parts[i:j]
        elif op == "duplicate":
            parts[i:i] = parts[i:j]
        elif op == "swap":
            k = data.draw(st.integers(0, len(parts) - 1), label="with")
            parts[i], parts[k] = parts[k], parts[i]
        else:
            new = data.draw(st.one_of(st.sampled_from(VOCABULARY),
                                      st.text(min_size=1, max_size=4)), label="text")
            parts[i:j if op == "replace" else i] = [new]
        text = "".join(parts)
    return text


@FAST
@given(data=st.data())
def test_mutated_tutorial(tutorial_copy: Path, data) -> None:
    name = data.draw(st.sampled_from(NAMES), label="file")
    target = tutorial_copy / name
    text = ORIGINAL[name]
    if data.draw(st.booleans(), label="without comments"):  # so that more edits hit code
        text = re.sub(r"[ \t]*--[^\n]*", "", text)
    text = mutate(data, text, names_only=data.draw(st.booleans(), label="names only"))
    # 07_train.psk imports 06, which imports 01 and 02: check it, or the file itself.
    importers = [name, "07_train.psk"] if name[:2] in ("01", "02", "06") else [name]
    main_file = data.draw(st.sampled_from(importers), label="main")
    try:
        target.write_text(text, encoding="utf-8")
        rc, out, err = check(tutorial_copy / main_file)
        assert_well_formed(rc, out, err)
    finally:
        target.write_text(ORIGINAL[name], encoding="utf-8")


# ---- (b) random bytes ------------------------------------------------------------------

@FAST
@given(content=st.one_of(
    st.binary(max_size=200),
    st.text(max_size=200).map(str.encode),
    st.tuples(st.sampled_from(sorted(ORIGINAL.values())), st.binary(min_size=1, max_size=8),
              st.integers(0, 2000))
      .map(lambda t: t[0].encode()[:t[2]] + t[1] + t[0].encode()[t[2]:]),
))
def test_random_bytes(tmp_path_factory, content: bytes) -> None:
    path = tmp_path_factory.getbasetemp() / "random.psk"
    path.write_bytes(content)
    assert_well_formed(*check(path))
