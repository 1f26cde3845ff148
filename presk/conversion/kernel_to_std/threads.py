"""The function of a kernel that psk-kernel-split gave `parts`: a spawner standing in for
the kernel. It hands parts 1…n−1 to new threads (`pthread_create`, each through a
`<name>_thread<j>` trampoline that unpacks the buffer pointers), runs part 0 itself and
joins them. The parts are lowered like any kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32, i64
from xdsl.ir import Block, Operation, Region

from presk.dialects import kernel as K

PTR = llvm.LLVMPointerType()


def spawners(module: ModuleOp, symbol: Callable[[str], str]) -> list[Operation]:
    """Replace each kernel with parts by nothing and return its spawner and trampolines
    (func, to be lowered to llvm with the rest). `symbol(name)` is a kernel's function."""
    made: list[Operation] = []
    for kernel in [op for op in module.ops if isinstance(op, K.KernelOp)]:
        if kernel.parts is None:
            continue
        name = kernel.sym_name.data
        parts = [symbol(p.root_reference.data) for p in kernel.parts]
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
