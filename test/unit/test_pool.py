"""The worker pool (presk/runtime/presk_pool.c): built plain, under ThreadSanitizer and
under AddressSanitizer + UBSan with test/fixtures/pool_driver.c, each run must write every
part's slice (the sum checked against the one computed here), report no race and no
leak, and exit without hanging; in this process, a split kernel's launch starts workers."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from presk.runtime import pool

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "test" / "fixtures" / "pool_driver.c"
N, WIDTH = 5, 64


def _expected_total() -> int:
    """What the driver's parts write, summed: launches of 2…5 parts, round r writing
    r·10 + j into each of part j's WIDTH slots; 3 × 2000 rounds and 100 after the stop."""
    def rounds(n: int) -> int:
        return sum(WIDTH * (10 * r + j) for r in range(n) for j in range(2 + r % (N - 1)))
    return 3 * rounds(2000) + rounds(100)


def _sanitizer_works(flag: str, tmp: Path) -> bool:
    probe = tmp / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    built = subprocess.run(["gcc", flag, str(probe), "-o", str(tmp / "probe")],
                           capture_output=True)
    return built.returncode == 0 and subprocess.run([str(tmp / "probe")]).returncode == 0


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
@pytest.mark.parametrize("flags", [[], ["-fsanitize=thread", "-DNO_FORK"],
                                   ["-fsanitize=address,undefined"]],
                         ids=["plain", "tsan", "asan"])
def test_pool_under_sanitizers(tmp_path: Path, flags: list[str]) -> None:
    if flags and not _sanitizer_works(flags[0], tmp_path):
        pytest.skip(f"gcc {flags[0]} does not work here")
    for name, text in pool.source_files().items():
        (tmp_path / name).write_text(text)
    exe = tmp_path / "driver"
    subprocess.run(["gcc", "-O1", "-g", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pthread",
                    *flags, "-I", str(tmp_path), str(DRIVER), str(tmp_path / "presk_pool.c"),
                    "-o", str(exe)], check=True, capture_output=True)
    env = {"TSAN_OPTIONS": "halt_on_error=1", "ASAN_OPTIONS": "detect_leaks=1",
           "PATH": "/usr/bin:/bin"}
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    found = re.fullmatch(r"total (\d+) workers (\d+) stopped (\d+) bad 0\n", done.stdout)
    assert found, done.stdout
    assert int(found[1]) == _expected_total()
    assert (int(found[2]), int(found[3])) == (N - 1, 0)  # grown to the largest split, stopped


def test_split_launch_starts_workers() -> None:
    """A kernel split among 3 runs on the pool (2 workers besides the caller) and computes
    the copy; a launch costs more than nothing and is timed (never asserted)."""
    from presk.runtime.kernel_timing import _baseline, harness
    from presk.runtime.compile import native_program
    from presk.transforms.plan_layout import Point
    if not pool.available():
        pytest.skip("no C compiler for the pool")
    kernel = _baseline(3)
    kernel.layout = Point((), 3).attr()
    program = native_program(harness([kernel], [1]), cache=False, threads="pool")
    x = np.array([1.5, -2.0, 3.25])
    (out,) = program.entry("h0")([x])
    assert out.tobytes() == x.tobytes()
    assert pool.workers() >= 2


def _python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    import os
    import sys
    full = {**os.environ, "PRESK_CACHE_DIR": str(tmp_path / "cache"), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=full)


SPLIT_RUN = """
import numpy as np
from presk.runtime.kernel_timing import _baseline, harness
from presk.runtime.compile import native_program, spawn
from presk.transforms.plan_layout import Point
k = _baseline(2)
k.layout = Point((), 2).attr()
(out,) = native_program(harness([k], [1])).entry("h0")([np.array([1.0, 2.0])])
print(spawn(), out.tolist())
"""


def test_a_process_with_workers_exits(tmp_path: Path) -> None:
    """A process whose split launch started the pool's workers exits promptly (its atexit
    handler joins them) with status 0."""
    if not pool.available():
        pytest.skip("no C compiler for the pool")
    done = _python(SPLIT_RUN, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "pool [1.0, 2.0]\n"


def test_without_a_c_compiler_parts_start_threads(tmp_path: Path) -> None:
    """When cc cannot build the pool, split kernels start a thread per part and launch
    (the same outputs), and the cache key says which way the code was built."""
    done = _python(SPLIT_RUN, tmp_path, CC="false")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "threads [1.0, 2.0]\n"


@pytest.mark.parametrize("way", ["pool", "threads"])
def test_split_launch_seconds_is_measured(way: str) -> None:
    """The spawn term's measurement gives a finite, non-negative time (never asserted
    against a figure: the machine is shared)."""
    from presk.runtime.kernel_timing import split_launch_seconds
    if way == "pool" and not pool.available():
        pytest.skip("no C compiler for the pool")
    seconds = split_launch_seconds(2, repeats=4, samples=2, threads=way, cache=False)
    assert np.isfinite(seconds) and seconds >= 0.0


def test_scratch_blocks_are_kept_per_thread_and_slot() -> None:
    """presk_scratch (a tile's packed operands): a slot's block is the same one at the
    thread's next ask of no more bytes, holds what was written to it, grows when asked
    for more (then writable to its last byte), and another slot or another thread has a
    block of its own."""
    import ctypes
    import threading
    lib = pool.load()
    if lib is None:
        pytest.skip("no C compiler for the pool")
    get = lib.presk_scratch
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.c_int32, ctypes.c_int64]
    first = get(0, 1 << 20)
    ctypes.memset(first, 7, 1 << 20)
    assert get(0, 1000) == first and ctypes.string_at(first + (1 << 20) - 1, 1) == b"\x07"
    other = get(1, 1 << 20)
    assert other not in (None, first)
    grown = get(0, 3 << 20)
    ctypes.memset(grown, 1, 3 << 20)
    seen: list[int | None] = []
    worker = threading.Thread(target=lambda: seen.append(get(0, 1 << 20)))
    worker.start()
    worker.join()
    assert seen[0] is not None and seen[0] not in (grown, other)
