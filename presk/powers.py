"""`x ^ n` for a natural n: the one order of multiplies every engine follows.

Square and multiply from the most significant bit: p = x; for each further bit of n,
p = p·p, then p = p·x where the bit is 1. x² = x·x and x³ = (x·x)·x, as a product left to
right; x⁴ = (x·x)·(x·x); x^1000000 takes 25 multiplies, not 999 999. The f64 and MPFR
interpreters run it on arrays, the lowering to PSK-Kernel emits it as multiplies (so
native code, the kernel interpreter and C share its bits); x^0 is 1 (a NaN's too).
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


def power(x: T, n: int, mul: Callable[[T, T], T], one: Callable[[], T]) -> T:
    """x^n by square and multiply, in the order above."""
    if n == 0:
        return one()
    p = x
    for bit in bin(n)[3:]:
        p = mul(p, p)
        if bit == "1":
            p = mul(p, x)
    return p
