"""The fuzzer (issue 14.9): mutated programs, MLIR, artifacts, data streams, flags and
environments through the commands that read them; every outcome must be one the README
promises (harness.py: ok, a diagnostic with exit 1, one line with exit 2) — no traceback,
no signal, no hang past the limit, nothing but regular files replaced.

`make test` runs a short pass (PRESK_FUZZ_SCALE=1, well under a minute); `make fuzz` a
long one (PRESK_FUZZ_SCALE=40: over 10 000 cases) and prints the counts per input kind
and outcome. Each test is one input kind; hypothesis draws the mutations.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import struct
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as H  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tutorial"
SCALE = float(os.environ.get("PRESK_FUZZ_SCALE", "1"))
LIMIT = 60.0


def examples(n: int) -> settings:
    # No shrinking: a bad case is recorded whole and the run goes on to count the rest.
    return settings(max_examples=max(1, int(n * SCALE)), deadline=None, database=None,
                    suppress_health_check=list(HealthCheck), derandomize=SCALE <= 1,
                    phases=[Phase.generate])


# ---- a scratch copy of the tutorial, the inputs every kind mutates ----

WORK = Path(tempfile.mkdtemp(prefix="presk-fuzz-"))
atexit.register(shutil.rmtree, WORK, True)
shutil.copytree(TUTORIAL, WORK / "tutorial")
PROGRAMS = sorted((WORK / "tutorial").glob("*.psk"))
ORIGINAL = {p: p.read_bytes() for p in PROGRAMS}
TRAIN = WORK / "tutorial" / "07_train.psk"
FIXTURE_REALIZATION = (ROOT / "test" / "fixtures" / "realization_mixed.json").read_text()
SPECIAL = WORK / "special"
SPECIAL.mkdir()
os.mkfifo(SPECIAL / "fifo")
(SPECIAL / "folder").mkdir()
SPECIALS = [SPECIAL / "fifo", SPECIAL / "folder", Path("/dev/null")]


def _presk(argv: list[str]) -> H.Outcome:
    from presk.cli import main
    return H.run_main(main.main, argv, LIMIT)


def _opt(argv: list[str]) -> H.Outcome:
    from presk.cli import opt
    return H.run_main(opt.main, argv, LIMIT)


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print("\npresk fuzz, outcomes per input kind:\n" + H.report())


# ---- mutations of text ----

VOCABULARY = ["fn", "let", "module", "param", "use", "stack", "import", "dim", "const",
              "init", "axis", "grad", "params", "(", ")", "[", "]", "{", "}", ",", ":",
              "=", "+", "-", "*", "/", "^", "·", "@", "->", "→", "...", "…", "ℝ", "R[",
              "0", "1", "4", "1e308", "1e-400", "999999999999999999999", "2.5", "x", "θ",
              "B", "D", "loss", "mean", "sum", "max", "softmax", "sqrt", "real(", "\"",
              "--", "\n", "\t", "\u2028", "\x00", "\ufeff", "γ", "_", "training", "optimizer"]
HOSTILE_NUMBERS = ["0", "1", "-1", "2147483648", "33554433", "4611686018427387905",
                   "9" * 40, "9" * 500, "1e308", "1e309", "1e-400", "nan", "0.0", "1000000",
                   "3.0e", "0x10", "1_000"]
HOSTILE_NAMES = ["let", "fn", "module", "param", "init", "stack", "axis", "and", "R",
                 "ℝ", "x" * 300, "θθ", "_", "a.b", "é", "\u0301a", "𝑥", "loss", "B"]


@st.composite
def mutated_text(draw, text: str) -> bytes:
    """`text` under one to four mutations of a kind hypothesis chooses."""
    import re
    data = text
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["tokens", "numbers", "names", "nesting", "bytes",
                                    "encoding", "truncate"]))
        tokens = re.findall(r"\w+|\s+|.", data)
        if how == "tokens" and tokens:
            i = draw(st.integers(0, len(tokens) - 1))
            op = draw(st.sampled_from(["delete", "duplicate", "replace", "insert", "swap"]))
            if op == "delete":
                del tokens[i]
            elif op == "duplicate":
                tokens.insert(i, tokens[i])
            elif op == "replace":
                tokens[i] = draw(st.sampled_from(VOCABULARY))
            elif op == "insert":
                tokens.insert(i, " " + draw(st.sampled_from(VOCABULARY)) + " ")
            else:
                j = draw(st.integers(0, len(tokens) - 1))
                tokens[i], tokens[j] = tokens[j], tokens[i]
            data = "".join(tokens)
        elif how == "numbers":
            numbers = [k for k, t in enumerate(tokens) if t[:1].isdigit()]
            if numbers:
                tokens[draw(st.sampled_from(numbers))] = draw(st.sampled_from(HOSTILE_NUMBERS))
                data = "".join(tokens)
        elif how == "names":
            names = [k for k, t in enumerate(tokens) if t[:1].isalpha()]
            if names:
                tokens[draw(st.sampled_from(names))] = draw(st.sampled_from(HOSTILE_NAMES))
                data = "".join(tokens)
        elif how == "nesting":
            names = [k for k, t in enumerate(tokens) if t[:1].isalpha()]
            if names:
                k = draw(st.sampled_from(names))
                depth = draw(st.sampled_from([1, 50, 149, 151, 400, 3000]))
                tokens[k] = "(" * depth + tokens[k] + ")" * depth
                data = "".join(tokens)
        elif how == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
    raw = data.encode("utf-8")
    if draw(st.booleans()):
        return raw
    how = draw(st.sampled_from(["flip", "insert", "bom", "utf16", "latin1", "nul"]))
    if how == "flip" and raw:
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([raw[i] ^ (1 << draw(st.integers(0, 7)))]) + raw[i + 1:]
    elif how == "insert":
        i = draw(st.integers(0, len(raw)))
        raw = raw[:i] + draw(st.binary(min_size=1, max_size=8)) + raw[i:]
    elif how == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif how == "utf16":
        raw = data.encode("utf-16")
    elif how == "latin1":
        raw = data.encode("latin-1", errors="replace")
    else:
        raw = raw.replace(b" ", b"\x00", 1)
    return raw


# ---- 1. programs ----

@examples(160)
@given(st.data())
def test_fuzz_programs(data) -> None:
    """A tutorial file mutated, checked through 07_train.psk (which imports them all);
    where it still checks, its loss run in f64 at a drawn B."""
    target = data.draw(st.sampled_from(PROGRAMS))
    raw = data.draw(mutated_text(ORIGINAL[target].decode("utf-8")))
    target.write_bytes(raw)
    try:
        outcome = _presk(["check", str(TRAIN)])
        H.record("program", outcome, raw.decode("utf-8", "replace"), {target.name: raw})
        if outcome.kind == "ok" and data.draw(st.integers(0, 4)) == 0:
            b = data.draw(st.sampled_from(["1", "2", "3"]))
            run = _presk(["run", str(TRAIN), "--entry", "loss", "--dim", f"B={b}",
                          "--engine", "f64"])
            H.record("program-run", run, raw.decode("utf-8", "replace"), {target.name: raw})
    finally:
        target.write_bytes(ORIGINAL[target])


# ---- 2. MLIR through presk-opt and presk run ----

_CORE: list[str] = []


def _core_text() -> str:
    if not _CORE:
        from presk.pipeline import load_core
        module, _ = load_core(str(TRAIN))
        _CORE.append(str(module) + "\n")
    return _CORE[0]


@examples(60)
@given(st.data())
def test_fuzz_mlir(data) -> None:
    raw = data.draw(mutated_text(_core_text()))
    path = WORK / "case.mlir"
    path.write_bytes(raw)
    H.record("mlir-opt", _opt([str(path)]), raw.decode("utf-8", "replace"),
             {path.name: raw})
    if data.draw(st.integers(0, 3)) == 0:
        H.record("mlir-run", _presk(["run", str(path), "--entry", "loss", "--dim", "B=2",
                                     "--engine", "f64"]), raw.decode("utf-8", "replace"),
                 {path.name: raw})


# ---- 3. artifacts: the realization JSON, safetensors weights, data streams ----

HOSTILE_JSON = st.recursive(
    st.none() | st.booleans() | st.sampled_from([0, -1, 1.5, 1e308, 2**64, "f16", "bf16",
                                                 "", "f32", "presk-realization/1"])
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=6), children, max_size=3), max_leaves=6)


def _mutate_json(data, value):
    """A JSON value with one part replaced by a hostile one (or nested 2 000 deep)."""
    if isinstance(value, dict) and value and data.draw(st.integers(0, 2)):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: _mutate_json(data, value[key])}
    if isinstance(value, list) and value and data.draw(st.integers(0, 2)):
        i = data.draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate_json(data, value[i]), *value[i + 1:]]
    if data.draw(st.integers(0, 9)) == 0:
        deep: object = 1
        for _ in range(2000):
            deep = [deep]
        return deep
    return data.draw(HOSTILE_JSON)


@examples(12)
@given(st.data())
def test_fuzz_realization(data) -> None:
    value = _mutate_json(data, json.loads(FIXTURE_REALIZATION))
    try:
        text = json.dumps(value, allow_nan=True)
    except (ValueError, RecursionError):
        return
    if data.draw(st.booleans()):
        text = text[:data.draw(st.integers(0, len(text)))]
    path = WORK / "realization.json"
    path.write_text(text)
    H.record("realization", _presk(["dump", str(TRAIN), "--stage", "realize", "--entry",
                                    "loss", "--dim", "B=2", "--realize", f"@{path}"]), text,
             {path.name: text.encode()})


_WEIGHTS: list[bytes] = []


def _weights() -> bytes:
    if not _WEIGHTS:
        path = WORK / "w0.safetensors"
        assert _presk(["init", str(TRAIN), "--entry", "loss", "--dim", "B=2", "-o",
                       str(path)]).kind == "ok"
        _WEIGHTS.append(path.read_bytes())
    return _WEIGHTS[0]


@examples(30)
@given(st.data())
def test_fuzz_weights(data) -> None:
    raw = _weights()
    (n,) = struct.unpack("<Q", raw[:8])
    header, body = json.loads(raw[8:8 + n]), raw[8 + n:]
    how = data.draw(st.sampled_from(["header", "bytes", "truncate", "length"]))
    if how == "header":
        header = _mutate_json(data, header)
        try:
            text = json.dumps(header).encode()
        except (ValueError, RecursionError):
            return
        raw = struct.pack("<Q", len(text)) + text + body
    elif how == "bytes":
        i = data.draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + data.draw(st.binary(min_size=1, max_size=4)) + raw[i + 1:]
    elif how == "truncate":
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
    else:
        raw = struct.pack("<Q", data.draw(st.sampled_from([0, 1, 2**63, 2**64 - 1, n + 1]))) \
            + raw[8:]
    path = WORK / "w.safetensors"
    path.write_bytes(raw)
    H.record("weights", _presk(["run", str(TRAIN), "--entry", "loss", "--dim", "B=2",
                                "--engine", "f64", "--weights", str(path)]), how,
             {path.name: raw})


PAIRS = (TUTORIAL / "data" / "pairs.psk.d").read_bytes()


@examples(40)
@given(st.data())
def test_fuzz_data_streams(data) -> None:
    raw = PAIRS
    how = data.draw(st.sampled_from(["header", "bytes", "truncate"]))
    if how == "header":
        end = raw.find(b"\n", 0, 4096)
        head = raw[:max(end, 0)].decode("utf-8", "replace")
        raw = data.draw(mutated_text(head)) + raw[max(end, 0):]
    elif how == "bytes":
        i = data.draw(st.integers(0, min(len(raw), 4096) - 1))
        raw = raw[:i] + data.draw(st.binary(min_size=1, max_size=8)) + raw[i + 1:]
    else:
        raw = raw[:data.draw(st.integers(0, len(raw)))]
    path = WORK / "pairs.psk.d"
    path.write_bytes(raw)
    H.record("data", _presk(["data", "show", str(path), "--head", "2"]), how,
             {path.name: raw})


# ---- checkpoints and log.csv, through `presk train --resume` ----

_RUN: list[Path] = []


def _trained_run() -> Path:
    """A run of 120 steps with its newest checkpoint removed: checkpoints at 50 and 100,
    a log of 120 rows, so that resuming runs 20 steps (or falls back to step 50)."""
    if not _RUN:
        run = WORK / "run0"
        assert _presk(["train", str(TRAIN), "--steps", "120", "--out", str(run),
                       "--quiet"]).kind == "ok"
        for suffix in (".json", ".safetensors"):
            (run / "ckpt" / f"step-00000120{suffix}").unlink()
        _RUN.append(run)
    return _RUN[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


HOSTILE_VALUES = st.sampled_from([None, -1, 0, 1.5, 2**64, "", "x", [], {}, True, 1e308,
                                  float("nan"), -0.0, "presk-checkpoint/2", 10**30])


def _mutate_checkpoint(data, folder: Path) -> str:
    """One damage to the newest checkpoint of `folder` or to its log; what was done."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from presk.train.checkpoint import _sha256
    record_path = folder / "ckpt" / "step-00000100.json"
    tensors_path = folder / "ckpt" / "step-00000100.safetensors"
    record = json.loads(record_path.read_text())
    how = data.draw(st.sampled_from(["version", "key", "value", "position", "json-bytes",
                                     "tensors", "tensor-bytes", "log", "log-rows"]))
    if how == "version":
        record["format"] = data.draw(st.sampled_from(
            ["presk-checkpoint/2", "presk-checkpoint/0", "presk-checkpoint", "", 1, None]))
    elif how == "key":
        key = data.draw(st.sampled_from(sorted(record)))
        if data.draw(st.booleans()):
            del record[key]
        else:
            record[key + data.draw(st.sampled_from(["_", "s", "\u0301"]))] = record.pop(key)
    elif how == "value":
        key = data.draw(st.sampled_from(sorted(record)))
        record[key] = _mutate_json(data, record[key])
    elif how == "position":
        key = data.draw(st.sampled_from(sorted(record["data"])))
        record["data"][key] = data.draw(st.sampled_from([-1, -5, 0, 7, 8, 31, 32, 10**12,
                                                         2.5, "3", None]))
    if how in ("version", "key", "value", "position"):
        try:
            text = json.dumps(record, allow_nan=True)
        except (ValueError, RecursionError):
            text = "{"
        record_path.write_text(text, encoding="utf-8")
        return f"{how}: {text[:400]}"
    if how == "json-bytes":
        raw = record_path.read_bytes()
        raw = data.draw(mutated_text(raw.decode("utf-8")))
        record_path.write_bytes(raw)
        return how
    if how == "tensor-bytes":  # the checksum no longer holds: resume falls back to 50
        raw = tensors_path.read_bytes()
        raw = raw[:data.draw(st.integers(0, len(raw) - 1))] if data.draw(st.booleans()) \
            else raw[:8] + bytes([raw[8] ^ 0x20]) + raw[9:]
        tensors_path.write_bytes(raw)
        return how
    if how == "tensors":  # the checksum still holds: the tensors must fit the program
        tensors = dict(load_file(str(tensors_path)))
        key = data.draw(st.sampled_from(sorted(tensors)))
        change = data.draw(st.sampled_from(["rename", "drop", "add", "shape", "dtype",
                                            "nan", "inf", "scalar"]))
        value = tensors[key]
        if change == "rename":
            tensors[key.replace(".", data.draw(st.sampled_from(["_", ".x.", ".."])), 1)] = \
                tensors.pop(key)
        elif change == "drop":
            del tensors[key]
        elif change == "add":
            tensors[data.draw(st.sampled_from(["param.extra", "optim.exp_avg.nowhere",
                                               "optim.momentum.final.γ", "other"]))] = value
        elif change == "shape":
            tensors[key] = np.concatenate([value.reshape(-1), value.reshape(-1)[:1]])
        elif change == "dtype":
            tensors[key] = value.astype(data.draw(st.sampled_from(
                [np.float16, np.float32, np.int32, np.uint8, np.bool_])))
        elif change in ("nan", "inf"):
            flat = np.array(value, dtype=value.dtype).reshape(-1)
            if flat.size and np.issubdtype(flat.dtype, np.floating):
                flat[data.draw(st.integers(0, flat.size - 1))] = \
                    np.nan if change == "nan" else -np.inf
            else:
                flat = flat.astype(np.float64)
                flat[...] = np.nan if change == "nan" else np.inf
            tensors[key] = flat.reshape(value.shape)
        else:
            tensors[key] = np.array(value.reshape(-1)[0] if value.size else 0)
        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(tensors_path))
        record["sha256"] = _sha256(str(tensors_path))
        record_path.write_text(json.dumps(record), encoding="utf-8")
        return f"tensors: {change} {key}"
    log = folder / "log.csv"
    text = log.read_text(encoding="utf-8")
    if how == "log":
        log.write_bytes(data.draw(mutated_text(text)))
        return how
    rows = text.splitlines(keepends=True)
    change = data.draw(st.sampled_from(["cut", "drop", "repeat", "nan", "header", "empty"]))
    i = data.draw(st.integers(1, len(rows) - 1))
    if change == "cut":
        rows = rows[:i] + [rows[i][:data.draw(st.integers(0, len(rows[i])))]]
    elif change == "drop":
        del rows[i]
    elif change == "repeat":
        rows.insert(i, rows[i])
    elif change == "nan":
        cells = rows[i].rstrip("\n").split(",")
        cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(
            st.sampled_from(["nan", "inf", "-1", "", "1e999", "x", "9" * 5000]))
        rows[i] = ",".join(cells) + "\n"
    elif change == "header":
        rows[0] = data.draw(st.sampled_from(["step,epoch,loss\n", "", "\ufeffstep,epoch,"
                                             "loss,lr\n", "lr,loss,epoch,step\n"]))
    else:
        rows = []
    log.write_text("".join(rows), encoding="utf-8")
    return f"log-rows: {change} at {i}"


@examples(3)
@given(st.data())
def test_fuzz_checkpoints(data) -> None:
    """The newest checkpoint (its JSON, its tensors with the checksum made to hold, or
    cut short) or the run's log.csv damaged, then `presk train --resume`: it resumes (from
    the checkpoint before a damaged one) or refuses in one line, exit 2, and a refusal
    leaves every file of the run as it was."""
    folder = WORK / "run"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(_trained_run(), folder)
    how = _mutate_checkpoint(data, folder)
    before = _snapshot(folder)
    outcome = _presk(["train", str(TRAIN), "--resume", str(folder), "--quiet"])
    kind = "log" if how.startswith("log") else "checkpoint"
    if outcome.kind != "ok" and _snapshot(folder) != before:
        outcome = H.Outcome("overwritten", outcome.code, outcome.err)
    H.record(kind, outcome, how, {f"run/{k}": v for k, v in before.items()})


# ---- 4. flags, with outputs pointed at nodes that are not regular files ----

VALUES = ["", "0", "-1", "4", "B=0", "B=2", "B=" + "9" * 30, "B=٤", "nan", "inf", "1e-300",
          "1e-3", "-1e-3", "2", "mpfr", "native", "kernel", "f64", "@/nonexistent",
          "{}", "{\"format\": 1}", "/dev/null", str(SPECIAL / "fifo"), str(SPECIAL / "folder"),
          "loss", "lose", "none", "x" * 200, "\udcff", "ℝ"]
FLAGS = {
    "check": ["--summary", "--precision", "--realize", "--model", "--sites", "--measure"],
    "dump": ["--stage", "--entry", "--dim", "--format", "--realize", "--grad", "--remat",
             "--bits", "--sites", "--no-fuse"],
    "run": ["--entry", "--dim", "--engine", "--realize", "--bits", "--seed", "--weights",
            "--inputs", "--out", "--grad", "--remat", "--time"],
    "init": ["--entry", "--dim", "--seed", "-o"],
    "solve": ["--entry", "--dim", "--precision", "--budget", "--out", "--sites"],
    "calibrate": ["--precision", "--entry", "--dim", "--bits", "--samples", "--out"],
    "export": ["--target", "--entry", "--dim", "-o"],
    "data": ["show", "linear", "--head", "-o", "--width", "--count"],
}
STAGES = ["elab", "core", "vjp", "realize", "kernel", "sensitivity", "nope"]


@examples(40)
@given(st.data())
def test_fuzz_flags(data) -> None:
    command = data.draw(st.sampled_from(sorted(FLAGS)))
    argv = [command]
    if command == "data":
        argv.append(data.draw(st.sampled_from(["show", "linear", "frob"])))
    argv.append(data.draw(st.sampled_from([str(TRAIN), "", "/dev/null", str(SPECIAL),
                                           str(WORK / "missing.psk")])))
    for _ in range(data.draw(st.integers(0, 6))):
        flag = data.draw(st.sampled_from(FLAGS[command]))
        argv.append(flag)
        if flag == "--stage":
            argv.append(data.draw(st.sampled_from(STAGES)))
        elif flag == "--count":
            argv.append(data.draw(st.sampled_from(["0", "3", "-2", "x"])))
        elif flag == "--samples":
            argv.append(data.draw(st.sampled_from(["0", "1", "-1"])))
        elif data.draw(st.integers(0, 4)):
            argv.append(data.draw(st.sampled_from(VALUES)))
    if command in ("solve", "calibrate", "run", "export") and "--dim" not in argv:
        argv += ["--dim", "B=2"]
    before = H.nodes(SPECIALS)
    cwd = os.getcwd()
    os.chdir(WORK)  # a relative output lands in the scratch folder
    try:
        outcome = _presk(argv)
    finally:
        os.chdir(cwd)
    if H.nodes(SPECIALS) != before:
        outcome = H.Outcome("touched", outcome.code, outcome.err)
    H.record("flags", outcome, " ".join(argv))


# ---- 5. environments and terminals, in a subprocess ----

ENVIRONMENTS = {
    "PRESK_CACHE": ["off", "on", "", "garbage", "\t0"],
    "PRESK_CACHE_MAX_MB": ["inf", "nan", "-1", "1e30", "abc", "0", ""],
    "PRESK_CACHE_DIR": ["/dev/null", "/nonexistent/x", str(TRAIN), "", str(SPECIAL / "fifo")],
    "LC_ALL": ["C", "POSIX", "xx_YY.UTF-8"],
    "PYTHONIOENCODING": ["ascii", "latin-1", "utf-8", "ascii:strict"],
}


@examples(4)
@given(st.data())
def test_fuzz_environments(data) -> None:
    env = {k: data.draw(st.sampled_from(v)) for k, v in ENVIRONMENTS.items()
           if data.draw(st.booleans())}
    argv = data.draw(st.sampled_from([
        ["presk", "check", "--summary", str(TRAIN)],
        ["presk", "run", str(TRAIN), "--entry", "loss", "--dim", "B=2", "--grad"],
        ["presk", "dump", str(TRAIN), "--stage", "core", "--entry", "loss"],
        ["presk-translate", str(TRAIN), "--to", "listing"],
    ]))
    before = H.nodes(SPECIALS)
    outcome = H.run_process(argv, LIMIT, env)
    if H.nodes(SPECIALS) != before:
        outcome = H.Outcome("touched", outcome.code, outcome.err)
    H.record("environment", outcome, f"{env} {' '.join(argv)}")


# ---- 6. native code of mutated programs, in a subprocess (signals) ----

SMALL = """\
const N : nat = 3
fn f(x : ℝ[B, 4]) -> ℝ[] = mean(x ^ N + sqrt(x * x + 1.0))
dim B
"""


@examples(3)
@given(st.data())
def test_fuzz_native(data) -> None:
    raw = data.draw(mutated_text(SMALL))
    path = WORK / "small.psk"
    path.write_bytes(raw)
    b = data.draw(st.sampled_from(["1", "4", "33", "100000"]))
    H.record("native", H.run_process(["presk", "run", str(path), "--entry", "f", "--dim",
                                      f"B={b}"], LIMIT), raw.decode("utf-8", "replace"),
             {path.name: raw})


def test_fuzz_zz_every_outcome_is_a_promised_one() -> None:
    """Last (pytest runs a file's tests in order): no case of any kind above gave a
    traceback, a signal, a hang, a malformed message or a touched node."""
    for failure in H.FAILURES[:50]:  # whole, on stdout (an assertion's text is cut short)
        print(failure)
    assert not H.FAILURES, f"{len(H.FAILURES)} bad outcomes (printed above)"
