"""Split launches on the worker pool against a thread started per part and launch.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/pool.py [--quick] [--rounds N] [--workers N]

Measured in one run, the two ways of starting a split kernel's parts (docs/llvm.md,
"Threads" and "The worker pool") interleaved round by round:

- the launch: what a split over N workers adds to a launch whose work is nil
  (`presk.runtime.kernel_timing.split_launch_seconds`: a copy of one element per worker,
  split, against the same copy unsplit — the profile's spawn term), the minimum of each
  round's samples;
- the launch after a gap (bench/pool_wake.c, built here with the pool's C by `cc`): 1 ms
  of sleep, then one launch of two parts whose work is nil, timed — the pool's worker has
  gone to sleep and must be woken — against a thread started and joined after the same
  gap; the minimum and median over 200 launches each;
- the scaled Tower (bench/scaled_tower.psk, D = 256, L = 4) at B = 1024, all-f32 (bench/
  native.py's realization), value and gradient: the default layouts at PRESK_THREADS=1
  and at N workers (its contractions split), each on the pool and a thread per launch.
  Their outputs are compared bit for bit first (a split never changes bits; the exit code
  is 1 when they differ).

Printed: the minimum and the median over rounds, and each way's ratio to the pool's, with
the load average before and after (the machine may be shared: every time is inflated).
A benchmark asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from native import all_f32, load_entry, show_time  # noqa: E402

WAYS = ("pool", "threads")


def load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def launch_rows(workers: int, rounds: int) -> dict[str, list[float]]:
    from presk.runtime.kernel_timing import split_launch_seconds
    times: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(rounds):
        for way in WAYS:
            times[way].append(split_launch_seconds(workers, threads=way, cache=False))
    return times


def wake_rows(tmp: str) -> tuple[float, float, float, float] | None:
    """bench/pool_wake.c's four figures in seconds (None without a C compiler)."""
    import shutil
    import subprocess
    from presk.runtime.pool import source_files
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    for name, text in source_files().items():
        Path(tmp, name).write_text(text, encoding="utf-8")
    exe = str(Path(tmp, "wake"))
    subprocess.run([cc, "-O2", "-std=c99", "-pthread", "-I", tmp,
                    str(ROOT / "bench" / "pool_wake.c"), str(Path(tmp, "presk_pool.c")),
                    "-o", exe], check=True)
    words = subprocess.run([exe, "200", "1000"], check=True, capture_output=True,
                           text=True).stdout.split()
    return tuple(float(w) * 1e-6 for w in (words[1], words[2], words[4], words[5]))


def tower_entries(workers: int, batch: int) -> dict[str, object]:
    """The value-and-gradient entry of the scaled Tower bound to its inputs, per
    configuration; raises SystemExit when the bits differ."""
    from presk.pipeline.call import entry_call
    from presk.runtime.compile import native_program
    module, prepared, params, values = load_entry(ROOT / "bench" / "scaled_tower.psk",
                                                  {"B": batch})
    realization = all_f32(module, prepared, True)
    bound, outputs = {}, {}
    saved = os.environ.get("PRESK_THREADS")
    try:
        for n in (1, workers):
            os.environ["PRESK_THREADS"] = str(n)
            call = entry_call(module, "loss", prepared.dims, params, values, realization,
                              True, True)
            for way in (("pool",) if n == 1 else WAYS):
                entry = native_program(call.pipeline.kernel, threads=way).entry(call.host)
                label = "1 thread" if n == 1 else f"{n} threads, {way}"
                bound[label] = entry.bind(call.inputs)
                outputs[label] = [o.tobytes() for o in entry(call.inputs)]
    finally:
        if saved is None:
            os.environ.pop("PRESK_THREADS", None)
        else:
            os.environ["PRESK_THREADS"] = saved
    first = next(iter(outputs.values()))
    if any(o != first for o in outputs.values()):
        raise SystemExit("bench/pool.py: the split Tower's bits differ from one thread's")
    return bound


def tower_rows(bound: dict[str, object], rounds: int, min_seconds: float
               ) -> dict[str, list[float]]:
    from presk.runtime import time_call
    times: dict[str, list[float]] = {k: [] for k in bound}
    for _ in range(rounds):
        for k, step in bound.items():
            times[k].append(time_call(step, 3, min_seconds).minimum)  # type: ignore[arg-type]
    return times


def table(times: dict[str, list[float]], reference: str) -> None:
    ref = statistics.median(times[reference])
    for k, xs in times.items():
        med = statistics.median(xs)
        print(f"   {k:<22} min {show_time(min(xs))}   median {show_time(med)}   "
              f"{med / ref:6.2f}× the {reference}'s median")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 rounds, B = 256")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    batch = 256 if args.quick else 1024
    print(f"bench/pool.py: {os.cpu_count()} CPUs, load average {load()}")
    print(f"\n== a split launch over {args.workers} workers, its work nil "
          f"(what the split adds), {rounds} rounds")
    table(launch_rows(args.workers, rounds), "pool")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        wake = wake_rows(tmp)
    print("\n== a launch of 2 parts after 1 ms asleep (bench/pool_wake.c), 200 launches")
    if wake is None:
        print("   no C compiler: not measured")
    else:
        print(f"   pool                   min {show_time(wake[0])}   median "
              f"{show_time(wake[1])}\n   threads                min {show_time(wake[2])}   "
              f"median {show_time(wake[3])}   {wake[3] / wake[1]:6.2f}× the pool's median")
    print(f"\n== scaled Tower B = {batch}, all-f32, value and gradient, {rounds} rounds "
          f"(bits identical in every configuration)")
    table(tower_rows(tower_entries(args.workers, batch), rounds,
                     0.02 if args.quick else 0.1), "1 thread")
    print(f"\nload average {load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
