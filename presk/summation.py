"""The one order of a sum's additions, which every engine follows: blocked, then a tree.

A sum of n terms x₀ … xₙ₋₁ over one axis, from +0, runs in P = 64 partial sums (16 f32
lanes × 4 accumulators of an AVX-512 register file, or 8 f64 lanes × 8: a constant of the
order, not of the machine, so the bits never depend on the host):

    p_j = (((+0 + x_j) + x_{j+P}) + x_{j+2P}) + …        for j < P,
    then for h = P/2, P/4, …, 1:  p_j = p_j + p_{j+h}   for j < h,

and the sum is p₀. A sum over several axes nests: the outer axis' terms are the inner
axes' sums, each in this order. A partial that received no term stays +0 and adding it
is exact (a sum from +0 is never −0 under round-to-nearest), so an engine may use
`partials_for(n)` = min(P, the power of two ≥ n) partials instead of P: the same bits,
less work for short rows. Native code keeps the partials in vector registers (the
iterations of one block are independent), the kernel interpreter runs a block as one
numpy operation, C indexes an array of partials.

Each term passes through at most `roundings(n)` = ⌈n/P⌉ − 1 + ⌈log₂ min(n, P)⌉ rounded
additions on its way to the result (its partial's, the first of which, onto +0, is exact,
then the tree's levels that meet a non-empty partial), against n − 1 one after another:
the error constant of the sum is γ_{roundings(n)} (docs/precision.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

PARTIALS = 64
"""The partial sums of the blocked order (a power of two)."""

T = TypeVar("T")


def partials_for(n: int) -> int:
    """The partials a sum of n terms uses: min(P, the power of two ≥ n), at least 1."""
    return min(PARTIALS, 1 << max(n - 1, 0).bit_length())


def roundings(n: int) -> int:
    """The rounded additions on any term's path to a sum of n terms in the blocked order."""
    if n <= 1:
        return 0
    return -(-n // PARTIALS) - 1 + math.ceil(math.log2(min(n, PARTIALS)))


def nested_roundings(sizes: Sequence[int]) -> int:
    """The same for a sum nested over axes of these sizes (each axis' sum in the order)."""
    return sum(roundings(n) for n in sizes)


def tree(partials: list[T], add: Callable[[T, T], T]) -> T:
    """p_j = p_j + p_{j+h} for h = len/2, …, 1 (len a power of two); p₀."""
    p = list(partials)
    h = len(p) // 2
    while h:
        p = [add(p[j], p[j + h]) for j in range(h)]
        h //= 2
    return p[0]


def blocked_sum(terms: Sequence[T], add: Callable[[T, T], T], zero: Callable[[], T]) -> T:
    """Σ terms in the blocked order, for any arithmetic (`add` rounding as its system
    does; `zero` a fresh +0)."""
    n = len(terms)
    p = [zero() for _ in range(partials_for(n))]
    for i, x in enumerate(terms):
        p[i % len(p)] = add(p[i % len(p)], x)
    return tree(p, add)


def blocked_sum_last(x: np.ndarray, zero: Callable[[tuple[int, ...]], np.ndarray]
                     ) -> np.ndarray:
    """Σ over the last axis of `x` in the blocked order, one numpy addition per block of
    partials (each element added with `+` in its arithmetic: float32 stays float32, an
    object array adds its elements). `zero(shape)` gives +0s of shape."""
    n = x.shape[-1]
    width = partials_for(n)
    p = zero(x.shape[:-1] + (width,))
    for start in range(0, n, width):
        block = x[..., start:start + width]
        k = block.shape[-1]
        if k == width:
            p = p + block
        else:
            p = np.concatenate([p[..., :k] + block, p[..., k:]], axis=-1)
    h = width // 2
    while h:
        p = p[..., :h] + p[..., h:2 * h]
        h //= 2
    return p[..., 0]
