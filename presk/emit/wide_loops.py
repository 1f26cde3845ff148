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

The loops are recognized in the form xDSL's conversion gives an `scf.for` from 0 by 1 to a
constant: a header `%i = phi [0, …], [%next, latch]`, `icmp slt %i, N`, a conditional branch
into the body, and the latch's unconditional branch back; only innermost loops (no other
back edge inside) are marked.
"""

from __future__ import annotations

from llvmlite import ir

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
        for head, latch in _innermost_loops(blocks):
            found = _width(blocks[head:latch + 1], natural)
            if found:
                name, width = found
                _mark(module, blocks[latch].terminator, width, marked)
                used[name].add(width)
                marked += 1
    return used


def _innermost_loops(blocks: list[ir.Block]) -> list[tuple[int, int]]:
    """(header, latch) indices of the loops whose latch branches back unconditionally and
    that hold no other back edge (the vectorizer works on innermost loops)."""
    index = {id(b): j for j, b in enumerate(blocks)}
    back = []  # (j, the earliest block j's terminator branches back to)
    for j, b in enumerate(blocks):
        targets = [index[id(t)] for t in getattr(b.terminator, "operands", ())
                   if isinstance(t, ir.Block)]
        if targets and min(targets) <= j:
            back.append((j, min(targets)))
    return [(head, j) for i, (j, head) in enumerate(back)
            if isinstance(blocks[j].terminator, ir.Branch)
            and not isinstance(blocks[j].terminator, ir.ConditionalBranch)
            and not (i and back[i - 1][0] >= head)]


def _width(body: list[ir.Block], natural: dict[str, int]) -> tuple[str, int] | None:
    """The function of `natural` the loop of `body` (header first, latch last) calls and
    the width to vectorize it at, or None."""
    called = {c.callee.name for b in body for c in b.instructions
              if isinstance(c, ir.CallInstr) and getattr(c.callee, "name", None) in natural}
    trips = _trip_count(body[0], body[-1])
    if len(called) != 1 or trips is None:
        return None  # (two such functions in one loop: each would want its own width)
    [name] = called
    n = natural[name]
    width = next((n * p for p in PARTS if trips % (n * p) == 0), None)
    return (name, width) if width else None


def _trip_count(head: ir.Block, latch: ir.Block) -> int | None:
    """N for a header `%i = phi [0, …], [%i + 1, latch]; icmp slt %i, N; br`."""
    ins = head.instructions
    phi = next((i for i in ins if isinstance(i, ir.PhiInstr)), None)
    cmp = next((i for i in ins if isinstance(i, ir.ICMPInstr)), None)
    if phi is None or cmp is None or cmp.op not in ("slt", "<") or cmp.operands[0] is not phi:
        return None
    bound = cmp.operands[1]
    incoming = dict((id(b), v) for v, b in phi.incomings)
    start = [v for v, b in phi.incomings if b is not latch]
    step = incoming.get(id(latch))
    if not (isinstance(bound, ir.Constant) and len(start) == 1
            and isinstance(start[0], ir.Constant) and start[0].constant == 0
            and isinstance(step, ir.Instruction) and step.opname == "add"
            and step.operands[0] is phi and isinstance(step.operands[1], ir.Constant)
            and step.operands[1].constant == 1):
        return None
    return int(bound.constant)


def _mark(module: ir.Module, term: ir.Instruction, width: int, n: int) -> None:
    """`!llvm.loop !{!self, !{"llvm.loop.vectorize.width", i32 width}}`, a node of its own
    per loop (made unique, then pointed at itself: llvmlite reuses a node of equal
    operands)."""
    hint = module.add_metadata([ir.MetaDataString(module, WIDTH),
                                ir.Constant(ir.IntType(32), width)])
    loop = module.add_metadata([ir.MetaDataString(module, f"presk.loop.{n}")])
    loop.operands = (loop, hint)
    term.set_metadata("llvm.loop", loop)
    term._clear_string_cache()  # llvmlite caches an instruction's text once printed
