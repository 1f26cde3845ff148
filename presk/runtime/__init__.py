"""The native runtime: compile (or fetch from the on-disk cache) a module's machine code,
load it in this process and call its entries on numpy arrays.

`load_native` is the one way in. On a cache hit it never calls the factory that lowers the
program (no xDSL work at all): it loads the cached object code and the `EntrySig`s of the
manifest. On a miss it calls the factory, compiles through presk/emit/llvm.py and stores
the object code. Either way `NativeProgram.timings` records how long each phase took, so
compile time can be reported cold and warm.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from xdsl.dialects.builtin import ModuleOp

from ..gc_pause import paused
from ..kernel_abi.calling import EntrySig, entry_symbol
from ..emit.llvm import (JitModule, NativeCompileError, emit_object, llvm_ir, load_object,
                         optimize)
from .cache import CacheKey, NativeCache, cache_enabled, cache_key
from .entry import NativeEntry, RuntimeCallError
from .pool import provide
from .timing import Timing, time_call

__all__ = ["CompileTimings", "NativeCompileError", "NativeEntry", "NativeProgram",
           "RuntimeCallError", "Timing", "load_native", "time_call"]

LlvmModuleFactory = Callable[[], tuple[ModuleOp, list[EntrySig]]]


@dataclass
class CompileTimings:
    """Seconds spent in each phase of `load_native` (0 for a phase that did not run):
    lowering to the llvm dialect (the factory), translation to LLVM IR, O2, codegen to
    object code, loading into MCJIT, and writing the cache entry."""

    lower: float = 0.0
    translate: float = 0.0
    optimize: float = 0.0
    codegen: float = 0.0
    load: float = 0.0
    store: float = 0.0

    @property
    def total(self) -> float:
        return (self.lower + self.translate + self.optimize + self.codegen + self.load
                + self.store)


@contextmanager
def _phase(timings: CompileTimings, name: str) -> Iterator[None]:
    """Adds the time of the block to `timings.<name>`."""
    start = time.perf_counter()
    try:
        yield
    finally:
        setattr(timings, name, getattr(timings, name) + time.perf_counter() - start)


@dataclass
class NativeProgram:
    """Loaded machine code and the entries it defines."""

    jit: JitModule
    entries: list[EntrySig]
    timings: CompileTimings
    cached: bool

    def sig(self, host_or_symbol: str) -> EntrySig:
        """The EntrySig of a host (`loss`) or entry symbol (`presk_entry_loss`)."""
        for s in self.entries:
            if host_or_symbol in (s.host, s.symbol):
                return s
        known = ", ".join(s.host for s in self.entries) or "none"
        raise RuntimeCallError(f"the native program has no entry `{host_or_symbol}` "
                               f"(entries: {known})")

    def entry(self, host_or_symbol: str) -> NativeEntry:
        """A callable entry with its own arena."""
        return NativeEntry(self.jit, self.sig(host_or_symbol))


def load_native(llvm_module_factory: LlvmModuleFactory, key_text: str,
                lowering_version: str, entries: Sequence[EntrySig] | None = None,
                cache: bool | NativeCache = True) -> NativeProgram:
    """The native program of `key_text` (the PSK-Kernel module's text, lowered by the
    lowering `lowering_version`). `llvm_module_factory()` returns the llvm-dialect module
    and its EntrySigs and is called only on a cache miss. `entries`, when given, are the
    entries the caller expects: a cached entry with other ones is a miss, and a factory
    returning other ones an error. `cache`: False, or a NativeCache to use instead of the
    default directory; `PRESK_CACHE=off` disables it, too."""
    store = _cache_of(cache)
    timings = CompileTimings()
    key = cache_key(key_text, lowering_version)
    if store is not None:
        hit = _load_cached(store, key, entries, timings)
        if hit is not None:
            return NativeProgram(hit[0], hit[1], timings, cached=True)
    with paused():  # presk/gc_pause.py: a lowering builds a large graph of cyclic objects
        with _phase(timings, "lower"):
            module, sigs = llvm_module_factory()
        if entries is not None and list(entries) != list(sigs):
            raise NativeCompileError("the lowering produced other entries than expected: "
                                     f"{[s.symbol for s in sigs]} vs "
                                     f"{[s.symbol for s in entries]}")
        jit = _compile(module, sigs, timings)
    if store is not None:
        with _phase(timings, "store"):
            store.store(key, jit.object_code, list(sigs))
    return NativeProgram(jit, list(sigs), timings, cached=False)


def _cache_of(cache: bool | NativeCache) -> NativeCache | None:
    if isinstance(cache, NativeCache):
        return cache if cache_enabled() else None
    return NativeCache() if cache_enabled(cache) else None


def _load_cached(store: NativeCache, key: CacheKey, expected: Sequence[EntrySig] | None,
                 timings: CompileTimings) -> tuple[JitModule, list[EntrySig]] | None:
    """The loaded hit of `key`, or None (no entry, other entries than expected, object
    code MCJIT refuses or that lacks an entry's symbol)."""
    with _phase(timings, "load"):
        hit = store.load(key)
        if hit is None or (expected is not None and list(expected) != hit.entries):
            return None
        try:
            provide(hit.object_code)
            jit = load_object(hit.object_code)
            for s in hit.entries:
                jit.address(s.symbol)
        except NativeCompileError:
            return None
    return jit, hit.entries


def _compile(module: ModuleOp, sigs: Sequence[EntrySig],
             timings: CompileTimings) -> JitModule:
    for s in sigs:
        if s.symbol != entry_symbol(s.host):
            raise NativeCompileError(f"entry `{s.host}` has the symbol `{s.symbol}`, the "
                                     f"calling convention says `{entry_symbol(s.host)}`")
    with _phase(timings, "translate"):
        ir_text = llvm_ir(module, [s.symbol for s in sigs])
    with _phase(timings, "optimize"):
        optimized = optimize(ir_text)
    with _phase(timings, "codegen"):
        obj = emit_object(optimized)
    with _phase(timings, "load"):
        provide(obj)
        return load_object(obj, optimized)
