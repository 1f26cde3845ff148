"""A blocked sum (`psk_kernel.for … {partials = P}`, presk/summation.py) in native code.

The partials live in a stack array of P scalars (an `llvm.alloca` in the kernel's entry
block); the loop becomes

    p[j] = +0                                  for j < P
    for b < n / P:  for j < P:  p[j] = body(lower + b·P + j, p[j])
    for j < n mod P:            p[j] = body(lower + (n / P)·P + j, p[j])
    for h = P/2 … 1: for j < h: p[j] = p[j] + p[j + h]
    result p[0]

The iterations of the inner loop over j are independent (each reads and writes its own
partial), so LLVM's loop vectorizer turns the partials into vector registers without
reassociating anything: the bits are those of the order, which the kernel interpreter
and C follow. Runs after the kernels became functions and before the rest of the
conversion, innermost blocked sum first (an outer one clones an inner one's lowering);
the body's PSK-Kernel ops are converted afterwards like any other.

A sum down columns — a blocked sum that is the body of an independent loop over columns
and reads each term at [row, column], the column last (a row-major buffer's contiguous
axis): the bias's and the gain's gradients, a sum over the batch — would walk its
partials across rows a row apart, one strided element a lane. It is lowered W columns
at a time instead (`column_sum`): P·W partials, p[j·W + c] the partial j of column
c, each row's W terms added to their column's partials by an inner loop over c that
reads W contiguous elements (LLVM vectorizes it), the tree per column the same way,
then the loop's tail (the store, and anything after the sum) per column. Every column's
partial j still receives the terms of rows j, j + P, … in row order and the tree adds
the same pairs: the bits of the order.
"""

from __future__ import annotations

from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from presk.dialects import kernel as K

from .emitter import Emitter


def lower_blocked_sums(module: ModuleOp) -> None:
    """Every blocked `psk_kernel.for` of the module's (already func) kernels, inner first."""
    loops = [op for op in module.walk() if isinstance(op, K.ForOp) and op.width is not None]
    for loop in reversed(loops):  # pre-order reversed: an inner loop before its outer one
        outer = column_sum(loop)
        if outer is not None:
            _lower_columns(outer, loop, PatternRewriter(outer))
        else:
            _lower(loop, PatternRewriter(loop))


COLUMN_BYTES = 16384
"""The partials of a column-chunk at most (P·W elements): they stay in L1."""

MIN_COLUMNS = 8
"""Fewer columns than this: the plain lowering (a chunk would be mostly empty lanes)."""


def column_sum(op: K.ForOp) -> K.ForOp | None:
    """The loop over columns whose body is this blocked sum, if the sum is one down columns
    (see the module docstring): the outer loop is independent (no carried values), holds
    only constants before the sum and no loops after it, and the sum's body, without
    loops of its own, uses the outer index only as the last index of its loads."""
    outer = op.parent_op()
    if not isinstance(outer, K.ForOp) or outer.width is not None or outer.inits:
        return None
    if outer.trip < MIN_COLUMNS:
        return None
    ops = list(outer.body.block.ops)
    at = ops.index(op)
    if not all(isinstance(o, K.ConstantOp) for o in ops[:at]):
        return None
    if any(o.regions for o in ops[at + 1:]):
        return None
    col = outer.induction
    loads = 0
    for inner in op.body.block.ops:
        if inner.regions:
            return None
        if isinstance(inner, K.LoadOp):
            loads += 1
            if any(i is col for i in inner.indices[:-1]):
                return None
            if inner.indices and inner.indices[-1] is col:
                continue
        if col in inner.operands:
            return None
    if loads == 0 or not any(isinstance(i, K.LoadOp) and i.indices and i.indices[-1] is col
                             for i in op.body.block.ops):
        return None
    return outer


def _lower_columns(outer: K.ForOp, op: K.ForOp, rewriter: PatternRewriter) -> None:
    """The sum down columns `op` inside the loop over columns `outer`, W columns a chunk
    (the module docstring)."""
    t = op.res[0].type
    P = op.width
    W = max(1, min(outer.trip, COLUMN_BYTES // (P * (8 if K.type_name(t) == "f64" else 4))))
    entry = Emitter(rewriter, InsertPoint.at_start(_entry_block(outer)))
    p = entry(llvm.AllocaOp(entry.int(P * W, i64), t, alignment=64))
    e = Emitter(rewriter, InsertPoint.before(outer))
    ops = list(outer.body.block.ops)
    at = ops.index(op)
    mapping: dict[SSAValue, SSAValue] = {}
    for pre in ops[:at]:  # constants: once for every column
        e(pre.clone(value_mapper=mapping))
    tail = [o for o in ops[at + 1:] if not isinstance(o, K.YieldOp)]
    full, rest = divmod(outer.trip, W)
    first = outer.lower.data

    def chunk(b: Emitter, col0: SSAValue, w: int) -> None:
        _column_chunk(b, op, tail, dict(mapping), p, P, W, w, col0, outer.induction)

    if full:
        e.loop(full, lambda b, k: chunk(b, b(arith.AddiOp(b.index(first), b(
            arith.MuliOp(k, b.index(W))))), W))
    if rest:
        chunk(e, e.index(first + full * W), rest)
    rewriter.erase(outer)


def _column_chunk(e: Emitter, op: K.ForOp, tail: list[Operation],
                  mapping: dict[SSAValue, SSAValue], p: SSAValue, P: int, W: int, w: int,
                  col0: SSAValue, col_index: SSAValue) -> None:
    """Columns col0 … col0 + w − 1 of the sum: partials, rows, tree, then the tail."""
    t = op.res[0].type

    def at(b: Emitter, j: SSAValue | int, c: SSAValue) -> SSAValue:
        jw = b(arith.MuliOp(j if isinstance(j, SSAValue) else b.index(j), b.index(W)))
        flat = b(arith.AddiOp(jw, c))
        return b(llvm.GEPOp(p, [llvm.GEP_USE_SSA_VAL], t,
                            ssa_indices=[b(arith.IndexCastOp(flat, i64))], inbounds=True))

    init = mapping.get(op.inits[0], op.inits[0])
    e.loop(P, lambda b, j: b.loop(w, lambda c, k: c(llvm.StoreOp(init, at(c, j, k)))))

    def row(b: Emitter, j: SSAValue, r: SSAValue) -> None:
        def column(c: Emitter, k: SSAValue) -> None:
            slot = at(c, j, k)
            col = c(arith.AddiOp(col0, k))
            inner = dict(mapping)
            inner.update({op.induction: r, op.carried[0]: c(llvm.LoadOp(slot, t)),
                          col_index: col})
            for body_op in op.body.block.ops:
                if isinstance(body_op, K.YieldOp):
                    c(llvm.StoreOp(inner.get(body_op.values[0], body_op.values[0]), slot))
                else:
                    c(body_op.clone(value_mapper=inner))
        b.loop(w, column)

    lower, (full, rest) = op.lower.data, divmod(op.trip, P)
    if full:
        e.loop(full, lambda b, blk: b.loop(P, lambda c, j: row(c, j, c(arith.AddiOp(
            c(arith.AddiOp(c.index(lower), c(arith.MuliOp(blk, c.index(P))))), j)))))
    if rest:
        e.loop(rest, lambda b, j: row(b, j, b(arith.AddiOp(b.index(lower + full * P), j))))
    h = P // 2
    while h:
        def pair(b: Emitter, j: SSAValue, h: int = h) -> None:
            def column(c: Emitter, k: SSAValue) -> None:
                a = at(c, j, k)
                other = c(llvm.GEPOp(a, [h * W], t, inbounds=True))
                c(llvm.StoreOp(c(arith.AddfOp(c(llvm.LoadOp(a, t)), c(llvm.LoadOp(other, t)))), a))
            b.loop(w, column)
        e.loop(h, pair)
        h //= 2

    def finish(b: Emitter, k: SSAValue) -> None:
        out = dict(mapping)
        out.update({col_index: b(arith.AddiOp(col0, k)),
                    op.res[0]: b(llvm.LoadOp(at(b, 0, k), t))})
        for o in tail:
            b(o.clone(value_mapper=out))
    e.loop(w, finish)


def _entry_block(op: Operation) -> Block:
    f = op.parent_op()
    while not isinstance(f, func.FuncOp):
        assert f is not None, "a blocked sum outside a kernel function"
        f = f.parent_op()
    return f.body.block


def _lower(op: K.ForOp, rewriter: PatternRewriter) -> None:
    t = op.res[0].type
    width, lower, trip = op.width, op.lower.data, op.trip
    entry = Emitter(rewriter, InsertPoint.at_start(_entry_block(op)))
    p = entry(llvm.AllocaOp(entry.int(width, i64), t, alignment=64))
    e = Emitter(rewriter, InsertPoint.before(op))

    def at(b: Emitter, j: SSAValue) -> SSAValue:
        return b(llvm.GEPOp(p, [llvm.GEP_USE_SSA_VAL], t,
                            ssa_indices=[b(arith.IndexCastOp(j, i64))], inbounds=True))

    init = op.inits[0]
    e.loop(width, lambda b, j: b(llvm.StoreOp(init, at(b, j))))
    full, rest = divmod(trip, width)

    def iterate(b: Emitter, j: SSAValue, start: SSAValue) -> None:
        slot = at(b, j)
        i = b(arith.AddiOp(start, j))
        _inline_body(op, b, i, b(llvm.LoadOp(slot, t)), slot)

    if full:
        e.loop(full, lambda b, k: b.loop(width, lambda c, j: iterate(
            c, j, c(arith.AddiOp(c.index(lower), c(arith.MuliOp(k, c.index(width))))))))
    if rest:
        e.loop(rest, lambda b, j: iterate(b, j, b.index(lower + full * width)))
    h = width // 2
    while h:
        def pair(b: Emitter, j: SSAValue, h: int = h) -> None:
            a = at(b, j)
            other = b(llvm.GEPOp(a, [h], t, inbounds=True))
            total = b(arith.AddfOp(b(llvm.LoadOp(a, t)), b(llvm.LoadOp(other, t))))
            b(llvm.StoreOp(total, a))
        e.loop(h, pair)
        h //= 2
    rewriter.replace(op, [], [e(llvm.LoadOp(p, t))])


def _inline_body(op: K.ForOp, b: Emitter, index: SSAValue, partial: SSAValue,
                 slot: SSAValue) -> None:
    """A copy of the loop's body at `b`: its index `index`, its carried value `partial`,
    its yield a store of the next partial into `slot`."""
    mapping: dict[SSAValue, SSAValue] = {op.induction: index, op.carried[0]: partial}
    for inner in op.body.block.ops:
        if isinstance(inner, K.YieldOp):
            b(llvm.StoreOp(mapping.get(inner.values[0], inner.values[0]), slot))
            continue
        b(inner.clone(value_mapper=mapping))
