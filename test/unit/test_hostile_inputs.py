"""Hostile inputs (issue 14): one regression test per class of input that once gave a
traceback, a signal, a hang or a replaced file. Each is named for its class:
`test_sizes_*`, `test_work_*`, `test_outputs_*`, `test_commands_*`. The fuzzer that found
most of them is test/fuzz/."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from presk.cli import translate

ROOT = Path(__file__).resolve().parents[2]
TRAIN = str(ROOT / "tutorial" / "07_train.psk")


# --------------------------------------------------------------------------------------
# 1. Sizes beyond the machine
# --------------------------------------------------------------------------------------


def test_sizes_arena_offsets_are_i64_past_2_gib(tmp_path: Path) -> None:
    """At B = 10⁸ the tutorial's arena passes 4 GB: every arena offset is an i64 GEP
    operand (an i32 constant wrapped and the native run segfaulted at B = 33 554 433)."""
    out = tmp_path / "loss.ll"
    assert translate.main([TRAIN, "--to", "llvm", "--entry", "loss", "--dim", "B=100000000",
                           "-o", str(out)]) == 0
    offsets = [int(m) for m in re.findall(r"getelementptr inbounds i8, ptr %\S+, i64 (\d+)",
                                          out.read_text())]
    # The tutorial at B: buffers of B·4 doubles (3.2 GB) laid one after another.
    assert max(offsets) >= 4 * 8 * 100_000_000 > 2**31
    assert all(o % 64 == 0 for o in offsets)


def _main(argv: list[str], capsys) -> tuple[int, str]:
    """`presk ARGV` in process: (exit code, stderr)."""
    from presk.cli import main as presk_main
    code = presk_main.main(argv)
    return code, capsys.readouterr().err


def test_sizes_beyond_the_machine_refused_with_the_bytes(capsys) -> None:
    """B = 2³¹: the tutorial's arguments alone are 2 × B × 4 doubles. Refused before any
    allocation (it was a numpy MemoryError traceback), naming both figures."""
    from presk.limits import available_memory, format_bytes
    code, err = _main(["run", TRAIN, "--entry", "loss", "--dim", "B=2147483648",
                       "--engine", "f64"], capsys)
    assert code == 2 and err.count("\n") == 1
    # x and y of the batch: [B, 4] each; θ: 76 reals.
    needed = (2 * 4 * 2**31 + 76) * 8
    assert f"{format_bytes(needed)} needed" in err
    have = available_memory()
    assert have is not None and "available on this machine" in err and needed > have


def _no_drawing(monkeypatch) -> None:
    """Drawing or reading an argument fails the test: a refusal must come before."""
    import presk.analysis.entry as E

    def drawn(*args, **kwargs):
        raise AssertionError("an argument was drawn before the call's memory was checked")
    monkeypatch.setattr(E, "weights", drawn)
    monkeypatch.setattr(E, "inputs", drawn)


@pytest.mark.parametrize("b", [1000, 33_554_433])
def test_sizes_native_call_refused_before_inputs_are_drawn(b: int, tmp_path: Path,
                                                           monkeypatch, capsys) -> None:
    """The native and kernel engines and the C export check the whole call — its buffers
    and arena as the entry's signature states them, and the f64 arguments held beside
    them — against the memory there is, after recording (which reads only shapes) and
    before an input is drawn (a huge B drew gigabytes of inputs first). At the tutorial's
    B = 33 554 433 on a machine with 1 byte too few, the refusal names the bytes."""
    import presk.limits as L
    from presk.kernel_abi.arena import entry_signatures
    from presk.pipeline import kernel_pipeline, load_core
    core, _ = load_core(TRAIN)
    sig = entry_signatures(kernel_pipeline(core, "loss", {"B": b}).kernel)[0]
    arguments = (2 * b * 4 + 76) * 8  # x, y: [B, 4] each; θ: 76 reals; as f64
    needed = sig.call_bytes + arguments
    monkeypatch.setattr(L, "available_memory", lambda: needed - 1)
    _no_drawing(monkeypatch)
    for argv in (["run", "--engine", "kernel"], ["run", "--engine", "native"],
                 ["export", "--target", "c", "-o", str(tmp_path / "c")]):
        code, err = _main([argv[0], TRAIN, *argv[1:], "--entry", "loss", "--dim", f"B={b}"],
                          capsys)
        assert code == 2, err
        assert err == (f"presk: a call of `loss` (its buffers and arena, and its arguments "
                       f"in f64): {L.format_bytes(needed)} needed, "
                       f"{L.format_bytes(needed - 1)} available on this machine\n")


@pytest.mark.parametrize("value, reason", [
    ("9" * 5000, "a size is at most 2^62"),
    ("0", "a size is 1 or more"),
    ("-3", "expected NAME=N"),
    ("4.0", "expected NAME=N"),
    ("٤", "expected NAME=N"),  # a Unicode digit is not ASCII decimal
    (str(2**62 + 1), "a size is at most 2^62"),
])
def test_sizes_dim_is_a_positive_integer_of_sane_length(value: str, reason: str,
                                                        capsys) -> None:
    code, err = _main(["run", TRAIN, "--entry", "loss", "--dim", f"B={value}"], capsys)
    assert code == 2 and err.count("\n") == 1 and reason in err and len(err) < 200


@pytest.mark.parametrize("source, message", [
    ("fn f(x : ℝ[0]) -> ℝ[] = sum(x)\n", "0 is not a size: a size is 1 or more"),
    ("const N : nat = 0\nfn f(x : ℝ[N, 2]) -> ℝ[] = sum(x)\n",
     "`N` = 0 is not a size: a size is 1 or more"),
    ("const N : nat = 2 ^ 70\nfn f(x : ℝ[N]) -> ℝ[] = sum(x)\n",
     "`N` = 118059162071… (22 digits) is not a size: a size is at most 2^62"),
    ("module M{D : dim} {\n  param w : ℝ[D] init = zeros\n}\n"
     "module T {\n  use s : stack{0}(M{2})\n}\nfn f(θ : params T) -> ℝ[] = sum(θ.s.w)\n",
     "0 is not a size: a size is 1 or more"),
])
def test_sizes_zero_axes_refused_by_check(tmp_path: Path, source: str, message: str,
                                          capsys) -> None:
    """Presk has no empty axes (docs/language.md): a literal 0, a nat const 0 and
    stack{0} are E0308 in `presk check`, as --dim B=0 is refused."""
    p = tmp_path / "z.psk"
    p.write_text(source, encoding="utf-8")
    code, err = _main(["check", str(p)], capsys)
    assert code == 1 and "error[E0308]" in err and message in err, err


# --------------------------------------------------------------------------------------
# 2. Work that explodes
# --------------------------------------------------------------------------------------

POWERS = """\
fn f(x : ℝ[5]) -> ℝ[5] = (x / 1000000.0 + 1.0) ^ 1000000
fn g(x : ℝ[5]) -> ℝ[5] = x ^ 7 + x ^ 4 + x ^ 3 + x ^ 2 + x ^ 1 + x ^ 0
"""


def _square_and_multiply(x, n: int):
    """x^n in numpy float64 by the documented order (presk/powers.py), written again."""
    bits = bin(n)[3:]
    p = x
    for b in bits:
        p = p * p
        if b == "1":
            p = p * x
    return p


def test_work_powers_by_squaring_same_bits_everywhere(tmp_path: Path) -> None:
    """x^1000000 lowers to ≤ 2·log₂ n multiplies (it was a million: the native compile
    hung) and gives the same bits in the f64 interpreter, the kernel interpreter, native
    code and C, equal to numpy's square and multiply; x², x³ keep the left-to-right bits
    the tutorial pins."""
    import shutil
    import subprocess

    import numpy as np

    from presk.analysis.interpret import Interpreter
    from presk.analysis.numbers import F64
    from presk.dialects import kernel as K
    from presk.pipeline import kernel_pipeline, load_core, run_kernel, run_native
    from presk.pipeline.export import export_c
    p = tmp_path / "powers.psk"
    p.write_text(POWERS, encoding="utf-8")
    core, _ = load_core(str(p))
    x = np.array([0.5, -1.25, 3.0, 1e-3, -7.5])
    muls = sum(isinstance(op, K.MulOp)
               for op in kernel_pipeline(core, "f", {}).kernel.walk())
    assert muls <= 2 * 20
    base = x / 1e6 + 1.0
    expected = {"f": _square_and_multiply(base, 1_000_000),
                "g": _square_and_multiply(x, 7) + (x * x) * (x * x) + (x * x) * x + x * x
                + x + 1.0}
    # x^7 by squaring is ((x·x)·x)·((x·x)·x)·x; x³ = (x·x)·x and x² = x·x as before.
    assert np.array_equal(_square_and_multiply(x, 3), (x * x) * x)
    for name, want in expected.items():
        f64 = Interpreter(core, F64()).run(name, [F64().array(x)], {})
        kern = run_kernel(core, name, {}, {}, {"x": x}).result["result"]
        nat = run_native(core, name, {}, {}, {"x": x}).result["result"]
        for got in (f64, kern, nat):
            assert np.asarray(got).tobytes() == want.tobytes(), name
    # Against MPFR's power of the same (rounded) base: each squaring doubles the relative
    # error, so ~2n·u = 2.2e-10 at most.
    import gmpy2
    with gmpy2.context(precision=200):
        exact = np.array([float(gmpy2.mpfr(float(b), 200) ** 1_000_000) for b in base])
    assert np.allclose(expected["f"], exact, rtol=1e-9, atol=0)
    if shutil.which("cc") and shutil.which("make"):
        export_c(core, "f", {}, {}, {"x": x}, str(tmp_path / "c"))
        done = subprocess.run(["make", "-s", "-C", str(tmp_path / "c"), "check"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0 and "bit for bit" in done.stdout, done.stdout + done.stderr


def test_work_exponent_limits(tmp_path: Path, capsys) -> None:
    """A nat const as an exponent has the literal's limit (it was an i64 overflow
    traceback at `presk run`)."""
    p = tmp_path / "e.psk"
    p.write_text("const N : nat = 99999999999999999999999\n"
                 "fn f(x : ℝ[4]) -> ℝ[4] = x ^ N\n", encoding="utf-8")
    code, err = _main(["check", str(p)], capsys)
    assert code == 1 and "error[E0408]: the exponent `N` is too large" in err


# --------------------------------------------------------------------------------------
# 4. Outputs: never over something that is not a regular file
# --------------------------------------------------------------------------------------


def _specials(tmp_path: Path) -> dict[str, Path]:
    """A fifo, a directory, a socket and a character device (/dev/null: it stays one)."""
    import os
    import socket
    fifo, folder, sock = tmp_path / "fifo", tmp_path / "folder", tmp_path / "sock"
    os.mkfifo(fifo)
    folder.mkdir()
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    return {"fifo": fifo, "directory": folder, "socket": sock, "device": Path("/dev/null")}


KIND_TEXT = {"fifo": "is a fifo", "directory": "is a directory", "socket": "is a socket",
             "device": "is a character device"}


def test_outputs_write_atomic_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    import os
    import stat

    from presk.analysis.artifact import write_atomic
    for kind, path in _specials(tmp_path).items():
        before = os.stat(path)
        with pytest.raises(OSError) as info:
            write_atomic(path, "x")
        assert KIND_TEXT[kind] in info.value.strerror
        after = os.stat(path)
        assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode)
        assert after.st_ino == before.st_ino
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".presk-")]
    # A regular file and a new name in a writable directory are written.
    write_atomic(tmp_path / "new.txt", "a")
    write_atomic(tmp_path / "new.txt", "b")
    assert (tmp_path / "new.txt").read_text() == "b"
    with pytest.raises(OSError, match="no directory"):
        write_atomic(tmp_path / "missing" / "x.txt", "a")
    with pytest.raises(OSError, match="an empty file name"):
        write_atomic("", "a")


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket", "device"])
def test_outputs_every_writing_command_refuses_them(tmp_path: Path, kind: str,
                                                    capsys) -> None:
    """Each command that writes a file refuses one line, exit 2, and leaves the node."""
    import os
    import stat
    path = str(_specials(tmp_path)[kind])
    mode = os.stat(path).st_mode
    commands = [
        ["run", TRAIN, "--entry", "loss", "--dim", "B=2", "--engine", "f64", "--out", path],
        ["init", TRAIN, "--entry", "loss", "--dim", "B=2", "-o", path],
        ["calibrate", "--precision", TRAIN, "--entry", "loss", "--dim", "B=2", "--out", path],
        ["data", "linear", "-o", path, "--width", "4", "--count", "4"],
    ]
    for argv in commands:
        code, err = _main(argv, capsys)
        assert code == 2 and err.count("\n") == 1 and KIND_TEXT[kind] in err, (argv, err)
        assert stat.S_IFMT(os.stat(path).st_mode) == stat.S_IFMT(mode)
    code = translate.main([TRAIN, "--to", "mlir", "-o", path])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and KIND_TEXT[kind] in err, err
    assert stat.S_IFMT(os.stat(path).st_mode) == stat.S_IFMT(mode)


# --------------------------------------------------------------------------------------
# 5. presk-opt, presk-translate, initializers, file names, environments, terminals
# --------------------------------------------------------------------------------------


def _opt(argv: list[str], capsys) -> tuple[int, str]:
    from presk.cli import opt
    code = opt.main(argv)
    return code, capsys.readouterr().err


def test_commands_presk_opt_input_errors_are_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_bytes(b"builtin.module {\n  \xff\n}\n")
    ok = tmp_path / "ok.mlir"
    ok.write_text("builtin.module {}\n")
    cases = [
        ([str(tmp_path / "none.mlir")], f"presk-opt: {tmp_path / 'none.mlir'}: no such file"),
        ([str(tmp_path)], f"presk-opt: {tmp_path}: is a directory, not an MLIR file"),
        ([str(bad)], f"presk-opt: {bad}:2:3: not UTF-8 (byte 0xff)"),
        ([str(ok), "-p", "no-such-pass"],
         f"presk-opt: -p no-such-pass: Unrecognized passes: ['no-such-pass'] "
         "(see `presk-opt --help`)"),
        ([str(ok), "-p", "psk-fuse{"],
         "presk-opt: -p psk-fuse{: Expected argument name here (at column 10 of the "
         "pipeline) (see `presk-opt --help`)"),
        ([str(ok), "--no-such-flag"],
         "presk-opt: unrecognized arguments: --no-such-flag (see `presk-opt --help`)"),
        ([str(ok), "-p", 'convert-psk-core-to-realize{dims="B=0"}'], None),
    ]
    for argv, line in cases:
        code, err = _opt(argv, capsys)
        assert err.count("\n") == 1, (argv, err)
        if line is None:  # a pass that refuses its input: exit 1, one line
            assert code == 1 and err.startswith("presk-opt: error: dims: `B=0`"), err
        else:
            assert code == 2 and err == line + "\n", (argv, err)


def test_commands_presk_opt_parse_and_verify_errors_at_the_op(tmp_path: Path,
                                                             capsys) -> None:
    """A parse error and a verifier error name file:line:col, the line and a caret; the
    verifier's at the op that fails (not the whole module printed)."""
    p = tmp_path / "v.mlir"
    p.write_text('// arith.addi in a comment is not the op\nbuiltin.module {\n'
                 '  %0 = "test.op"() : () -> i32\n'
                 '  %1 = "arith.addi"(%0, %0) : (i32, i32) -> i64\n}\n')
    code, err = _opt([str(p), "--allow-unregistered-dialect"], capsys)
    lines = err.splitlines()
    assert code == 1 and lines[0].startswith(f"{p}:4:9: error: arith.addi: result")
    assert lines[1] == '4 |   %1 = "arith.addi"(%0, %0) : (i32, i32) -> i64'
    assert lines[2] == "  |         ^^^^^^^^^^"
    q = tmp_path / "p.mlir"
    q.write_text('builtin.module {\n  "psk_core.nope"() : () -> ()\n}\n')
    code, err = _opt([str(q)], capsys)
    assert code == 1 and err.splitlines()[0] == (f"{q}:2:4: error: Operation psk_core.nope "
                                                 "is not registered")


def test_commands_presk_translate_and_run_on_bad_mlir(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_bytes(b"\xc3(")
    code = translate.main([str(bad), "--to", "listing"])
    assert code == 2 and capsys.readouterr().err == (
        f"presk: {bad}:1:1: not UTF-8 (byte 0xc3)\n")
    code, err = _main(["run", str(tmp_path), "--entry", "f"], capsys)
    assert code == 2 and err.count("\n") == 1


@pytest.mark.parametrize("init, message", [
    ("uniform(low = 1, high = 0)", "`uniform` needs low ≤ high (low = 1, high = 0)"),
    ("uniform(low = -1e308, high = 1e308)", "`uniform` has a range high − low beyond"),
    ("normal(std = -1)", "`normal` needs std ≥ 0 (std = -1)"),
    ("xavier_normal(gain = -2)", "`xavier_normal` needs gain ≥ 0 (gain = -2)"),
])
def test_commands_initializer_arguments_are_diagnostics(tmp_path: Path, init: str,
                                                        message: str, capsys) -> None:
    """They were numpy ValueError/OverflowError tracebacks when the weights were drawn."""
    p = tmp_path / "i.psk"
    p.write_text(f"module M {{\n  param w : ℝ[3] init = {init}\n}}\n"
                 "fn f(θ : params M) -> ℝ[] = sum(θ.w)\n", encoding="utf-8")
    code, err = _main(["check", str(p)], capsys)
    assert code == 1 and f"{p}:2:25: error[E0303]: {message}" in err.splitlines()[0], err


def test_commands_empty_file_names(capsys) -> None:
    for argv in (["check", ""], ["run", "", "--entry", "f"], ["dump", "", "--stage", "elab"]):
        code, err = _main(argv, capsys)
        assert (code, err) == (2, "presk: an empty file name\n"), argv
    assert translate.main(["", "--to", "mlir"]) == 2
    assert capsys.readouterr().err == "presk: an empty file name\n"


def test_commands_invalid_environment_is_one_line(monkeypatch, capsys) -> None:
    from presk.runtime import cache
    for bad in ("inf", "nan", "-1", "abc", "1e300"):
        monkeypatch.setenv("PRESK_CACHE_MAX_MB", bad)
        assert cache.max_bytes() == int(cache.DEFAULT_MAX_MB * 1024 * 1024)
        err = capsys.readouterr().err
        assert err == (f"presk: PRESK_CACHE_MAX_MB={bad!r} is not a size in MB (a number "
                       f"from 0 to 2^40); using {cache.DEFAULT_MAX_MB}\n")
    monkeypatch.setenv("PRESK_CACHE_MAX_MB", "64")
    assert cache.max_bytes() == 64 * 1024 * 1024


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C"},
                                 {"LC_ALL": "C", "PYTHONIOENCODING": "ascii:strict"}])
def test_commands_terminal_without_unicode(env: dict[str, str]) -> None:
    """ℝ on a terminal that cannot print it is an escape, not a UnicodeEncodeError."""
    import os
    import subprocess
    import sys
    presk = str(Path(sys.executable).parent / "presk")
    done = subprocess.run([presk, "check", "--summary", TRAIN], capture_output=True,
                          env={**os.environ, **env}, timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert b"Diagnostics: none" in done.stdout
    text = done.stdout.decode("ascii", "strict") if "ascii" in str(env) else None
    if text is not None:
        assert "\\u211d[" in text  # ℝ[ escaped


def test_commands_budget_below_the_reference(capsys) -> None:
    """A budget the 128-bit reference cannot resolve is refused before any work (it ran
    the whole solver to report a miss); --bits below 2 likewise."""
    env = str(ROOT / "test" / "fixtures" / "realization_mixed.json")  # never read
    code, err = _main(["solve", TRAIN, "--precision", env, "--budget", "1e-300"], capsys)
    assert (code, err) == (2, "presk solve: --budget 1e-300 is below what the 128-bit exact "
                              "reference resolves (1.2e-38 relative): raise --bits or the "
                              "budget\n")
    code, err = _main(["solve", TRAIN, "--precision", env, "--budget", "1e-3", "--bits", "1"],
                      capsys)
    assert (code, err) == (2, "presk solve: --bits 1: a precision is 2 bits or more\n")


def test_commands_non_finite_weights_in_a_sensitivity_dump(tmp_path: Path, capsys) -> None:
    import numpy as np

    from presk.analysis.weights import load_tensors, save_tensors
    w = tmp_path / "w.safetensors"
    assert _main(["init", TRAIN, "--entry", "loss", "--dim", "B=2", "-o", str(w)],
                 capsys)[0] == 0
    tensors = {k: np.array(v) for k, v in load_tensors(str(w)).items()}
    tensors["final.γ"][2] = np.inf
    save_tensors(tensors, str(w))
    code, err = _main(["dump", TRAIN, "--stage", "sensitivity", "--entry", "loss", "--dim",
                       "B=2", "--weights", str(w)], capsys)
    assert (code, err) == (2, "presk: the weight `final.γ` holds inf at [2]: sensitivities "
                              "are derivatives at a finite point\n")
    from presk.analysis.sensitivity import sci
    assert [sci(x) for x in (np.nan, np.inf, -np.inf, 14.08)] == ["nan", "inf", "-inf",
                                                                  "1.4080e1"]


# --------------------------------------------------------------------------------------
# 6. MLIR text xDSL's parser cannot finish (found by the long fuzz run: 4 hangs)
# --------------------------------------------------------------------------------------

CORE_LINE = '  psk_core.module @M attributes {dims = ["D"]} {\n  }\n'


def _mlir_everywhere(tmp_path: Path, text: str, capsys) -> list[tuple[int, str]]:
    """The text through presk-opt, presk-translate and presk run: (exit, stderr) each."""
    from presk.cli import opt
    p = tmp_path / "case.mlir"
    p.write_text(text, encoding="utf-8")
    results = [(opt.main([str(p)]), capsys.readouterr().err)]
    results.append((translate.main([str(p), "--to", "listing"]), capsys.readouterr().err))
    results.append(_main(["run", str(p), "--entry", "f", "--engine", "f64"], capsys))
    return results


def test_mlir_parse_hang_unterminated_string(tmp_path: Path, capsys) -> None:
    """A string not closed on its line hung xDSL's lexer (its string regex nests `+` in
    `*`: exponential backtracking over the characters before the newline). Refused at the
    opening quote, the caret under the rest of the line."""
    text = ('builtin.module {\n  psk_core.module @M attributes {dims = ["D : '
            '!psk_core.params<RMSNorm{4}>]} {\n  }\n}\n')
    line = text.splitlines()[1]
    col = line.index('"D') + 1
    for code, err in _mlir_everywhere(tmp_path, text, capsys):
        lines = err.splitlines()
        assert code == 1 and lines[0] == (f"{tmp_path / 'case.mlir'}:2:{col}: error: a "
                                          "string literal not closed on its line"), err
        assert lines[2] == "  | " + " " * (col - 1) + "^" * (len(line) - col + 1)


def test_mlir_parse_hang_invalid_escape(tmp_path: Path, capsys) -> None:
    """An escape MLIR lacks (`\\q`) fails the same regex after the same backtracking."""
    text = 'builtin.module {\n  psk_core.module @M attributes {dims = ["abcdefgh\\q"]} {\n  }\n}\n'
    col = text.splitlines()[1].index("\\q") + 1
    for code, err in _mlir_everywhere(tmp_path, text, capsys):
        assert code == 1 and err.splitlines()[0].endswith(
            f":2:{col}: error: `\\q` is no escape of an MLIR string (\\\", \\n, \\t, \\\\ or two "
            "hex digits)"), err


def test_mlir_parse_valid_escapes_still_parse(tmp_path: Path, capsys) -> None:
    """The guard reads strings as xDSL does: every escape it accepts passes."""
    from presk.cli import opt
    p = tmp_path / "ok.mlir"
    p.write_text('builtin.module {\n  // "an unclosed quote in a comment\n'
                 '  "test.op"() {s = "a\\"b\\n\\t\\\\\\41 -> (x"} : () -> ()\n}\n')
    assert opt.main([str(p), "--allow-unregistered-dialect"]) == 0
    # xDSL prints the escapes as hex: " is 22, newline 0A, tab 09.
    assert '"a\\22b\\0A\\09\\\\A -> (x"' in capsys.readouterr().out


def test_mlir_parse_recursion_deep_brackets(tmp_path: Path, capsys) -> None:
    """3 000 parentheses around a type ended xDSL's recursive parser in a RecursionError
    traceback; past 64 levels the text is refused at the 65th bracket."""
    from presk.pipeline.mlir_guard import MAX_NESTING
    deep = "(" * 3000 + "f64" + ")" * 3000
    text = f'builtin.module {{\n  "test.op"() {{n = 2 : {deep}}} : () -> ()\n}}\n'
    for code, err in _mlir_everywhere(tmp_path, text, capsys):
        assert code == 1 and err.splitlines()[0].endswith(
            # the module's { and the attribute's { are two levels: the 63rd ( is the 65th
            f":2:{text.splitlines()[1].index('((') + MAX_NESTING - 1}: error: brackets nest more than {MAX_NESTING} deep"), err
    # At the limit, xDSL's parser still finishes (the limit is below its recursion's end).
    from presk.cli import opt
    nested = "{a = " * (MAX_NESTING - 3) + "1" + "}" * (MAX_NESTING - 3)
    p = tmp_path / "limit.mlir"
    p.write_text(f'builtin.module {{\n  "test.op"() {{z = {nested}}} : () -> ()\n}}\n')
    assert opt.main([str(p), "--allow-unregistered-dialect"]) == 0, capsys.readouterr().err


def test_mlir_parse_numeral_of_5000_digits(tmp_path: Path, capsys) -> None:
    """Python's int() refuses over 4 300 digits: it was a ValueError traceback."""
    text = f'builtin.module {{\n  "test.op"() {{n = {"9" * 5000} : i64}} : () -> ()\n}}\n'
    for code, err in _mlir_everywhere(tmp_path, text, capsys):
        assert code == 1 and err.splitlines()[0].endswith(
            f":2:{text.splitlines()[1].index('9') + 1}: error: a number of 5000 digits (at most 1000)"), err


# --------------------------------------------------------------------------------------
# 7. Reserved words as names
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("source, where, word", [
    ("dim B\nfn let(x : ℝ[B]) -> ℝ[] = mean(x)\n", "2:4", "let"),
    ("fn f(to : ℝ[]) -> ℝ[] = to\n", "1:6", "to"),
    ("fn f(x : ℝ[]) -> ℝ[] =\n  let steps = x\n  steps\n", "2:7", "steps"),
    ("dim stream\nfn f(x : ℝ[stream]) -> ℝ[] = sum(x)\n", "1:5", "stream"),
    ("module M {\n  param init : ℝ[2] init = zeros\n}\n", "2:9", "init"),
    ("const and : nat = 2\n", "1:7", "and"),
])
def test_commands_reserved_words_as_names(tmp_path: Path, source: str, where: str,
                                          word: str, capsys) -> None:
    """A keyword where lark's contextual lexer would take it as a name (`fn let(…)` was
    accepted) is E0006 at the word, with the line, a caret and a hint."""
    p = tmp_path / "r.psk"
    p.write_text(source, encoding="utf-8")
    code, err = _main(["check", str(p)], capsys)
    lines = err.splitlines()
    line, col = map(int, where.split(":"))
    assert code == 1 and lines[0] == (f"{p}:{where}: error[E0006]: `{word}` is a reserved "
                                      "word; it cannot be a name"), err
    assert lines[1] == f"{line} | {source.splitlines()[line - 1]}"
    assert lines[2] == f"{' ' * len(str(line))} | {' ' * (col - 1)}{'^' * len(word)}"
    assert lines[3] == f"  = hint: rename it, e.g. `{word}_`"


def test_commands_reserved_words_are_the_documented_ones() -> None:
    """docs/language.md lists exactly the grammar's keywords, and every program of the
    tutorial, the docs' examples' files and the tests still parses."""
    from presk.frontend.diagnostics import CompileError
    from presk.frontend.parser import RESERVED, parse_file
    text = (ROOT / "docs" / "language.md").read_text(encoding="utf-8")
    listed = re.search(r"Keywords \(reserved\): `([^`]+)`", text.replace("\n  ", " "))
    assert listed is not None and set(listed.group(1).split()) == RESERVED
    for path in [*ROOT.glob("tutorial/*.psk"), *ROOT.glob("test/**/*.psk"),
                 *ROOT.glob("bench/**/*.psk")]:
        try:
            parse_file(str(path), path.read_text(encoding="utf-8"))
        except CompileError as exc:
            assert exc.diagnostic.code != "E0006", (path, exc.diagnostic.message)
        except UnicodeDecodeError:  # fixtures of invalid UTF-8
            pass
