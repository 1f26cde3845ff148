"""Short element-wise loops vectorized before LLVM unrolls them.

LLVM's O2 pipeline fully unrolls a loop of a few constant iterations before its loop
vectorizer runs, and its SLP vectorizer often leaves the unrolled copies scalar: the
tutorial's RMSNorm (rows of D = 4 f64) divided each row by its norm with four `vdivsd`,
multiplied it by its gain with four `vmulsd`, squared its 16 elements one at a time — and
a vector read of what scalar stores had just written stalled on store forwarding (Zen 4,
LLVM 22). Such a loop is told to vectorize (`llvm.loop.vectorize.width`: its trip count,
or the most lanes of the widest vector that divide it) and to wait for the vectorizer
before unrolling (`llvm.loop.unroll.disable`); the vectorized loop's follow-up hints,
which replace the loop's own, let the usual unrolling run after (a loop of one or two
vectors is then unrolled whole). The inner loop of a nest over short rows
(presk/conversion/kernel_to_std/collapse_nest.py leaves it nested) becomes one vector a
row: the row's value a broadcast (`vdivpd (%rsi){1to4}`), the column's a vector load.
Each lane computes what its element computed: the bits stay.

A short loop's vector is 256 bits at most (`SHORT_BITS`), on an AVX-512 host too. Its
data is what the kernel before it just stored and what the kernel after it loads at
once: a nest over short rows stores one 256-bit vector a row (D = 4 f64), and a 512-bit
load spanning two such stores cannot be forwarded from them — it waits for both to reach
the cache. Zen 4 runs a 512-bit operation as two 256-bit halves, so the narrower vector
costs such a loop no throughput. On the tutorial's f64 step (AVX-512, Zen 4): 0.91 →
0.88 µs (the 5th percentile of 200 samples, over eight processes each; docs/llvm.md).

Marked: an innermost loop presk/emit/loop_marks.py recognizes, not marked already
(presk/emit/wide_loops.py's loops run at their math function's width), of at most
SHORT_TRIPS iterations, with no value carried (its header's one phi is its index: a sum
stays in order), no call but an LLVM intrinsic's (sqrt), no index divided or taken modulo
(a collapsed loop's broadcasts, which the vectorizer gathers or leaves scalar), no access
to the stack (a blocked sum's partials, which only unrolling makes registers), and a
float load or store. A loop the vectorizer then refuses would stay rolled: hence the
narrow rule.
"""

from __future__ import annotations

from llvmlite import ir

from presk.emit.loop_marks import induction, innermost_loops, is_marked, mark

SHORT_TRIPS = 64
"""The longest loop marked: loops LLVM unrolls whole before vectorizing are shorter."""

SHORT_BITS = 256
"""The widest vector a short loop runs at (the module docstring: store forwarding)."""

HINTS = [("llvm.loop.vectorize.enable", True), ("llvm.loop.unroll.disable",),
         ("llvm.loop.vectorize.followup_vectorized", [("llvm.loop.isvectorized", 1)])]
"""The hints besides the width: vectorize, and unroll only after (the follow-up's hints
replace the loop's own once it is vectorized)."""


def vectorize_short_loops(module: ir.Module, vector_bits: int) -> int:
    """Mark each short element-wise loop of `module` to vectorize at its width (a vector
    of `vector_bits`, and of SHORT_BITS, at most); returns how many were marked."""
    vector_bits = min(vector_bits, SHORT_BITS)
    marked = 0
    for fn in module.functions:
        if fn.is_declaration:
            continue
        blocks = list(fn.blocks)
        for head, latch in innermost_loops(blocks):
            width = _width(blocks[head:latch + 1], vector_bits)
            if width and not is_marked(blocks[latch]):
                mark(module, blocks[latch], [("llvm.loop.vectorize.width", width), *HINTS],
                     f"short.{marked}")
                marked += 1
    return marked


def _width(body: list[ir.Block], vector_bits: int) -> int | None:
    """The lanes to run the loop of `body` (header first, latch last) at, if it is short
    and element-wise: its trip count or the most of a vector's lanes (for its widest
    float) that divide it, 2 at least."""
    found = induction(body[0], body[-1])
    if found is None or found[1] > SHORT_TRIPS:
        return None
    trips = found[1]
    if sum(isinstance(i, ir.PhiInstr) for i in body[0].instructions) != 1:
        return None  # a value carried from one iteration to the next
    widest = 0
    for instr in (i for b in body for i in b.instructions):
        if isinstance(instr, ir.CallInstr) and \
                not getattr(instr.callee, "name", "").startswith("llvm."):
            return None
        if instr.opname in ("udiv", "urem", "sdiv", "srem"):
            return None
        value = instr if isinstance(instr, ir.LoadInstr) else \
            instr.operands[0] if isinstance(instr, ir.StoreInstr) else None
        if value is not None and _on_stack(instr.operands[-1]):
            return None  # a blocked sum's partials: unrolled, they become registers
        if value is not None and isinstance(value.type, ir.DoubleType | ir.FloatType):
            widest = max(widest, 64 if isinstance(value.type, ir.DoubleType) else 32)
    if not widest:
        return None
    lanes = vector_bits // widest
    width = 1
    while width * 2 <= lanes and trips % (width * 2) == 0:
        width *= 2
    return width if width >= 2 else None


def _on_stack(pointer: ir.Value) -> bool:
    """Whether the pointer is into an `alloca` (through its GEPs)."""
    while isinstance(pointer, ir.GEPInstr):
        pointer = pointer.pointer
    return isinstance(pointer, ir.AllocaInstr)
