"""What Presk refuses before it starts work that cannot finish: sizes beyond an i64 index,
calls beyond the machine's memory, exponents beyond a few dozen multiplies.

Pure Python (read by `presk check` too). A refusal is a `ResourceError` whose text is one
line naming what was asked and what there is; the command-line mains print it and exit 2.
"""

from __future__ import annotations

import os
import re

MAX_SIZE = 2**62
"""The largest axis size, dim value or stack count: an element count of one axis, a
product of two and an offset in bytes all stay inside a signed 64-bit index."""

MAX_EXPONENT = 999_999_999
"""The largest natural exponent of `x ^ n` (nine digits): by repeated squaring at most 59
multiplies."""


class ResourceError(Exception):
    """A call or a size the machine cannot hold; its text says what was needed and what
    there is."""


def check_size(value: int) -> str | None:
    """Why `value` cannot be a size (an axis, a dim, a stack count), or None. A size is 1
    or more: an empty axis has no mean, max or softmax, so Presk refuses it everywhere."""
    if value < 1:
        return "a size is 1 or more (Presk has no empty axes)"
    if value > MAX_SIZE:
        return f"a size is at most 2^62 = {MAX_SIZE}"
    return None


_DIGITS = len(str(MAX_SIZE))


def parse_size(text: str) -> int | str:
    """A size written in decimal ASCII digits, or the reason it is not one. The length is
    checked before converting: a 5 000-digit value is refused, not converted."""
    text = text.strip()
    if not re.fullmatch(r"[0-9]+", text):
        return "a size is a natural number, e.g. 4"
    if len(text.lstrip("0")) > _DIGITS:
        return f"a size is at most 2^62 = {MAX_SIZE}"
    value = int(text)
    reason = check_size(value)
    return reason if reason is not None else value


def available_memory() -> int | None:
    """The bytes this process can allocate without swapping others out: MemAvailable of
    /proc/meminfo, else the free physical pages (os.sysconf); None where neither exists."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def format_bytes(n: int) -> str:
    """`1.50 GiB (1610612736 bytes)`; below a KiB, `640 bytes`."""
    if n < 1024:
        return f"{n} bytes"
    value, unit = float(n), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024
        if value < 1024:
            break
    return f"{value:.2f} {unit} ({n} bytes)"


def require_memory(needed: int, what: str) -> None:
    """Refuse (ResourceError) when `needed` bytes for `what` exceed the memory available
    now; nothing is allocated before this says yes."""
    have = available_memory()
    if have is not None and needed > have:
        raise ResourceError(f"{what}: {format_bytes(needed)} needed, "
                            f"{format_bytes(have)} available on this machine")
