"""The on-disk compile cache of native modules: object code keyed by what it was made from.

Compiling a model's kernels (xDSL lowering, LLVM O2, codegen) costs from tens of
milliseconds to seconds; loading an object file costs about a millisecond. An entry is
two files in the cache directory, named by the key's sha256:

* `<key>.o`    the host object code, exactly what MCJIT loads (presk/emit/llvm.py);
* `<key>.json` the manifest (format `presk-native-cache/1`): the key's parts, the object's
  size and sha256, and the entries' `EntrySig`s (presk/kernel_abi/calling.py), so that
  a hit is callable without the IR — and without running xDSL at all.

The key hashes the caller's text (the PSK-Kernel module), the caller's lowering version,
the presk and llvmlite versions, and the host triple, CPU name and CPU features: code for
another CPU or made by another compiler never loads. Both files are written to a
temporary name and renamed, the manifest last, so a reader sees a whole entry or none; an
entry that does not check out (unreadable, truncated, another format, a digest that does
not match) is a miss, and the recompiled entry replaces it.

Directory: `$PRESK_CACHE_DIR`, else `$XDG_CACHE_HOME/presk`, else `~/.cache/presk`.
`PRESK_CACHE=off` disables it. The directory holds nothing else but `runtime/`, the worker
pool's library and the epoch order's built once (presk/runtime/pool.py,
presk/train/native_order.py; rebuilt when missing), so `rm -rf` of it
clears it; it is bounded by `$PRESK_CACHE_MAX_MB` (default 512): after a store, the least
recently used entries go until it fits.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import llvmlite

from .. import __version__ as presk_version
from ..analysis.artifact import write_atomic
from ..kernel_abi.calling import EntrySig
from ..emit.llvm import host_target

FORMAT = "presk-native-cache/1"
DEFAULT_MAX_MB = 512


def cache_dir() -> Path:
    """Where the cache lives (see the module docstring)."""
    explicit = os.environ.get("PRESK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "presk"


def switched_off(variable: str) -> bool:
    """Whether the environment variable says `off`, `0`, `no` or `false` (any case)."""
    return os.environ.get(variable, "").strip().lower() in ("off", "0", "no", "false")


def cache_enabled(requested: bool = True) -> bool:
    """Whether to use the cache: the caller asked for it and `PRESK_CACHE` is not
    `off`/`0`/`no`/`false`."""
    return requested and not switched_off("PRESK_CACHE")


def max_bytes() -> int:
    """The size bound of the cache directory, from `$PRESK_CACHE_MAX_MB`."""
    text = os.environ.get("PRESK_CACHE_MAX_MB")
    if text is None:
        return int(DEFAULT_MAX_MB * 1024 * 1024)
    try:
        mb = float(text)
    except ValueError:
        mb = math.nan
    if not (math.isfinite(mb) and 0 <= mb <= 2**40):
        # One clear line, and the cache keeps working under its default bound.
        print(f"presk: PRESK_CACHE_MAX_MB={text[:40]!r} is not a size in MB (a number from "
              f"0 to 2^40); using {DEFAULT_MAX_MB}", file=sys.stderr)
        mb = DEFAULT_MAX_MB
    return int(mb * 1024 * 1024)


@dataclass(frozen=True)
class CacheKey:
    """What a cached object code was made from and for."""

    text_sha256: str
    lowering_version: str
    presk_version: str
    llvmlite_version: str
    triple: str
    cpu: str
    features: str

    @property
    def digest(self) -> str:
        parts = json.dumps({"format": FORMAT, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(parts.encode()).hexdigest()

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def cache_key(key_text: str, lowering_version: str) -> CacheKey:
    """The key of `key_text` (the PSK-Kernel module's text) lowered by
    `lowering_version`, for this presk, this llvmlite and this host."""
    host = host_target()
    return CacheKey(hashlib.sha256(key_text.encode()).hexdigest(), lowering_version,
                    presk_version, llvmlite.__version__, host.triple, host.cpu,
                    host.features)


@dataclass(frozen=True)
class CacheEntry:
    """A hit: the object code and the entries it defines."""

    object_code: bytes
    entries: list[EntrySig]


class NativeCache:
    """The cache in one directory (`cache_dir()` unless given)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else cache_dir()

    def paths(self, key: CacheKey) -> tuple[Path, Path]:
        """(object file, manifest) of a key."""
        d = key.digest
        return self.directory / f"{d}.o", self.directory / f"{d}.json"

    def load(self, key: CacheKey) -> CacheEntry | None:
        """The entry of `key`, or None when there is none or it does not check out."""
        obj_path, manifest_path = self.paths(key)
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            obj = obj_path.read_bytes()
            entries = _checked(manifest, key, obj)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if entries is None:
            return None
        _touch(manifest_path)
        return CacheEntry(obj, entries)

    def store(self, key: CacheKey, object_code: bytes, entries: list[EntrySig]) -> bool:
        """Writes the entry of `key` (replacing any); False when the directory is not
        writable (the run goes on uncached)."""
        obj_path, manifest_path = self.paths(key)
        manifest = {"format": FORMAT, "key": key.to_json(),
                    "object": {"bytes": len(object_code),
                               "sha256": hashlib.sha256(object_code).hexdigest()},
                    "entries": [e.to_json() for e in entries]}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            write_atomic(obj_path, object_code)
            write_atomic(manifest_path,
                          (json.dumps(manifest, indent=1, ensure_ascii=False) + "\n").encode())
            self.evict(max_bytes())
        except OSError:
            return False
        return True

    def entries(self) -> list[tuple[Path, Path]]:
        """(object file, manifest) of every entry in the directory."""
        if not self.directory.is_dir():
            return []
        return [(m.with_suffix(".o"), m) for m in self.directory.glob("*.json")
                if len(m.stem) == 64]

    def evict(self, limit: int) -> None:
        """Removes least recently used entries until the directory holds at most `limit`
        bytes."""
        sized = []
        for obj, manifest in self.entries():
            try:
                st = manifest.stat()
                size = st.st_size + (obj.stat().st_size if obj.exists() else 0)
            except OSError:
                continue
            sized.append((st.st_mtime, size, obj, manifest))
        total = sum(s[1] for s in sized)
        for _, size, obj, manifest in sorted(sized, key=lambda s: s[0]):
            if total <= limit:
                break
            for p in (manifest, obj):
                p.unlink(missing_ok=True)
            total -= size

    def clear(self) -> int:
        """Removes every entry; returns how many there were."""
        found = self.entries()
        for obj, manifest in found:
            manifest.unlink(missing_ok=True)
            obj.unlink(missing_ok=True)
        return len(found)


def _checked(manifest: Any, key: CacheKey, obj: bytes) -> list[EntrySig] | None:
    """The manifest's entries when it is of our format, for `key`, and `obj` is the
    object it describes; else None."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        return None
    if manifest.get("key") != key.to_json():
        return None
    described = manifest["object"]
    if described["bytes"] != len(obj) or described["sha256"] != hashlib.sha256(obj).hexdigest():
        return None
    return [EntrySig.from_json(e) for e in manifest["entries"]]


def _touch(path: Path) -> None:
    """Marks an entry used (its manifest's mtime orders eviction)."""
    try:
        os.utime(path)
    except OSError:
        pass
