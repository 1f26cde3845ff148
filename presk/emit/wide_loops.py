"""Loops calling a math function's vector variant, vectorized over several vectors at once.

erf's vector variant (presk/emit/mathlib_llvm.py) spends most of its time in one Horner
rule of 22 steps, each a multiply then an add on the one before: a chain of latencies.
LLVM's loop vectorizer runs such a loop one vector a step (the host's widest: 512 bits
on AVX-512, 256 on AVX2), and the out-of-order core does not overlap two steps' chains
(its scheduler fills with one chain's dependent operations). Interleaving (`llvm.loop.interleave.count`) does not help: the copies are
calls, inlined one after another.

So a loop whose trip count is a constant multiple of `parts` vectors is told to vectorize
at that many vectors' lanes (`llvm.loop.vectorize.width`), and the function's variant of
that width (`to_llvm(..., parts=k)`) splits its argument into such vectors and writes
each operation once per part, side by side: the parts' chains interleave. Each lane
computes the same operations as before: the bits stay. The other operations of the loop
body are LLVM's own, on vectors it splits alike.

The loops are recognized by presk/emit/loop_marks.py.
"""

from __future__ import annotations

from llvmlite import ir

from presk.emit.loop_marks import innermost_loops, mark, trip_count

PARTS = (4, 2)
"""The multiples of the widest vector a loop may run at, the largest first that divides
its trip count."""

WIDTH = "llvm.loop.vectorize.width"


def widen_loops(module: ir.Module, natural: dict[str, int]) -> dict[str, set[int]]:
    """Mark each innermost loop of `module` that calls a function of `natural` (name →
    its lanes in the widest vector) and runs a constant multiple of `parts·lanes`
    iterations; returns the widths marked, per function called."""
    used: dict[str, set[int]] = {name: set() for name in natural}
    marked = 0
    for fn in module.functions:
        if fn.is_declaration or fn.name in natural:
            continue
        blocks = list(fn.blocks)
        for head, latch in innermost_loops(blocks):
            found = _width(blocks[head:latch + 1], natural)
            if found:
                name, width = found
                mark(module, blocks[latch], [(WIDTH, width)], f"wide.{marked}")
                used[name].add(width)
                marked += 1
    return used


def _width(body: list[ir.Block], natural: dict[str, int]) -> tuple[str, int] | None:
    """The function of `natural` the loop of `body` (header first, latch last) calls and
    the width to vectorize it at, or None."""
    called = {c.callee.name for b in body for c in b.instructions
              if isinstance(c, ir.CallInstr) and getattr(c.callee, "name", None) in natural}
    trips = trip_count(body[0], body[-1])
    if len(called) != 1 or trips is None:
        return None  # (two such functions in one loop: each would want its own width)
    [name] = called
    n = natural[name]
    width = next((n * p for p in PARTS if trips % (n * p) == 0), None)
    return (name, width) if width else None
