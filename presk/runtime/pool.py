"""The worker pool in this process: presk_pool.c compiled once into a shared library and
loaded so that native code resolves `presk_pool_run` (a split kernel's spawner calls it,
presk/conversion/kernel_to_std/threads.py), `presk_scratch` (a register tile's packed
operands, presk/conversion/kernel_to_std/tile_contraction.py) and `presk_host_copy` (a
host's large copy or f64 → f32 conversion divided among the pool, convert.py).

The library is built by the C compiler (`$CC`, else `cc`) at most once per source
(presk/runtime/c_library.py): it is kept beside the native cache
(`<cache dir>/runtime/presk_pool-<sha>.so`), or in a temporary directory of this process
when the cache is off or unwritable. Without a C compiler there is no pool: `available()` says so and the
lowering runs a split kernel's nest on the caller's thread (the same bits).

  source_files() -> {name: text}     presk_pool.h / presk_pool.c (also the C export's)
  load() -> ctypes.CDLL | None        build if needed, load once, and make it the JIT's
  available() -> bool                 whether the pool can be had in this process
  provide(object_code)                load the pool when the code calls it
"""

from __future__ import annotations

import ctypes
from functools import lru_cache
from pathlib import Path

from .c_library import built

_HERE = Path(__file__).resolve().parent
SOURCES = ("presk_pool.h", "presk_pool.c")
SYMBOL = "presk_pool_run"
CALLED = (SYMBOL, "presk_scratch", "presk_host_copy")  # the library's functions native code may call
CFLAGS = ["-O2", "-std=c99", "-fPIC", "-shared", "-pthread"]


def source_files() -> dict[str, str]:
    """The pool's C files, name → text."""
    return {name: (_HERE / name).read_text(encoding="utf-8") for name in SOURCES}


@lru_cache(maxsize=1)
def load() -> ctypes.CDLL | None:
    """The pool's library, built if needed and loaded into this process (its symbols
    visible to MCJIT), or None without a working C compiler."""
    from llvmlite import binding
    target = built("presk_pool", source_files(), "presk_pool.c", CFLAGS)
    if target is None:
        return None
    binding.load_library_permanently(str(target))
    lib = ctypes.CDLL(str(target))
    lib.presk_pool_workers.restype = ctypes.c_int32
    return lib


def available() -> bool:
    """Whether split kernels run on the pool in this process."""
    return load() is not None


def provide(object_code: bytes) -> None:
    """Load the pool's library before MCJIT links code that calls it (a split launch,
    or a tile's scratch blocks)."""
    if any(name.encode() in object_code for name in CALLED):
        load()


def workers() -> int:
    """The pool's running workers (0: none started, or no pool)."""
    lib = load()
    return 0 if lib is None else int(lib.presk_pool_workers())
