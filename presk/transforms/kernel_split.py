"""psk-kernel-split: a kernel whose layout says `split = [0, n]` gets n parts to run on
threads.

Each part is a kernel `<name>_part<j>`: the nest with the outermost loop over its own
contiguous range (for a tiled kernel whose outermost loop is the tile's rows, the ranges
are multiples of the tile's rows), its layout the kernel's without the split. The kernel
stays as it was (every reader of PSK-Kernel may still run it) and lists its parts in
`parts`; convert-psk-kernel-to-std then makes its function a spawner that runs them on
threads (presk/conversion/kernel_to_std/threads.py). The outermost loop is parallel (its
iterations write disjoint elements and read nothing another writes: the dialect's
contract), and each output element is computed whole by one part in the nest's order,
so the bits are the unsplit kernel's.

A split is honoured when the kernel's body is one loop without loop-carried values and
the loop has at least two iterations (`split_of`); a kernel with parts is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr, SymbolRefAttr
from xdsl.passes import ModulePass

from presk.dialects import kernel as K


def split_of(kernel: K.KernelOp, layout: K.LayoutAttr | None = None) -> int:
    """The workers of a kernel's `split = [0, n]` that can be honoured (1: no split);
    `layout`: at that layout instead of its own."""
    split = (layout or kernel.layout).split.data
    if not split or split[0].data != 0 or split[1].data < 2:
        return 1
    loops = [op for op in kernel.body.block.ops if isinstance(op, K.ForOp)]
    if len(loops) != 1 or loops[0].inits:
        return 1
    return min(split[1].data, loops[0].trip)


def threads_of(module: ModuleOp) -> int:
    """The most workers a launch of the module's kernels divides over (1: every kernel
    runs on one worker) — the threading a realization's name carries."""
    return max((split_of(k) for k in module.ops if isinstance(k, K.KernelOp)), default=1)


def ranges(kernel: K.KernelOp, n: int) -> list[tuple[int, int]]:
    """n contiguous ranges of the outermost loop, as even as its trip allows (a tiled
    kernel: at most one part a tile's rows). A part need not hold whole tiles: the rows
    past its last full tile run as a tile of fewer rows (tile_contraction.py
    `_rest_rows`). 1024 rows at [12, 32] on 2 workers are 512 each (42 tiles and 8 rows),
    not 516 and 508 — the same time on the Xeon; 20 rows at [8, 32] are 10 and 10, not
    16 and 4."""
    loop = next(op for op in kernel.body.block.ops if isinstance(op, K.ForOp))
    lower, upper = loop.lower.data, loop.upper.data
    if kernel.layout.kind.data == "tiled":  # at most as many parts as rows of tiles
        n = min(n, -(-(upper - lower) // kernel.layout.tile.data[0].data))
    bounds = [lower + (upper - lower) * j // n for j in range(n + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def split_kernels(module: ModuleOp) -> None:
    """Give each kernel with an honoured split its parts, placed before it."""
    for kernel in [op for op in module.ops if isinstance(op, K.KernelOp)]:
        n = split_of(kernel)
        if n < 2 or kernel.parts is not None:
            continue
        name = kernel.sym_name.data
        parts = []
        for j, (a, b) in enumerate(ranges(kernel, n)):
            part = kernel.clone()
            part.attributes["sym_name"] = StringAttr(f"{name}_part{j}")
            part.attributes["layout"] = kernel.layout.with_split(())
            outer = next(op for op in part.body.block.ops if isinstance(op, K.ForOp))
            outer.attributes["lower"], outer.attributes["upper"] = IntAttr(a), IntAttr(b)
            module.body.block.insert_op_before(part, kernel)
            parts.append(SymbolRefAttr(part.sym_name.data))
        kernel.parts = ArrayAttr(parts)


@dataclass(frozen=True)
class KernelSplitPass(ModulePass):
    """`psk-kernel-split`: the parts of every kernel whose layout splits it."""

    name = "psk-kernel-split"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        split_kernels(op)
