"""The calling convention of a native PSK-Kernel module: what `convert-psk-kernel-to-std`
produces, what the C program (presk/emit/c_program.py) follows and what the runtime
(presk/runtime) calls. Pure Python: the runtime reads it without loading xDSL.

Every host marked `entry` gets an external function

    void presk_entry_<host>(void **argv, void *arena)

`argv` holds one pointer per argument of the host, in the host's order (its inputs, then
its outputs), each to a C-contiguous row-major buffer of the argument's element type
(f64 → double, f32 → float, bf16 → uint16 bits); `arena` points to `arena_bytes` bytes of
scratch aligned to `ARENA_ALIGN`, which the entry may overwrite freely. Outputs are
written in place; inputs are only read. Two calls may not share an arena at once.

`EntrySig` records this for one entry, so that a compiled module can be called (and its
object code cached on disk) without the IR it was made from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any

ARENA_ALIGN = 64
"""Bytes: the arena starts on a cache line (and an AVX-512 vector), and so does every
buffer of it this size or larger (`slot`, `slot_align`: a smaller one lies within one line)."""

ELEMENT_BYTES = {"f64": 8, "f32": 4, "bf16": 2}


def entry_symbol(host: str) -> str:
    """`presk_entry_<host>`, the host's name with every character that is not a letter,
    digit or underscore replaced by `_` (`loss` → `presk_entry_loss`,
    `RMSNorm.apply_2` → `presk_entry_RMSNorm_apply_2`)."""
    return "presk_entry_" + re.sub(r"[^A-Za-z0-9_]", "_", host)


def kernel_symbol(name: str) -> str:
    return f"presk_kernel_{name}"


def host_symbol(name: str) -> str:
    return f"presk_host_{name}"


def strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides in elements (the last axis contiguous)."""
    out, n = [], 1
    for s in reversed(shape):
        out.append(n)
        n *= s
    return out[::-1]


def align(n: int, to: int = ARENA_ALIGN) -> int:
    """`n` bytes rounded up to a multiple of `to` (`ARENA_ALIGN` unless told)."""
    return -(-n // to) * to


def slot(n: int) -> int:
    """The bytes a buffer of `n` bytes spans in the arena: its own size under
    `ARENA_ALIGN`, else rounded up to whole cache lines."""
    return n if n < ARENA_ALIGN else align(n)


def slot_align(n: int) -> int:
    """Where a buffer of `n` bytes may start in the arena: under `ARENA_ALIGN` at a
    multiple of the least power of two ≥ `n` — it never straddles a cache line, and the
    power of two is a multiple of its element's size, all the native loads and stores
    and the C code assume (a vector load claims the element's alignment) — else on a
    cache line."""
    if n >= ARENA_ALIGN:
        return ARENA_ALIGN
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class BufferSig:
    """One argument of an entry: its name (`θ.blocks.proj.w`, `batch.0`, `out`), element
    type (`f64`, `f32`, `bf16`) and shape; `given`: for an input the native lowering
    narrowed (psk-kernel-hoist-input-converts), the element the caller's data is in (f64),
    which the runtime rounds into `element` when it binds the call."""

    name: str
    element: str
    shape: tuple[int, ...]
    given: str | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * ELEMENT_BYTES[self.element]

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "element": self.element, "shape": list(self.shape)}
        if self.given is not None:
            out["given"] = self.given
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BufferSig:
        given = d.get("given")
        return cls(str(d["name"]), str(d["element"]), tuple(int(s) for s in d["shape"]),
                   None if given is None else str(given))


ROUNDED_INPUTS = "rounded_inputs"
"""The entry host's attribute naming the inputs psk-kernel-hoist-input-converts narrowed
to f32 (their `BufferSig.given` is f64)."""


@dataclass(frozen=True)
class EntrySig:
    """One entry of a native module: the host it runs, its symbol, its buffers and the
    arena it needs."""

    host: str
    symbol: str
    inputs: tuple[BufferSig, ...]
    outputs: tuple[BufferSig, ...]
    arena_bytes: int

    @property
    def args(self) -> tuple[BufferSig, ...]:
        return self.inputs + self.outputs

    @property
    def call_bytes(self) -> int:
        """What one call holds at once: its buffers and its arena."""
        return sum(b.nbytes for b in self.args) + self.arena_bytes

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "symbol": self.symbol,
                "inputs": [b.to_json() for b in self.inputs],
                "outputs": [b.to_json() for b in self.outputs],
                "arena_bytes": self.arena_bytes}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> EntrySig:
        return cls(str(d["host"]), str(d["symbol"]),
                   tuple(BufferSig.from_json(b) for b in d["inputs"]),
                   tuple(BufferSig.from_json(b) for b in d["outputs"]),
                   int(d["arena_bytes"]))
