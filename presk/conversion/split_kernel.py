"""A kernel's layout `split = [0, n]`, for convert-psk-kernel-to-std: its outermost loop
divided among n workers (threads), before the kernels are lowered.

The kernel becomes n PSK-Kernel kernels `<name>_part<j>`, each the nest with the outermost
loop over its own contiguous range (for a tiled kernel whose outermost loop is the tile's
rows, the ranges are multiples of the tile's rows), and a spawner function standing in
for the kernel: it hands parts 1…n−1 to new threads (`pthread_create`, each through a
`<name>_thread<j>` trampoline that unpacks the buffer pointers), runs part 0 itself and
joins them. The outermost loop is parallel (its iterations write disjoint elements and
read nothing another writes: the dialect's contract), and each output element is
computed whole by one part in the nest's order, so the bits are the unsplit kernel's.
"""

from __future__ import annotations

from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    i32,
    i64,
)
from xdsl.ir import Block, Operation, Region

from presk.dialects import kernel as K

PTR = llvm.LLVMPointerType()


def split_of(kernel: K.KernelOp) -> int:
    """The workers of a kernel's `split = [0, n]` that can be honoured (1: no split)."""
    split = kernel.layout.split.data
    if not split or split[0].data != 0 or split[1].data < 2:
        return 1
    loops = [op for op in kernel.body.block.ops if isinstance(op, K.ForOp)]
    if len(loops) != 1 or loops[0].inits:
        return 1
    return min(split[1].data, loops[0].trip)


def ranges(kernel: K.KernelOp, n: int) -> list[tuple[int, int]]:
    """n contiguous ranges of the outermost loop, as even as the step allows (a tiled
    kernel's rows in whole tiles)."""
    loop = next(op for op in kernel.body.block.ops if isinstance(op, K.ForOp))
    lower, upper = loop.lower.data, loop.upper.data
    step = 1
    if kernel.layout.kind.data == "tiled":
        step = kernel.layout.tile.data[0].data
    units = -(-(upper - lower) // step)
    bounds = [lower + min(upper - lower, (units * j // n) * step) for j in range(n + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def split_kernels(module: ModuleOp, symbol, aliased: set[str]) -> list[Operation]:
    """Replace each kernel with a split by its parts (PSK-Kernel, lowered like any kernel;
    a part of a kernel in `aliased` joins it) and return the spawners and trampolines
    (func, to be lowered to llvm with the rest). `symbol(name)` is a kernel's function."""
    made: list[Operation] = []
    for kernel in [op for op in module.ops if isinstance(op, K.KernelOp)]:
        n = split_of(kernel)
        if n < 2:
            continue
        name = kernel.sym_name.data
        parts = []
        for j, (a, b) in enumerate(ranges(kernel, n)):
            part = kernel.clone()
            part.attributes["sym_name"] = StringAttr(f"{name}_part{j}")
            part.attributes["layout"] = K.LayoutAttr(
                kernel.layout.kind, kernel.layout.tile, kernel.layout.lanes,
                kernel.layout.order, ArrayAttr(()))
            outer = next(op for op in part.body.block.ops if isinstance(op, K.ForOp))
            outer.attributes["lower"], outer.attributes["upper"] = IntAttr(a), IntAttr(b)
            module.body.block.insert_op_before(part, kernel)
            parts.append(symbol(part.sym_name.data))
            if name in aliased:
                aliased.add(part.sym_name.data)
        count = len(kernel.args)
        threads = [_trampoline(f"{symbol(name)}_thread{j}", parts[j], count)
                   for j in range(1, len(parts))]
        made += [*threads, _spawner(symbol(name), parts, threads, count)]
        kernel.detach()
        kernel.erase()
    return made


def _load_args(block: Block, array, count: int) -> list:
    """The buffer pointers stored in `array` (one per kernel argument)."""
    out = []
    for i in range(count):
        slot = llvm.GEPOp(array, [i], PTR, inbounds=True)
        load = llvm.LoadOp(slot, PTR)
        block.add_ops([slot, load])
        out.append(load.results[0])
    return out


def _trampoline(name: str, part: str, count: int) -> func.FuncOp:
    """`void *name(void *args)`: part(args[0], …) on a new thread."""
    block = Block(arg_types=[PTR])
    pointers = _load_args(block, block.args[0], count)
    null = llvm.ZeroOp.create(result_types=[PTR])
    block.add_ops([func.CallOp(part, pointers, []), null, func.ReturnOp(null)])
    return func.FuncOp(name, ([PTR], [PTR]), Region(block), "private")


def _spawner(name: str, parts: list[str], threads: list[func.FuncOp],
             count: int) -> func.FuncOp:
    """The kernel's function: parts 1… on new threads, part 0 here, then join them."""
    block = Block(arg_types=[PTR] * count)
    ops: list[Operation] = []
    one = arith.ConstantOp(IntegerAttr(1, i64))
    many = arith.ConstantOp(IntegerAttr(count, i64))
    array = llvm.AllocaOp(many, PTR, alignment=8)
    ops += [one, many, array]
    for i, arg in enumerate(block.args):
        slot = llvm.GEPOp(array, [i], PTR, inbounds=True)
        ops += [slot, llvm.StoreOp(arg, slot)]
    null = llvm.ZeroOp.create(result_types=[PTR])
    ops.append(null)
    ids: list[llvm.AllocaOp] = []
    for thread in threads:
        tid = llvm.AllocaOp(one, i64, alignment=8)
        entry = llvm.AddressOfOp(thread.sym_name.data, PTR)
        ops += [tid, entry, llvm.CallOp("pthread_create", tid, null, entry, array,
                                        return_type=i32)]
        ids.append(tid)
    ops.append(func.CallOp(parts[0], list(block.args), []))
    for tid in ids:
        handle = llvm.LoadOp(tid, i64)
        ops += [handle, llvm.CallOp("pthread_join", handle, null, return_type=i32)]
    ops.append(func.ReturnOp())
    block.add_ops(ops)
    return func.FuncOp(name, ([PTR] * count, []), Region(block), "private")


__all__ = ["split_kernels", "split_of", "ranges"]
