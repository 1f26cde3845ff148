"""Timing a call the way a benchmark should: one warm-up call (first-touch page faults,
lazy binding, cold caches), then samples of back-to-back calls long enough to dwarf the
clock's resolution, reported as the median (typical) and the minimum (best case) per call.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median and minimum over `repeats` samples of `number` calls."""

    median: float
    minimum: float
    repeats: int
    number: int = 1


def time_call(fn: Callable[[], object], repeats: int = 7,
              min_seconds: float = 0.2,
              clock: Callable[[], float] = time.perf_counter) -> Timing:
    """Times `fn()`: a warm-up call, then `repeats` samples; the calls per sample are
    scaled (by trial) so that all samples together take at least `min_seconds`.
    `clock`: wall time by default; `time.thread_time` counts only the calling thread's
    CPU time — what a call costs when nothing preempts it (a shared machine's other work
    then adds nothing but what it evicts from the caches)."""
    if repeats < 1 or min_seconds < 0:
        raise ValueError("time_call needs repeats >= 1 and min_seconds >= 0")
    fn()
    number = _calibrate(fn, min_seconds / max(repeats, 1), clock)
    per_call = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(number):
            fn()
        per_call.append((clock() - t0) / number)
    per_call.sort()
    mid = len(per_call) // 2
    median = per_call[mid] if len(per_call) % 2 else (per_call[mid - 1] + per_call[mid]) / 2
    return Timing(median, per_call[0], repeats, number)


def _calibrate(fn: Callable[[], object], target: float,
               clock: Callable[[], float] = time.perf_counter) -> int:
    """How many back-to-back calls of `fn` take at least `target` seconds."""
    number = 1
    while True:
        t0 = clock()
        for _ in range(number):
            fn()
        took = clock() - t0
        if took >= target:
            return number
        grow = target / took * 1.2 if took > 0 else 10.0
        number = max(number + 1, min(math.ceil(number * grow), number * 100))
