"""Which nest a `tiled` kernel runs in register tiles, and which operands it packs.

The register tiles themselves are presk/conversion/kernel_to_std/tile_contraction.py;
this is what they are built on and what the rest of the compiler may know of them
without loading the lowering: the nest (`find_nest`: the two innermost parallel loops, or
None when the tile cannot run the body) and the buffers a launch copies — j-last
(`packed_loads`), or, under `pack = "panels"`, into panels (`panel_loads`) — malloc'd
beside the arena and freed at the launch's end, whose bytes `presk memory` counts
(`packed_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Attribute, Block, SSAValue

from ..dialects import kernel as K


PANEL_BYTES = 64
"""A register tile's row from which its operands are offered packed into panels (the
default layout's and the plan's space): a cache line — 16 f32 or 8 f64 columns. A
narrower tile's k sweep reads too few columns for the copy to pay. (It was 16 columns
whatever the type, which left f64's [4, 8] unpanelled: on Zen 3 the scaled Tower's f64
products ran 1.6–2.5× faster with panels — x·w + b 2.82 → 1.67 ms a launch, g·wᵀ 2.71 →
1.64, xᵀ·g 4.44 → 1.81, 2 workers.)"""


def panel_columns(element: Attribute) -> int:
    """The columns of a PANEL_BYTES row of `element`s, as they compute (bf16 in f32)."""
    return PANEL_BYTES // K.element_bytes(K.compute_type(element))


KBLOCK = 256
"""The k block a panelled tile sweeps when its k loop is at least twice as long (`kblock =
256`, the default layout's for xᵀ·g, one point more of the plan's space): a block of the
scaled Tower's xᵀ·g (K = 1024) reads 256 KB of its j operand instead of 1 MB (f32), which
stays in L2 while every row of tiles reads it."""


@dataclass
class Nest:
    i_loop: K.ForOp
    j_loop: K.ForOp
    rows: int  # R
    cols: int  # C

    @property
    def i(self) -> SSAValue:
        return self.i_loop.induction

    @property
    def j(self) -> SSAValue:
        return self.j_loop.induction

    def main_end(self, loop: K.ForOp, step: int, start: int | None = None) -> int:
        """The end of the whole steps of `loop` from `start` (its lower bound)."""
        lower = loop.lower.data if start is None else start
        return lower + (loop.upper.data - lower) // step * step


def innermost_pair(block: Block) -> tuple[K.ForOp, K.ForOp] | None:
    """The two innermost loops of a kernel body that is one perfect nest of loops
    carrying no values (`for … { for i { for j { body } } }`), or None."""
    loops = [op for op in block.ops if isinstance(op, K.ForOp)]
    if len(loops) != 1:
        return None
    chain = [loops[0]]
    while True:
        inner = [op for op in chain[-1].body.block.ops if not isinstance(op, K.YieldOp)]
        if len(inner) == 1 and isinstance(inner[0], K.ForOp) and not inner[0].inits:
            chain.append(inner[0])
        else:
            break
    if len(chain) < 2 or any(loop.inits for loop in chain):
        return None
    return chain[-2], chain[-1]


def find_nest(block: Block, layout: K.LayoutAttr) -> Nest | None:
    """The two innermost parallel loops of the kernel's nest, or None if the nest is not
    `for … { for i { for j { body } } }` with a body the tile can run."""
    pair = innermost_pair(block)
    if pair is None:
        return None
    i_loop, j_loop = pair
    rows = min(layout.tile.data[0].data, i_loop.trip)
    cols = min(layout.tile.data[1].data, j_loop.trip)
    nest = Nest(i_loop, j_loop, rows, cols)
    if not _runnable(nest) or i_loop.trip < rows or j_loop.trip < cols or cols < 2:
        return None
    return nest


def _runnable(nest: Nest) -> bool:
    """Every load names j at most once; every store is at the body's top level and names
    j; inner loops carry values (a sum)."""
    for op in nest.j_loop.body.walk():
        if isinstance(op, (K.LoadOp, K.StoreOp)) and list(op.indices).count(nest.j) > 1:
            return False
        if isinstance(op, K.StoreOp) and (op.parent_op() is not nest.j_loop
                                          or nest.j not in op.indices):
            return False
        if isinstance(op, K.ForOp) and not op.inits:
            return False
    return True


def panel_loads(nest: Nest, kblock: int = 0) -> list[tuple[K.LoadOp, K.ForOp, int]]:
    """Under `pack = "panels"`: the product's operands laid out in panels, each by its
    first load in the k loop, with the tile loop the panels follow and their width. The
    j operand (read along j) in panels of C columns; the i operand in panels of R rows
    when i is its last axis (xᵀ·g; an operand indexed [i, k] already has each row
    contiguous along k). Where the tiles sweep k in blocks (`kblock`,
    `sweeps_k_in_blocks`) a j operand whose last axis is j is read in place, C contiguous
    elements a k step: a block of its rows stays in L2 while every row of tiles reads
    it, and the copy — of the whole operand, in every part of a split launch — was a
    quarter of the scaled Tower's xᵀ·g (0.60 → 0.53 ms a launch, f32, 2 parts)."""
    in_place = sweeps_k_in_blocks(nest, kblock)
    out: dict[SSAValue, tuple[K.LoadOp, K.ForOp, int]] = {}
    read_in_place: set[SSAValue] = set()
    for loop in nest.j_loop.body.block.ops:
        if not isinstance(loop, K.ForOp):
            continue
        for op in loop.body.walk():
            if not isinstance(op, K.LoadOp) or op.buffer in out or op.buffer in read_in_place:
                continue
            if nest.j in op.indices and in_place and op.indices[-1] is nest.j:
                read_in_place.add(op.buffer)
            elif nest.j in op.indices:
                out[op.buffer] = (op, nest.j_loop, nest.cols)
            elif op.indices and op.indices[-1] is nest.i:
                out[op.buffer] = (op, nest.i_loop, nest.rows)
    return list(out.values())


def sweeps_k_in_blocks(nest: Nest, kblock: int) -> bool:
    """Whether the tiles sweep the nest's k loop in blocks of `kblock`
    (tile_contraction.py `k_blocks`): a kblock shorter than the k loop, and a body of one
    sum, stored as it is (in its own type) by one store contiguous along j."""
    ops = list(nest.j_loop.body.block.ops)
    loops = [op for op in ops if isinstance(op, K.ForOp)]
    stores = [op for op in ops if isinstance(op, K.StoreOp)]
    if not kblock or len(loops) != 1 or len(stores) != 1:
        return False
    loop, store = loops[0], stores[0]
    buffer = store.buffer.type
    assert isinstance(buffer, K.BufferType)
    return (len(loop.inits) == 1 and loop.width is None and loop.trip > kblock
            and store.indices[-1] is nest.j and buffer.element == loop.results[0].type)


def panel_shape(t: K.BufferType, loop: K.ForOp, axis: int, width: int) -> list[int]:
    """[the loop's full tiles, the buffer's other axes in order, width]."""
    count = (loop.upper.data - loop.lower.data) // width
    return [count, *[t.shape[a] for a in range(len(t.shape)) if a != axis], width]


def packed_loads(nest: Nest, panels: bool = False, kblock: int = 0) -> list[K.LoadOp]:
    """The first load of each buffer the tiles read along j where j is not its last axis,
    and that no panels hold: the buffers packed (copied j-last) once per launch."""
    held = {op.buffer for op, _, _ in panel_loads(nest, kblock)} if panels else set()
    out: dict[SSAValue, K.LoadOp] = {}
    for op in nest.j_loop.body.walk():
        if isinstance(op, K.LoadOp) and nest.j in op.indices \
                and op.indices[-1] is not nest.j and op.buffer not in out \
                and op.buffer not in held:
            out[op.buffer] = op
    return list(out.values())


def packed_bytes(kernel: K.KernelOp) -> int:
    """The bytes a launch of the kernel copies beside the arena (j-last copies and
    panels): 0 unless its layout is `tiled` and its nest tiles."""
    if kernel.layout.kind.data != "tiled":
        return 0
    nest = find_nest(kernel.body.block, kernel.layout)
    if nest is None:
        return 0
    panels, kblock = kernel.layout.panels, kernel.layout.kblock.data
    total = sum(op.buffer.type.bytes for op in packed_loads(nest, panels, kblock))
    for op, loop, width in (panel_loads(nest, kblock) if panels else []):
        t = op.buffer.type
        n = 1
        for d in panel_shape(t, loop, list(op.indices).index(loop.induction), width):
            n *= d
        total += n * t.bytes // max(1, _elements(t))
    return total


def _elements(t: K.BufferType) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n
