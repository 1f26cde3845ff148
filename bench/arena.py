"""The placed arena beside the live peak (docs/memory.md, "The placed arena").

    python bench/arena.py [--grad]

For the tutorial's loss (mixed and all-f64), tutorials 03-05, the scaled Tower and the
deep residual stack, at three batch sizes each: the live peak of the arena's own buffers,
that peak with each buffer in its slot (whole cache lines from 64 bytes, a smaller one its
own size: no arena of that rule is smaller),
and the arena that native code and the C program allocate (presk/kernel_abi/placement.py),
with its ratio to each. Sizes are counted, not timed: the figures do not depend on the
machine's load.
"""

from __future__ import annotations

import sys
from pathlib import Path

from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from presk.kernel_abi.calling import slot
from presk.kernel_abi.lives import live_bytes, record_trace
from presk.kernel_abi.placement import place
from presk.pipeline import kernel_pipeline

ROOT = Path(__file__).resolve().parents[1]
MIXED = str(ROOT / "test" / "fixtures" / "realization_mixed.json")
CASES = [  # (program, realization, batch sizes)
    ("tutorial/07_train.psk", MIXED, (1, 4, 16)),
    ("tutorial/07_train.psk", None, (1, 4, 16)),
    ("tutorial/03_activations.psk", None, (1, 4, 16)),
    ("tutorial/04_mlp.psk", None, (1, 4, 16)),
    ("tutorial/05_stack.psk", None, (1, 4, 16)),
    ("bench/scaled_tower.psk", None, (4, 64, 1024)),
    ("test/memory_programs/deep_residual.psk", None, (1, 5, 64)),
]


def figures(core, b: int, realization: str | None, grad: bool) -> tuple[int, int, int]:
    """(live peak, rounded live peak, placed arena) of the arena's own buffers."""
    trace = record_trace(kernel_pipeline(core, "loss", {"B": b}, realization,
                                         grad=grad).kernel)
    made = lambda buf: buf.kind == "made"  # noqa: E731
    live = max(live_bytes(trace, made), default=0)
    rounded = max(live_bytes(trace, made, size=lambda buf: slot(buf.bytes)), default=0)
    return live, rounded, place(trace).need[trace.entry.sym_name.data]


def main(argv: list[str]) -> int:
    grad = "--grad" in argv
    print(f"{'program':<40} {'types':<6} {'B':>5} {'live':>10} {'rounded':>10} "
          f"{'placed':>10}  {'/live':>6} {'/rounded':>8}")
    for path, realization, sizes in CASES:
        core = lower_program(elaborate(str(ROOT / path)))
        for b in sizes:
            live, rounded, placed = figures(core, b, realization, grad)
            print(f"{path:<40} {'mixed' if realization else 'f64':<6} {b:>5} {live:>10} "
                  f"{rounded:>10} {placed:>10}  {placed / live:>6.3f} {placed / rounded:>8.3f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
