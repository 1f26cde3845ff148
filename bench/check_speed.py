"""How long `presk check` takes from a cold process, against a bare Python start.

Usage, from the repository root:

    .venv/bin/python bench/check_speed.py [-n 10] [--file tutorial/07_train.psk]

Runs `presk check FILE` (the venv's `presk` script) in N fresh processes and prints the
median and minimum wall time beside the goal, 0.5 s. Its peer, measured in the same run,
is `python -c pass` with the same interpreter: the ratio says how much of the time is
Presk's own. Then it runs the check once more in-process under `-X importtime`, through a
small wrapper that reports whether `xdsl` or `llvmlite` were imported (`presk check`
must not pay for them) and which imports cost the most.

A benchmark prints figures; it asserts nothing about time. The exit code is 1 only when
`presk check` itself fails (its output is shown), 2 when run from elsewhere than the root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 0.5
HEAVY = ("xdsl", "llvmlite")

# Runs `presk check FILE` in this process and writes which modules it loaded to OUT.
_WRAPPER = """
import json, sys
from presk.cli.main import main
out, argv = sys.argv[1], sys.argv[2:]
sys.argv = ["presk", *argv]
try:
    code = main()
except SystemExit as e:
    code = e.code
with open(out, "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _presk_script() -> Path:
    """The `presk` console script of the interpreter running this benchmark."""
    here = Path(sys.executable).parent / "presk"
    return here if here.exists() else Path(".venv/bin/presk")


def _time_runs(argv: list[str], n: int) -> tuple[list[float], subprocess.CompletedProcess]:
    """Wall times of `n` fresh runs of `argv`, and the last run's result."""
    times = []
    for _ in range(n):
        started = time.perf_counter()
        result = subprocess.run(argv, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            break
    return times, result


def _import_report(source: str) -> tuple[dict, list[tuple[int, str]]]:
    """Which modules `presk check` loads, and its imports by cumulative time (µs)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "modules.json")
        result = subprocess.run([sys.executable, "-X", "importtime", "-c", _WRAPPER, out,
                                 "check", source], capture_output=True, text=True)
        if not os.path.exists(out):
            return {"code": result.returncode, "modules": [], "stderr": result.stderr}, []
        with open(out) as f:
            report = json.load(f)
    return report, _parse_importtime(result.stderr)


def _parse_importtime(stderr: str) -> list[tuple[int, str]]:
    """`import time: self | cumulative | name` lines, as (cumulative µs, top name)."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if name[1:2] != " ":  # one blank before the name: a top-level import
            rows.append((int(cumulative), name.strip()))
    return sorted(rows, reverse=True)


def _report_times(label: str, times: list[float]) -> float:
    median = statistics.median(times)
    print(f"  {label:<24} median {median:.3f} s   min {min(times):.3f} s   ({len(times)} runs)")
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="fresh processes per command")
    parser.add_argument("--file", default="tutorial/07_train.psk")
    args = parser.parse_args()
    if not Path(args.file).exists() or not Path("pyproject.toml").exists():
        print(f"check_speed: run from the repository root (no {args.file} here)",
              file=sys.stderr)
        return 2

    presk = _presk_script()
    print(f"presk check {args.file}: {args.n} fresh processes each ({presk})")
    check_times, last = _time_runs([str(presk), "check", args.file], args.n)
    if last.returncode != 0:
        print(f"presk check failed (exit {last.returncode}):\n{last.stdout}{last.stderr}")
        return 1
    bare_times, _ = _time_runs([sys.executable, "-c", "pass"], args.n)

    check = _report_times("presk check", check_times)
    bare = _report_times("python -c pass (peer)", bare_times)
    verdict = "meets" if check <= GOAL_SECONDS else "misses"
    print(f"  goal {GOAL_SECONDS:.3f} s: the median {verdict} it "
          f"({check / GOAL_SECONDS:.2f}× the goal)")
    print(f"  ratio presk check / python -c pass (medians): {check / bare:.1f}×")

    report, imports = _import_report(args.file)
    loaded = {h: any(m == h or m.startswith(h + ".") for m in report["modules"]) for h in HEAVY}
    print("  heavy modules imported by presk check: "
          + ", ".join(f"{h} {'YES' if v else 'no'}" for h, v in loaded.items())
          + f" (and numpy, which it may use: {'yes' if 'numpy' in report['modules'] else 'no'})")
    if imports:
        print("  slowest top-level imports (cumulative):")
        for micros, name in imports[:6]:
            print(f"    {micros / 1000:8.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
