"""Small C libraries Presk builds once with the machine's C compiler and loads by ctypes:
the worker pool (presk/runtime/pool.py) and the epoch order (presk/train/native_order.py).

A library is named by a digest of its sources and flags, kept beside the native cache
(`<cache>/runtime/`, or a fresh temporary directory when the cache is off or not
writable), and written to a temporary name, then renamed: two processes building it at
once each rename a whole file. The compiler is `$CC`, else `cc`; without one, or where it
fails, `built` returns None and the caller takes its pure-Python path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path


def compiler() -> str | None:
    """The C compiler's path: `$CC`, else `cc`; None when neither is on PATH."""
    cc = os.environ.get("CC", "").strip() or "cc"
    return shutil.which(cc)


def library_dir() -> Path:
    """Where built libraries are kept: beside the native cache when it is on and
    writable, else a fresh temporary directory."""
    from .cache import cache_dir, cache_enabled
    if cache_enabled():
        d = cache_dir() / "runtime"
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix="presk-lib-"))


def digest(sources: Mapping[str, str], flags: Sequence[str]) -> str:
    """16 hex digits of the sources (name and text) and the flags."""
    h = hashlib.sha256()
    for name, text in sources.items():
        h.update(name.encode() + b"\0" + text.encode())
    h.update(" ".join(flags).encode())
    return h.hexdigest()[:16]


def _build(cc: str, sources: Mapping[str, str], main: str, flags: Sequence[str],
           target: Path) -> bool:
    """Compile `main` (one of `sources`, the others its headers) into `target`."""
    with tempfile.TemporaryDirectory(prefix="presk-lib-src-") as src:
        for name, text in sources.items():
            Path(src, name).write_text(text, encoding="utf-8")
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            done = subprocess.run([cc, *flags, "-o", str(tmp), str(Path(src, main))],
                                  capture_output=True)
        except OSError:
            return False
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            return False
        os.replace(tmp, target)
    return True


def built(name: str, sources: Mapping[str, str], main: str,
          flags: Sequence[str]) -> Path | None:
    """The shared library `name` built from `sources` (`main` the file compiled), built
    now if this digest was not yet; None without a working C compiler."""
    cc = compiler()
    if cc is None:
        return None
    target = library_dir() / f"{name}-{digest(sources, flags)}.so"
    if not target.exists() and not _build(cc, sources, main, flags, target):
        return None
    return target
