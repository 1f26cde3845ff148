"""The register tile of a `tiled` contraction kernel, for convert-psk-kernel-to-std.

A tiled kernel's nest is `for i { for j { …; acc = for k iter(…) {…}; …; store [.., i, j] } }`
(outer parallel loops may surround it). Its layout `tile = [R, C]` is a directive: compute
R rows × C columns of outputs together — the C columns as one vector of C lanes (LLVM
splits it into the machine's registers), the R rows as R copies of every op that depends
on i, sharing every op that does not (the loads of the other operand). Each output still
sees exactly the ops of the nest in their order (the k loop ascending, one rounding each),
so every layout computes the same bits: vectorizing across j and unrolling across i only
changes which outputs run together.

* An op is classified by whether it depends on i and on j (through loop indices, loads
  and loop-carried values). A value that depends on j is a vector of C lanes; one that
  depends on i has R copies; a scalar meeting a vector is broadcast.
* A load whose last index is j is a vector load (contiguous). A load that has j at another
  position reads a transposed copy of its buffer (packed once per launch), in which j is
  the last axis. Loads without j are scalars.
* Where a launch packs (a transposed copy, panels): under `scratch = "pool"` in the
  calling thread's scratch blocks of the runtime (`presk_scratch(slot, bytes)`,
  presk/runtime/presk_pool.c), kept from one launch to the next — a fresh `malloc` of a
  packed operand (256 KiB to MBs) came from new pages every launch, their faults ~7 % of
  the scaled Tower's gradient; under `scratch = "malloc"` (no runtime library: presk-opt,
  the pool not built) `malloc` at the start and `free` at the end. The copy is written
  whole before it is read, so where it lives changes no bits.
* Under `pack = "panels"` the product's operands are copied once per launch into panels
  (kernel_abi/tiles.py `panel_loads`): the j operand as [J/C, the other axes, C], so a
  tile's k sweep reads C columns contiguously, one row after the other (no stride of a
  whole row between k and k + 1, which at 1-2 KiB rows maps every k to the same few cache
  sets); the i operand whose last axis is i (xᵀ·g) as [I/R, the other axes, R]. Only
  the full tiles' rows and columns are copied (the remainder nests read the operand as
  it is). Where R elements are less than a 64-byte line (xᵀ·g's x: 8 f32, 32 bytes)
  one copy sweep fills the panels a line holds (`_line_group`): each line of x is read
  once, not once per panel a whole operand apart (the scaled Tower's xᵀ·g 541 → 474 µs a
  launch, f32, 2 parts). The same values in the same order: the same bits.
* Math functions on vectors run lane by lane (the library's scalar functions).
* Under `kblock = N` the tiles sweep k in blocks of N: all tiles over k in [0, N), then
  all over [N, 2N), …; between blocks each tile's accumulators are stored to its output
  and loaded back (in the sum's own type, so exactly), and only the last block runs the
  epilogue. Each output still sees its k loop ascending, one rounding a step: the same
  bits; a block's panels (N·J of the j operand) stay in L2 while every tile reads them.
  A j operand whose last axis is j is then not copied at all (tiles.py `panel_loads`):
  a block of its rows, read in place, stays in L2 the same.
  A nest whose sum is not stored as it is (a bf16 output, two sums) runs its k whole.
* The tiles cover [0, R·⌊I/R⌋) × [0, C·⌊J/C⌋); the rest runs the nest as it is (copies of
  the original loops with narrowed bounds), lowered by the scalar patterns.

`tile_kernel(block, kernel_layout, rewriter, scratch)` rewrites a kernel function's block in place and
reports whether it did; a nest of another shape is left to the scalar lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import arith, llvm, scf
from xdsl.dialects.builtin import (DenseArrayBase, Float32Type, Float64Type, IndexType,
    IntegerAttr, VectorType, i16, i32, i64)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from .emitter import Emitter, as_buffer, lower_scalar_op
from presk.dialects import kernel as K
from presk.kernel_abi.tiles import (Nest, find_nest, packed_loads, panel_loads, panel_shape,
                                    sweeps_k_in_blocks)

PTR = llvm.LLVMPointerType()


# --------------------------------------------------------------------------------------
# The nest's shape
# --------------------------------------------------------------------------------------


def depends(nest: Nest) -> dict[SSAValue, frozenset[str]]:
    """Which of i and j each value of the j body depends on (loop-carried values to a
    fixed point: a carried value depends on what its init and its yield depend on)."""
    deps: dict[SSAValue, frozenset[str]] = {nest.i: frozenset("i"), nest.j: frozenset("j")}
    get = lambda v: deps.get(v, frozenset())  # noqa: E731  values from outside: neither
    changed = True
    while changed:
        changed = False
        for op in nest.j_loop.body.walk():
            if isinstance(op, K.ForOp):
                pairs = [(arg, res, get(arg) | get(init) | get(out)) for arg, res, init, out
                         in zip(op.carried, op.results, op.inits, _yielded(op))]
                for arg, res, d in pairs:
                    if get(arg) != d or get(res) != d:
                        deps[arg] = deps[res] = d
                        changed = True
                continue
            d = frozenset().union(*(get(o) for o in op.operands))
            for r in op.results:
                if get(r) != d:
                    deps[r] = d
                    changed = True
    return deps


def _yielded(loop: K.ForOp) -> list[SSAValue]:
    last = loop.body.block.last_op
    assert isinstance(last, K.YieldOp)
    return list(last.values)


# --------------------------------------------------------------------------------------
# Emitting the tile
# --------------------------------------------------------------------------------------


@dataclass
class Value:
    """A value of the tile: one per row if it depends on i (else shared), each a vector of
    C lanes if it depends on j (else a scalar)."""

    rows: list[SSAValue]
    vector: bool

    def row(self, r: int) -> SSAValue:
        return self.rows[r] if len(self.rows) > 1 else self.rows[0]


@dataclass(frozen=True)
class KBlock:
    """One block of a k-blocked sweep: the nest's k loop run over [lower, upper), its
    accumulators loaded from `store`'s place unless `first`, stored there unless `last`
    (when the rest of the body, the epilogue and the store, runs instead)."""

    loop: K.ForOp
    store: K.StoreOp
    lower: int
    upper: int
    first: bool
    last: bool


def k_blocks(nest: Nest, kblock: int) -> list[KBlock | None]:
    """The blocks of the nest's k loop under `kblock` ([None]: the k loop whole — no
    kblock, a body with other than one sum and one contiguous store of the sum's type,
    or a k loop no longer than a block)."""
    if not sweeps_k_in_blocks(nest, kblock):
        return [None]
    ops = list(nest.j_loop.body.block.ops)
    loop = next(op for op in ops if isinstance(op, K.ForOp))
    store = next(op for op in ops if isinstance(op, K.StoreOp))
    lo, hi = loop.lower.data, loop.upper.data
    return [KBlock(loop, store, a, min(a + kblock, hi), a == lo, a + kblock >= hi)
            for a in range(lo, hi, kblock)]


@dataclass
class Tiler:
    nest: Nest
    deps: dict[SSAValue, frozenset[str]]
    emit: object  # the scalar lowering's Emitter (loads, stores, offsets, bf16)
    packed: dict[SSAValue, tuple[SSAValue, list[int]]]  # buffer → (copy, axis order)
    panels: dict[SSAValue, Panels] = field(default_factory=dict)  # operand → its panels
    env: dict[SSAValue, Value] = field(default_factory=dict)
    kb: KBlock | None = None  # the k block this sweep runs (None: k whole)

    @property
    def R(self) -> int:
        return self.nest.rows

    @property
    def C(self) -> int:
        return self.nest.cols

    def dep(self, v: SSAValue) -> frozenset[str]:
        return self.deps.get(v, frozenset())

    def value(self, v: SSAValue) -> Value:
        return self.env.get(v) or Value([v], False)

    # ---- vectors ----
    def broadcast(self, e, x: SSAValue) -> SSAValue:
        vt = VectorType(x.type, [self.C])
        one = e(llvm.InsertElementOp(e(llvm.UndefOp(vt)), x, e.int(0, i32)))
        return e(llvm.ShuffleVectorOp(one, one, DenseArrayBase.from_list(i32, [0] * self.C),
                                      vt))

    def lane(self, e, v: SSAValue, c: int) -> SSAValue:
        t = v.type
        assert isinstance(t, VectorType)
        one = e(llvm.ShuffleVectorOp(v, v, DenseArrayBase.from_list(i32, [c]),
                                     VectorType(t.element_type, [1])))
        return e(llvm.BitcastOp(one, t.element_type))

    def gather(self, e, lanes: Sequence[SSAValue]) -> SSAValue:
        vt = VectorType(lanes[0].type, [self.C])
        v = e(llvm.UndefOp(vt))
        for c, x in enumerate(lanes):
            v = e(llvm.InsertElementOp(v, x, e.int(c, i32)))
        return v

    def operand(self, e, v: SSAValue, r: int, vector: bool) -> SSAValue:
        x = self.value(v)
        got = x.row(r)
        return self.broadcast(e, got) if vector and not x.vector else got

    # ---- the body ----
    def block(self, e, block: Block) -> list[Value] | None:
        for op in block.ops:
            if isinstance(op, K.YieldOp):
                return [self.value(v) for v in op.values]
            self.op(e, op)
            if self.kb is not None and op is self.kb.loop and not self.kb.last:
                self.keep_partial(e)
                return None  # the epilogue and the store wait for the last block
        return None

    def partial_at(self, e, r: int) -> tuple[SSAValue, K.BufferType, SSAValue]:
        """Where row r's accumulator is kept between k blocks: (the output, its type,
        the offset of its C columns)."""
        assert self.kb is not None
        store = self.kb.store
        t = store.buffer.type
        assert isinstance(t, K.BufferType)
        return store.buffer, t, e.flat(t, self._indices(e, list(store.indices), r, None))

    def keep_partial(self, e) -> None:
        assert self.kb is not None
        for r in range(self.R):
            buf, t, offset = self.partial_at(e, r)
            self.vector_store(e, self.operand(e, self.kb.loop.results[0], r, True), buf, t,
                              offset)

    def op(self, e, op: Operation) -> None:
        if isinstance(op, K.LoadOp):
            self.load(e, op)
        elif isinstance(op, K.StoreOp):
            self.store(e, op)
        elif isinstance(op, K.ForOp):
            self.loop(e, op)
        else:
            self.scalar(e, op)

    def _row_count(self, v: SSAValue) -> int:
        return self.R if "i" in self.dep(v) else 1

    def _indices(self, e, indices: Sequence[SSAValue], r: int, order: list[int] | None
                 ) -> list[SSAValue]:
        """The indices for row r with j at its first column (in `order` if packed)."""
        out = []
        for x in indices:
            if x is self.nest.i:
                out.append(e(arith.AddiOp(self.i0, e.index(r))) if r else self.i0)
            elif x is self.nest.j:
                out.append(self.j0)
            else:
                out.append(self.value(x).row(0))
        return [out[a] for a in order] if order is not None else out

    def load(self, e, op: K.LoadOp) -> None:
        if op.buffer in self.panels:
            return self.panel_load(e, op, self.panels[op.buffer])
        buf, order = op.buffer, None
        has_j = self.nest.j in op.indices
        if has_j and op.indices[-1] is not self.nest.j:
            buf, order = self.packed[op.buffer]
        t = op.buffer.type
        rows = []
        for r in range(self._row_count(op.result)):
            idx = self._indices(e, list(op.indices), r, order)
            offset = e.flat(t if order is None else _permuted(t, order), idx)
            if has_j:
                rows.append(self.vector_load(e, buf, t, offset))
            else:
                rows.append(e.load(op.buffer, offset))
        self.env[op.result] = Value(rows, has_j)

    def panel_load(self, e, op: K.LoadOp, panels: Panels) -> None:
        """A load from the operand's panels: the j operand's C lanes at j0 as a vector,
        the i operand's R rows at i0 as R scalars (the panel's last index)."""
        by_j = panels.loop is self.nest.j_loop
        rows = []
        for r in range(self._row_count(op.result)):
            idx = self._indices(e, list(op.indices), 0 if not by_j else r, None)
            start = idx[panels.axis]
            block = e(arith.DivUIOp(e(arith.SubiOp(start, e.index(panels.origin))),
                                    e.index(panels.width)))
            at = [block] + [x for a, x in enumerate(idx) if a != panels.axis] \
                + [e.index(0 if by_j else r)]
            offset = e.flat(panels.copy.type, at)
            rows.append(self.vector_load(e, panels.copy, op.buffer.type, offset) if by_j
                        else e.load(panels.copy, offset))
        self.env[op.result] = Value(rows, by_j)

    def vector_load(self, e, buf: SSAValue, t: K.BufferType, offset: SSAValue) -> SSAValue:
        bf16 = K.type_name(t.element) == "bf16"
        stored = i16 if bf16 else t.element
        p = e(llvm.GEPOp(e.ptr(buf), [llvm.GEP_USE_SSA_VAL], stored,
                         ssa_indices=[e(arith.IndexCastOp(offset, i64))], inbounds=True))
        raw = e(llvm.LoadOp(p, VectorType(stored, [self.C]), alignment=K.element_bytes(stored)))
        if not bf16:
            return raw
        wide = e(arith.ExtUIOp(raw, VectorType(i32, [self.C])))
        shifted = e(arith.ShLIOp(wide, self.broadcast(e, e.int(16, i32))))
        return e(arith.BitcastOp(shifted, VectorType(Float32Type(), [self.C])))

    def store(self, e, op: K.StoreOp) -> None:
        t = op.buffer.type
        contiguous = op.indices[-1] is self.nest.j
        for r in range(self.R):
            value = self.operand(e, op.value, r, True)
            idx = self._indices(e, list(op.indices), r, None)
            if contiguous:
                self.vector_store(e, value, op.buffer, t, e.flat(t, idx))
                continue
            for c in range(self.C):  # a transposed output: element by element
                at = [e(arith.AddiOp(x, e.index(c))) if x is self.j0 and c else x for x in idx]
                e.store(self.lane(e, value, c), op.buffer, e.flat(t, at))

    def vector_store(self, e, value: SSAValue, buf: SSAValue, t: K.BufferType,
                     offset: SSAValue) -> None:
        if K.type_name(t.element) == "bf16":
            value = self.gather(e, [e.f32_to_bf16(self.lane(e, value, c))
                                    for c in range(self.C)])
        stored = value.type.element_type  # type: ignore[attr-defined]
        p = e(llvm.GEPOp(e.ptr(buf), [llvm.GEP_USE_SSA_VAL], stored,
                         ssa_indices=[e(arith.IndexCastOp(offset, i64))], inbounds=True))
        e(llvm.StoreOp(value, p, alignment=K.element_bytes(stored)))

    def loop(self, e, op: K.ForOp) -> None:
        slots = []  # per carried value: (rows, vector)
        for arg in op.carried:
            slots.append((self._row_count(arg), "j" in self.dep(arg)))
        inits = []
        kb = self.kb if self.kb is not None and op is self.kb.loop else None
        for init, (n, vec) in zip(op.inits, slots):
            if kb is not None and not kb.first:  # the last block's accumulators, kept
                inits += [self.vector_load(e, *self.partial_at(e, r)) for r in range(n)]
            else:
                inits += [self.operand(e, init, r, vec) for r in range(n)]
        lower, upper = (kb.lower, kb.upper) if kb is not None else \
            (op.lower.data, op.upper.data)
        block = Block(arg_types=[IndexType()] + [v.type for v in inits])
        loop = scf.ForOp(e.index(lower), e.index(upper), e.index(1), inits, Region(block))
        e(loop)
        inner = type(e)(e.rewriter, InsertPoint.at_end(block))
        self.env[op.induction] = Value([block.args[0]], False)
        args = iter(block.args[1:])
        for arg, (n, vec) in zip(op.carried, slots):
            self.env[arg] = Value([next(args) for _ in range(n)], vec)
        out = self.block(inner, op.body.block)
        assert out is not None
        yielded = []
        for v, (n, vec) in zip(_yielded(op), slots):
            yielded += [self.operand(inner, v, r, vec) for r in range(n)]
        block.add_op(scf.YieldOp(*yielded))
        results = iter(loop.results)
        for res, (n, vec) in zip(op.results, slots):
            self.env[res] = Value([next(results) for _ in range(n)], vec)

    def scalar(self, e, op: Operation) -> None:
        """An arithmetic op (or math, a cast, a constant) for every row it depends on, on
        vectors if it depends on j: the scalar lowering's own patterns build each copy."""
        result = op.results[0]
        vec = "j" in self.dep(result)
        rows = []
        for r in range(self._row_count(result)):
            args = [self.operand(e, v, r, vec) for v in op.operands]
            if vec and isinstance(op, K.MathOp):
                lanes = [self.emit_scalar(e, op, [self.lane(e, a, c) for a in args])
                         for c in range(self.C)]
                rows.append(self.gather(e, lanes))
            else:
                rows.append(self.emit_scalar(e, op, args, vec))
        self.env[result] = Value(rows, vec)

    def emit_scalar(self, e, op: Operation, args: list[SSAValue], vec: bool = False
                    ) -> SSAValue:
        """A copy of `op` on `args`, lowered by the scalar patterns at once."""
        t = args[0].type if args else op.results[0].type
        if isinstance(op, K.ConstantOp):
            x = e.float(op.number, op.result.type)
            return self.broadcast(e, x) if vec else x
        if isinstance(op, K.CastOp):
            to = op.result.type
            to = VectorType(to, [self.C]) if vec else to
            return e(arith.ExtFOp(args[0], to) if _is_f64(op.result.type)
                     else arith.TruncFOp(args[0], to))
        return lower_scalar_op(e, op, args, t)


def _is_f64(t: Attribute) -> bool:
    return isinstance(t, Float64Type)


def _permuted(t: K.BufferType, order: list[int]) -> K.BufferType:
    axes = t.axes.data
    from xdsl.dialects.builtin import ArrayAttr
    return K.BufferType(t.element, ArrayAttr([axes[a] for a in order]))


# --------------------------------------------------------------------------------------
# Packing: a transposed copy of a buffer, j's axis last
# --------------------------------------------------------------------------------------


def pack_order(nest: Nest, op: K.LoadOp) -> list[int]:
    """The axis order of the copy: the buffer's axes with j's moved last."""
    p = list(op.indices).index(nest.j)
    return [a for a in range(len(op.indices)) if a != p] + [p]


@dataclass
class Scratch:
    """Where a launch's packed copies live: the runtime's per-thread blocks
    (`presk_scratch`, a slot per copy while slots last) or malloc'd and freed at the end."""

    mode: str  # "pool" or "malloc"
    used: int = 0  # slots taken
    frees: list[SSAValue] = field(default_factory=list)  # pointers to free at the end

    def alloc(self, e, nbytes: int) -> SSAValue:
        size = e(arith.ConstantOp(IntegerAttr(max(nbytes, 1), i64)))
        if self.mode == "pool" and self.used < SCRATCH_SLOTS:
            slot = e(arith.ConstantOp(IntegerAttr(self.used, i32)))
            self.used += 1
            return e(llvm.CallOp(SCRATCH, slot, size, return_type=PTR))
        mem = e(llvm.CallOp("malloc", size, return_type=PTR))
        self.frees.append(mem)
        return mem


SCRATCH = "presk_scratch"
SCRATCH_SLOTS = 4  # PRESK_SCRATCH_SLOTS of presk/runtime/presk_pool.h


def emit_pack(e, buf: SSAValue, order: list[int], scratch: Scratch) -> SSAValue:
    """A copy of `buf` with its axes in `order` in `scratch`, filled; the copy as a
    buffer value."""
    t = buf.type
    assert isinstance(t, K.BufferType)
    mem = scratch.alloc(e, t.bytes)
    copy = as_buffer(e, mem, _permuted(t, order))
    shape = t.shape

    def nest_level(b, idx: list[SSAValue], level: int) -> None:
        if level == len(shape):
            x = b(llvm.LoadOp(b.element_ptr(buf, b.flat(t, idx)), _stored(t)))
            at = b.flat(_permuted(t, order), [idx[a] for a in order])
            b(llvm.StoreOp(x, b.element_ptr(copy, at)))
            return
        b.loop(shape[level], lambda inner, i: nest_level(inner, idx + [i], level + 1))

    nest_level(e, [], 0)
    return copy


@dataclass(frozen=True)
class Panels:
    """An operand of the product copied into panels along the axis a tile loop indexes:
    panel b holds the `width` consecutive indices origin + b·width … of that axis for
    every index of the others (in the buffer's order), those `width` contiguous — so a
    tile's sweep of the k loop reads one contiguous stretch."""

    copy: SSAValue
    loop: K.ForOp  # the tile loop (i or j) whose index the panels group
    axis: int  # the buffer's axis that loop indexes
    width: int  # R for the i operand, C for the j operand
    origin: int  # the loop's lower bound


def emit_panels(e, buf: SSAValue, loop: K.ForOp, axis: int, width: int,
                scratch: Scratch) -> Panels:
    """The panels of `buf` over the full tiles of `loop` in `scratch`, filled."""
    t = buf.type
    assert isinstance(t, K.BufferType)
    origin = loop.lower.data
    pt = K.BufferType.get(t.element, *panel_shape(t, loop, axis, width))
    mem = scratch.alloc(e, pt.bytes)
    copy = as_buffer(e, mem, pt)
    # The loops: [panels / G, the other axes, G, width], panel = G·p + g. Where the
    # panelled axis is the source's last (xᵀ·g's x, panels of R = 8 f32: 32 bytes), G
    # panels side by side make a whole 64-byte line of a source row, read once, not once
    # per panel a whole operand later.
    group = _line_group(t, axis, width, pt.shape[0])
    shape = [pt.shape[0] // group, *pt.shape[1:-1], group, width]

    def nest_level(b, idx: list[SSAValue], level: int) -> None:
        if level == len(shape):
            panel = b(arith.AddiOp(b(arith.MuliOp(idx[0], b.index(group))), idx[-2]))
            first = b(arith.AddiOp(b(arith.MuliOp(panel, b.index(width))), b.index(origin)))
            source = idx[1:-2]
            source.insert(axis, b(arith.AddiOp(first, idx[-1])))
            x = b(llvm.LoadOp(b.element_ptr(buf, b.flat(t, source)), _stored(t)))
            at = [panel, *idx[1:-2], idx[-1]]
            b(llvm.StoreOp(x, b.element_ptr(copy, b.flat(pt, at))))
            return
        b.loop(shape[level], lambda inner, i: nest_level(inner, idx + [i], level + 1))

    nest_level(e, [], 0)
    return Panels(copy, loop, axis, width, origin)


def _line_group(t: K.BufferType, axis: int, width: int, panels: int) -> int:
    """How many consecutive panels one copy sweep fills together: as many as a 64-byte
    line of the source holds when the panelled axis is its last (else 1), dividing the
    panels' count."""
    if axis != len(t.shape) - 1:
        return 1
    group = max(1, 64 // max(1, width * K.element_bytes(t.element)))
    while group > 1 and panels % group:
        group //= 2
    return group


def _stored(t: K.BufferType) -> Attribute:
    return i16 if K.type_name(t.element) == "bf16" else t.element


# --------------------------------------------------------------------------------------
# The rewrite
# --------------------------------------------------------------------------------------


def tile_kernel(block: Block, layout: K.LayoutAttr, rewriter: PatternRewriter,
                scratch: str = "malloc") -> bool:
    """Replace the nest in `block` (a kernel function's body, its buffers already views of
    pointers) by the tiled loops and the remainder nests; packed copies where `scratch`
    (`pool` or `malloc`) says."""
    make_emit = lambda at: Emitter(rewriter, at)  # noqa: E731
    nest = find_nest(block, layout)
    if nest is None:
        return False
    deps = depends(nest)
    ret = block.last_op
    assert ret is not None
    # Packing at the top of the function (every buffer it packs is an argument view).
    outermost = next(op for op in block.ops if isinstance(op, K.ForOp))
    top = make_emit(InsertPoint.before(outermost))
    packed: dict[SSAValue, tuple[SSAValue, list[int]]] = {}
    panels: dict[SSAValue, Panels] = {}
    memory = Scratch(scratch)
    kblock = layout.kblock.data
    for op, loop, width in (panel_loads(nest, kblock) if layout.panels else []):
        panels[op.buffer] = emit_panels(top, op.buffer, loop,
                                        list(op.indices).index(loop.induction), width, memory)
    for op in packed_loads(nest, layout.panels, kblock):
        order = pack_order(nest, op)
        packed[op.buffer] = (emit_pack(top, op.buffer, order, memory), order)
    for kb in k_blocks(nest, kblock):
        _emit_tiles(nest, deps, packed, make_emit, panels, kb)
    rest = _rest_rows(nest)
    if rest is not None:  # the rows past the last full tile: a tile of fewer rows
        by_j = {b: p for b, p in panels.items() if p.loop is nest.j_loop}
        _emit_tiles(rest, deps, packed, make_emit, by_j, None,
                    nest.main_end(nest.i_loop, nest.rows))
    _remainders(nest, rewriter, rest is not None)
    end = make_emit(InsertPoint.before(ret))
    for mem in memory.frees:
        end(llvm.CallOp("free", mem))
    return True


def _rest_rows(nest: Nest) -> Nest | None:
    """The nest of the rows past the last full tile, R' = I mod R of them a tile (their
    j operand from the same panels, their i operand read in place — its panels hold only
    full tiles' rows), or None when the tiles cover every row. A tile of R' rows is the
    nest's own ops in their order for those rows (same bits), where the scalar nest ran
    them ~30× slower: [12, 32] on the scaled Tower's 1024 rows leaves 4."""
    start = nest.main_end(nest.i_loop, nest.rows)
    left = nest.i_loop.upper.data - start
    if left <= 0:
        return None
    return Nest(nest.i_loop, nest.j_loop, left, nest.cols)


def _emit_tiles(nest: Nest, deps, packed, make_emit, panels, kb: KBlock | None,
                i_start: int | None = None) -> None:
    """The tile loops over rows [i_start (the i loop's lower bound), the last full tile
    of nest.rows) × the full tiles' columns, each tile the nest's body (the k block `kb`,
    or k whole)."""
    e = make_emit(InsertPoint.before(nest.i_loop))
    i_lo = nest.i_loop.lower.data if i_start is None else i_start
    i_end = nest.main_end(nest.i_loop, nest.rows, i_lo)
    j_end = nest.main_end(nest.j_loop, nest.cols)
    i_block, j_block = Block(arg_types=[IndexType()]), Block(arg_types=[IndexType()])
    e(scf.ForOp(e.index(i_lo), e.index(i_end), e.index(nest.rows), [], Region(i_block)))
    inner = make_emit(InsertPoint.at_end(i_block))
    inner(scf.ForOp(inner.index(nest.j_loop.lower.data), inner.index(j_end),
                    inner.index(nest.cols), [], Region(j_block)))
    i_block.add_op(scf.YieldOp())
    body = make_emit(InsertPoint.at_end(j_block))
    tiler = Tiler(nest, deps, body, packed, panels, kb=kb)
    tiler.i0, tiler.j0 = i_block.args[0], j_block.args[0]  # type: ignore[attr-defined]
    tiler.block(body, nest.j_loop.body.block)
    j_block.add_op(scf.YieldOp())


def _remainders(nest: Nest, rewriter: PatternRewriter, rows_tiled: bool) -> None:
    """What the tiles leave, as copies of the original nest with narrowed bounds: the
    columns past the last full tile (of the tiled rows — every row when `rows_tiled`, the
    rest rows having run as a smaller tile), then, unless `rows_tiled`, the rows past the
    last full tile (every column)."""
    i_loop, j_loop = nest.i_loop, nest.j_loop
    i_end = i_loop.upper.data if rows_tiled else nest.main_end(i_loop, nest.rows)
    j_end = nest.main_end(j_loop, nest.cols)
    if j_end < j_loop.upper.data:
        cols = i_loop.clone()
        cols.attributes["upper"] = _int(i_end)
        _only_loop(cols).attributes["lower"] = _int(j_end)
        rewriter.insert(cols, InsertPoint.before(i_loop))
    if i_end < i_loop.upper.data:
        i_loop.attributes["lower"] = _int(i_end)
    else:
        rewriter.erase(i_loop)


def _only_loop(loop: K.ForOp) -> K.ForOp:
    return next(op for op in loop.body.block.ops if isinstance(op, K.ForOp))


def _int(n: int):
    from xdsl.dialects.builtin import IntAttr
    return IntAttr(n)
