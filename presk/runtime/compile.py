"""PSK-Kernel → machine code in this process: the native backend's pipeline.

    psk-kernel-forward-copies            presk/transforms/forward_copies.py
    psk-kernel-share-converts            presk/transforms/share_converts.py
    psk-kernel-hoist-input-converts      presk/transforms/hoist_input_converts.py
    psk-kernel-split                     presk/transforms/kernel_split.py
    convert-psk-kernel-to-std            presk/conversion/kernel_to_std/
    convert-scf-to-cf                    xDSL
    convert-index/arith/cf/func-to-llvm  presk/conversion/std_to_llvm
    reconcile-unrealized-casts           xDSL
    + the math library's functions       presk/emit/mathlib_llvm.py (declare_all)
    → LLVM IR → O2 for the host CPU → object code → MCJIT   presk/emit/llvm.py

`native_program(kernel_module)` goes through the on-disk cache (presk/runtime/cache.py):
the key is the PSK-Kernel module's text and `lowering_version()`, a hash of the source of
every file above, so that a change to the lowering can never load stale code — and, when
a kernel splits, how its parts start (`spawn()`: the worker pool, or a thread per part),
and where a tile's packed operands live (`scratch()`: the runtime's blocks, or malloc).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ..conversion.kernel_to_std import ConvertKernelToStdPass
from ..kernel_abi.arena import entry_signatures
from ..kernel_abi.calling import EntrySig
from . import NativeCache, NativeProgram, load_native

_PRESK = Path(__file__).resolve().parent.parent
_LOWERING_SOURCES = (
    "conversion/kernel_to_std", "transforms/kernel_split.py",
    "transforms/forward_copies.py", "transforms/host_writes.py",
    "transforms/share_converts.py", "transforms/hoist_input_converts.py",
    "conversion/std_to_llvm",
    "kernel_abi", "dialects/kernel",
    "emit/mathlib.py", "emit/mathlib_llvm.py", "emit/llvm.py", "emit/wide_loops.py",
    "emit/short_loops.py", "emit/loop_marks.py", "ops",
    "runtime/presk_pool.h", "runtime/presk_pool.c", "runtime/compile.py",
)


@lru_cache(maxsize=1)
def lowering_version() -> str:
    """A hash of the lowering's source files (the cache key's second part)."""
    h = hashlib.sha256()
    for rel in _LOWERING_SOURCES:
        path = _PRESK / rel
        files = sorted(path.glob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(f.name.encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def std_passes() -> list[ModulePass]:
    """func/scf/arith/math/index/cf (and llvm pointers) → the llvm dialect, in order."""
    from xdsl.transforms.convert_scf_to_cf import ConvertScfToCf
    from xdsl.transforms.reconcile_unrealized_casts import ReconcileUnrealizedCastsPass

    from ..conversion.std_to_llvm import (ConvertArithToLLVMPass, ConvertCfToLLVMPass,
                                          ConvertFuncToLLVMPass, ConvertIndexToLLVMPass,
                                          ConvertMathToLLVMPass)
    return [ConvertScfToCf(), ConvertIndexToLLVMPass(), ConvertArithToLLVMPass(),
            ConvertMathToLLVMPass(), ConvertCfToLLVMPass(), ConvertFuncToLLVMPass(),
            ReconcileUnrealizedCastsPass()]


def llvm_module_from_std(module: ModuleOp) -> ModuleOp:
    """A module of func/scf/arith (and llvm pointers) lowered in place to the llvm dialect,
    the math library's functions it calls appended."""
    from ..emit.mathlib_llvm import declare_all
    ctx = Context()
    for p in std_passes():
        p.apply(ctx, module)
    declare_all(module)
    return module


def spawn() -> str:
    """How split kernels start their parts: `pool` (the worker pool, presk/runtime/pool.py),
    or `threads` — a thread per part and launch — when `PRESK_SPAWN=threads` asks (to
    compare) or no C compiler can build the pool. A part of the lowering's version."""
    import os

    from . import pool
    if os.environ.get("PRESK_SPAWN", "").strip().lower() == "threads":
        return "threads"
    return "pool" if pool.available() else "threads"


def scratch() -> str:
    """Where a register tile's packed operands live: `pool` — the runtime library's
    per-thread blocks, kept between launches (presk_pool.c `presk_scratch`) — when the
    library can be had, else `malloc` (each launch mallocs and frees them). A part of the
    lowering's version."""
    from . import pool
    return "pool" if pool.available() else "malloc"


def splits(kernel_module: ModuleOp) -> bool:
    """Whether psk-kernel-split gives any kernel of the module parts."""
    from ..dialects import kernel as K
    from ..transforms.kernel_split import split_of
    return any(split_of(k) > 1 for k in kernel_module.ops if isinstance(k, K.KernelOp))


def lowering_passes(threads: str | None = None) -> list[ModulePass]:
    """PSK-Kernel → the llvm dialect: the passes of the docstring, in order; split kernels'
    parts started by `threads` (`pool`/`threads`, default `spawn()`)."""
    return [*_kernel_passes(), *_after_kernel_passes(threads)]


def _kernel_passes() -> list[ModulePass]:
    """The lowering's first passes, PSK-Kernel to PSK-Kernel: they decide the entries'
    buffers and the arena (psk-kernel-forward-copies, psk-kernel-share-converts,
    psk-kernel-hoist-input-converts)."""
    from ..transforms.hoist_input_converts import HoistInputConvertsPass
    from ..transforms.forward_copies import ForwardCopiesPass
    from ..transforms.share_converts import ShareConvertsPass
    return [ForwardCopiesPass(), ShareConvertsPass(), HoistInputConvertsPass()]


def _after_kernel_passes(threads: str | None) -> list[ModulePass]:
    from ..transforms.kernel_split import KernelSplitPass
    return [KernelSplitPass(), ConvertKernelToStdPass(threads or spawn(), scratch()),
            *std_passes()]


def native_kernel_module(kernel_module: ModuleOp) -> ModuleOp:
    """A copy of the kernel module after the lowering's first passes (`_kernel_passes`):
    the entries' buffers and the arena native code places."""
    module = kernel_module.clone()
    ctx = Context()
    for p in _kernel_passes():
        p.apply(ctx, module)
    return module


def native_signatures(kernel_module: ModuleOp) -> list[EntrySig]:
    """The entries native code exports, their buffers and arenas as the lowering
    makes them."""
    return entry_signatures(native_kernel_module(kernel_module))


def llvm_dialect_module(kernel_module: ModuleOp, threads: str | None = None
                        ) -> tuple[ModuleOp, list[EntrySig]]:
    """The kernel module (left unchanged) lowered to the llvm dialect (`lowering_passes`,
    split kernels' parts started by `threads`, default `spawn()`), the math library's
    functions appended, and the entries it exports."""
    from ..emit.mathlib_llvm import declare_all
    module = native_kernel_module(kernel_module)
    sigs = entry_signatures(module)  # its arena: the buffers the lowering places
    ctx = Context()
    for p in _after_kernel_passes(threads or (spawn() if splits(kernel_module)
                                              else "threads")):
        p.apply(ctx, module)
    declare_all(module)
    return module, sigs


def native_program(kernel_module: ModuleOp, cache: bool | NativeCache = True,
                   threads: str | None = None) -> NativeProgram:
    """Compile (or load from the cache) every entry host of a PSK-Kernel module; split
    kernels' parts started by `threads` (`pool`/`threads`; default `spawn()`)."""
    version = f"{lowering_version()}+scratch-{scratch()}"
    if splits(kernel_module):
        threads = threads or spawn()
        version = f"{version}+{threads}"
    return load_native(lambda: llvm_dialect_module(kernel_module, threads),
                       str(kernel_module), version, cache=cache)
