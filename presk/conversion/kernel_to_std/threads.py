"""The function of a kernel that psk-kernel-split gave `parts`: a spawner standing in for
the kernel. It stores the buffer pointers in an array and launches the parts, each through
a trampoline `<name>_thread<j>` that unpacks the pointers and calls part j:

* `pool` (the default): the trampolines' addresses in another array and one call
  `presk_pool_run(n, trampolines, args)` — the worker pool (presk/runtime/presk_pool.c)
  runs part 0 on the caller's thread and parts 1…n−1 on its waiting workers and returns
  when all are done: a launch costs microseconds;
* `threads` (when the pool cannot be built — no C compiler — or PRESK_SPAWN=threads asks,
  to compare): parts 1…n−1 on new threads (`pthread_create`), part 0 here, then
  `pthread_join` — some 10–20 µs per thread and launch.

The parts are lowered like any kernel.
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i32, i64
from xdsl.ir import Block, Operation, Region, SSAValue

from presk.dialects import kernel as K

PTR = llvm.LLVMPointerType()
POOL_RUN = "presk_pool_run"
"""The pool's launch: `void presk_pool_run(int32_t parts, presk_part const *fns, void *args)`."""


def spawners(module: ModuleOp, symbol: Callable[[str], str],
             spawn: str = "pool") -> list[Operation]:
    """Replace each kernel with parts by nothing and return its spawner and trampolines
    (func, to be lowered to llvm with the rest). `symbol(name)` is a kernel's function;
    `spawn` is `pool` or `threads` (the module's docstring)."""
    made: list[Operation] = []
    for kernel in [op for op in module.ops if isinstance(op, K.KernelOp)]:
        if kernel.parts is None:
            continue
        name = kernel.sym_name.data
        parts = [symbol(p.root_reference.data) for p in kernel.parts]
        count = len(kernel.args)
        if spawn == "pool":
            threads = [_trampoline(f"{symbol(name)}_thread{j}", part, count)
                       for j, part in enumerate(parts)]
            made += [*threads, _pool_spawner(symbol(name), threads, count)]
        else:
            threads = [_trampoline(f"{symbol(name)}_thread{j}", parts[j], count, pthread=True)
                       for j in range(1, len(parts))]
            made += [*threads, _thread_spawner(symbol(name), parts[0], threads, count)]
        kernel.detach()
        kernel.erase()
    return made


def _load_args(block: Block, array: SSAValue, count: int) -> list[SSAValue]:
    """The buffer pointers stored in `array` (one per kernel argument)."""
    out = []
    for i in range(count):
        slot = llvm.GEPOp(array, [i], PTR, inbounds=True)
        load = llvm.LoadOp(slot, PTR)
        block.add_ops([slot, load])
        out.append(load.results[0])
    return out


def _trampoline(name: str, part: str, count: int, pthread: bool = False) -> func.FuncOp:
    """`void name(void *args)` (pthread's `void *name(void *args)`, returning NULL, when
    `pthread`): part(args[0], …)."""
    block = Block(arg_types=[PTR])
    pointers = _load_args(block, block.args[0], count)
    block.add_op(func.CallOp(part, pointers, []))
    if not pthread:
        block.add_op(func.ReturnOp())
        return func.FuncOp(name, ([PTR], []), Region(block), "private")
    null = llvm.ZeroOp.create(result_types=[PTR])
    block.add_ops([null, func.ReturnOp(null)])
    return func.FuncOp(name, ([PTR], [PTR]), Region(block), "private")


def _array(values: list[SSAValue], ops: list[Operation]) -> SSAValue:
    """A stack array of pointers holding `values`, its ops appended to `ops`."""
    size = arith.ConstantOp(IntegerAttr(len(values), i64))
    array = llvm.AllocaOp(size, PTR, alignment=8)
    ops += [size, array]
    for i, value in enumerate(values):
        slot = llvm.GEPOp(array, [i], PTR, inbounds=True)
        ops += [slot, llvm.StoreOp(value, slot)]
    return array.results[0]


def _pool_spawner(name: str, threads: list[func.FuncOp], count: int) -> func.FuncOp:
    """The kernel's function: its parts launched on the worker pool."""
    block = Block(arg_types=[PTR] * count)
    ops: list[Operation] = []
    args = _array(list(block.args), ops)
    entries = [llvm.AddressOfOp(t.sym_name.data, PTR) for t in threads]
    ops += entries
    fns = _array([e.results[0] for e in entries], ops)
    parts = arith.ConstantOp(IntegerAttr(len(threads), i32))
    ops += [parts, llvm.CallOp(POOL_RUN, parts, fns, args), func.ReturnOp()]
    block.add_ops(ops)
    return func.FuncOp(name, ([PTR] * count, []), Region(block), "private")


def _thread_spawner(name: str, first: str, threads: list[func.FuncOp],
                    count: int) -> func.FuncOp:
    """The kernel's function: parts 1… on new threads, part 0 here, then join them."""
    block = Block(arg_types=[PTR] * count)
    ops: list[Operation] = []
    args = _array(list(block.args), ops)
    one = arith.ConstantOp(IntegerAttr(1, i64))
    null = llvm.ZeroOp.create(result_types=[PTR])
    ops += [one, null]
    ids: list[llvm.AllocaOp] = []
    for thread in threads:
        tid = llvm.AllocaOp(one, i64, alignment=8)
        entry = llvm.AddressOfOp(thread.sym_name.data, PTR)
        ops += [tid, entry, llvm.CallOp("pthread_create", tid, null, entry, args,
                                        return_type=i32)]
        ids.append(tid)
    ops.append(func.CallOp(first, list(block.args), []))
    for tid in ids:
        handle = llvm.LoadOp(tid, i64)
        ops += [handle, llvm.CallOp("pthread_join", handle, null, return_type=i32)]
    ops.append(func.ReturnOp())
    block.add_ops(ops)
    return func.FuncOp(name, ([PTR] * count, []), Region(block), "private")
