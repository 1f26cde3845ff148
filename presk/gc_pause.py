"""Python's cyclic garbage collector, held back while Presk builds and rewrites IR.

An xDSL module is a large graph of cyclic objects (an op holds its operands' uses, which
hold the op; blocks hold ops, which hold their parent block), and a lowering allocates
hundreds of thousands of them. Under CPython's default thresholds (a collection of the
youngest generation every 700 net allocations) the collector runs thousands of times in
one compile, and each oldest-generation collection walks the whole live graph: measured
on a 450-kernel module (test/e2e/test_plan_bits.py's k-blocked points), 17 % of the
compile's CPU time went to collections that found garbage only after the passes were done.

Two tools, for the two kinds of caller:

* `paused()` — around one bounded piece of work (a pass pipeline, one native compile):
  no collection inside it; the garbage it leaves is collected by the next collection
  after it, as usual. Nested uses are free (only the outermost one re-enables).
* `tune_process()` — for a process Presk owns from start to end (the `presk`,
  `presk-opt` and `presk-translate` commands, the test session): what was imported at
  start-up is frozen out of every later collection, and the youngest generation is
  collected every 50 000 allocations, not 700; collections still happen, so a long
  `presk train` or solve does not grow without bound. A library user's process is left as
  its owner set it.

Neither changes a computed result: only when unreachable objects are freed.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 50_000
"""The allocations between two collections of the youngest generation in a process
`tune_process` set up (CPython's default: 700)."""


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection while the block runs (see the module docstring)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


_tuned = False


def tune_process() -> None:
    """Freeze what is alive now out of later collections and collect the youngest
    generation less often (see the module docstring). Only the first call in a process
    acts: a test session calls the commands' `main` many times, and a later freeze would
    keep whatever garbage the tests before it left, for good."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
