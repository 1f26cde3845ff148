"""Running one fuzz case through a Presk command and judging its outcome.

A case runs in process (the cli `main` functions: fast) under a time limit (SIGALRM), or
in a subprocess (for signals and hangs of native code). Its outcome is one of:

  ok          exit 0
  diagnostic  exit 1 and stderr a diagnostic (`file:line:col: error[E…]: …`, the line, a
              caret) or one line naming the error (`presk: error: …`, `FILE: error: …`)
  usage       exit 2 and stderr exactly one line
  traceback   an exception escaped the command (or a subprocess printed a Traceback)
  signal      a subprocess died of a signal
  hang        past the time limit
  malformed   an exit code or message outside the forms above
  touched     a node that is not a regular file changed (type or inode)
  overwritten a command that refused its input changed a file of the user's anyway

The README promises the first three only; the fuzz tests assert that and count each
outcome per input kind (`COUNTS`, printed at the end of a run and written to
$PRESK_FUZZ_REPORT when it is set). A bad case's input files are saved whole, byte for
byte, into $PRESK_FUZZ_CASES (default: `fuzz-cases/` beside the report, or a scratch
folder), one folder per case with `case.json` (kind, outcome, command, message); the
report lists them, so that any failure can be run again as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

GOOD = ("ok", "diagnostic", "usage")
COUNTS: dict[str, Counter] = defaultdict(Counter)
FAILURES: list[str] = []
SAVED: list[dict] = []
BIN = Path(sys.executable).parent
DIAGNOSTIC = re.compile(r"\S.*:\d+:\d+: (error|warning)\[[EW]\d{4}\]: .+")
ONE_LINE_ERROR = re.compile(r"(\S+: )?(\S+: )?error: .+|presk[-\w ]*: .+")


@dataclass
class Outcome:
    kind: str
    code: int | None
    err: str

    def describe(self) -> str:
        return f"{self.kind} (exit {self.code}): {self.err[-600:]}"


class Hang(Exception):
    pass


def _on_alarm(signum, frame):  # noqa: ANN001
    raise Hang()


def judge(code: int | None, err: str) -> str:
    """The outcome of an exit code and stderr (see the module's docstring)."""
    if "Traceback (most recent call last)" in err:
        return "traceback"
    if code == 0:
        return "ok"
    lines = err.rstrip("\n").split("\n") if err.strip() else []
    if code == 2:
        return "usage" if len(lines) == 1 and lines[0].strip() else "malformed"
    if code == 1:
        errors = [ln for ln in lines if DIAGNOSTIC.fullmatch(ln) and "error[" in ln]
        if errors or any(ONE_LINE_ERROR.fullmatch(ln) for ln in lines):
            return "diagnostic"
        return "malformed"
    return "malformed"


def run_main(main, argv: list[str], limit: float = 60.0, env: dict[str, str] | None = None
             ) -> Outcome:
    """`main(argv)` in process, its stdout and stderr captured, under `limit` seconds."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse's --help, or a script's exit
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None
                                                                    else 1)
    except Hang:
        return Outcome("hang", None, err.getvalue())
    except BaseException:  # noqa: BLE001 — what the fuzzer looks for
        return Outcome("traceback", None, err.getvalue() + traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    text = err.getvalue()
    return Outcome(judge(code, text), code, text)


def run_process(argv: list[str], limit: float = 60.0, env: dict[str, str] | None = None,
                cwd: str | None = None) -> Outcome:
    """A console script (`presk`, `presk-opt`, …) in a subprocess: signals and hangs."""
    try:
        done = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True,
                              text=True, timeout=limit, env={**os.environ, **(env or {})},
                              cwd=cwd, errors="replace")
    except subprocess.TimeoutExpired as exc:
        return Outcome("hang", None, str(exc.stderr or ""))
    if done.returncode < 0:
        return Outcome("signal", done.returncode, done.stderr)
    return Outcome(judge(done.returncode, done.stderr), done.returncode, done.stderr)


def nodes(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    """Each path's file type and inode, to see that nothing was replaced."""
    return {p: (stat.S_IFMT(os.stat(p).st_mode), os.stat(p).st_ino) for p in paths}


def cases_dir() -> Path:
    """Where bad cases are saved (created on first use)."""
    named = os.environ.get("PRESK_FUZZ_CASES")
    if named:
        path = Path(named)
    elif os.environ.get("PRESK_FUZZ_REPORT"):
        path = Path(os.environ["PRESK_FUZZ_REPORT"]).resolve().parent / "fuzz-cases"
    else:
        path = Path(tempfile.gettempdir()) / "presk-fuzz-cases"
    path.mkdir(parents=True, exist_ok=True)
    return path


def save_case(kind: str, outcome: Outcome, case: str, files: dict[str, bytes]) -> Path:
    """The case's inputs whole, and what happened, in a folder named for their digest."""
    digest = hashlib.sha256(case.encode("utf-8", "replace"))
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name])
    folder = cases_dir() / f"{kind}-{outcome.kind}-{digest.hexdigest()[:12]}"
    folder.mkdir(exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    meta = {"kind": kind, "outcome": outcome.kind, "exit": outcome.code, "case": case,
            "files": sorted(files), "stderr": outcome.err[-4000:]}
    (folder / "case.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    SAVED.append({"kind": kind, "outcome": outcome.kind, "folder": str(folder)})
    return folder


def record(kind: str, outcome: Outcome, case: str,
           files: dict[str, bytes] | None = None) -> None:
    """Count the outcome; remember a bad one with its case, and save its input `files`
    (name → bytes, as the command read them) whole (the run goes on, so that the counts
    cover every case; test_fuzz's last test asserts there was none)."""
    COUNTS[kind][outcome.kind] += 1
    if outcome.kind not in GOOD:
        folder = save_case(kind, outcome, case, files or {})
        FAILURES.append(f"[{kind}] {case[:300]!r} (saved whole in {folder})\n"
                        f"  {outcome.describe()}")


def report() -> str:
    """The counts per input kind and outcome, as a table."""
    kinds = sorted(COUNTS)
    outcomes = ["ok", "diagnostic", "usage", "traceback", "signal", "hang", "malformed",
                "touched", "overwritten"]
    lines = [f"{'input kind':<18}" + "".join(f"{o:>12}" for o in outcomes) + f"{'total':>8}"]
    for k in kinds:
        lines.append(f"{k:<18}" + "".join(f"{COUNTS[k][o]:>12}" for o in outcomes)
                     + f"{sum(COUNTS[k].values()):>8}")
    total = Counter()
    for k in kinds:
        total.update(COUNTS[k])
    lines.append(f"{'all':<18}" + "".join(f"{total[o]:>12}" for o in outcomes)
                 + f"{sum(total.values()):>8}")
    path = os.environ.get("PRESK_FUZZ_REPORT")
    if path:
        body = {"format": "presk-fuzz-report/2",
                "counts": {k: dict(v) for k, v in COUNTS.items()},
                "cases_dir": str(cases_dir()) if SAVED else None, "failures": SAVED}
        Path(path).write_text(json.dumps(body, indent=1) + "\n")
    return "\n".join(lines)
