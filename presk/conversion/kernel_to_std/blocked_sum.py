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
        _lower(loop, PatternRewriter(loop))


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
