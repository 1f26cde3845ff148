"""The fused multiply-add a·b + c, rounded ONCE to nearest even, exactly, on numpy arrays.

What `psk_kernel.fma` computes where a realization fuses a contraction's site (LLVM's
`llvm.fma`, C99's `fma`/`fmaf`); Python 3.11 has no `math.fma` and numpy none either, so
the kernel interpreter computes it here, element by element, with the same bits:

* f32: the product of two f32 is exact in f64 (24 + 24 ≤ 53 bits, its exponent far inside
  f64's range), the sum s = fl64(p + c) is one f64 rounding and TwoSum gives its error e
  exactly. Rounding s to f32 directly could round twice (a sum just off an f32 midpoint
  that f64 rounds onto it); so s is first made the sum ROUNDED TO ODD in f64 (where e ≠ 0
  and s's last bit is even, the neighbour of s towards e: the exact sum lies strictly
  between them) and then rounded to f32. Rounding to odd at 53 bits, then to nearest at
  ≤ 51 bits, is one correct rounding (Boldo & Melquiond 2008, Theorem 1).
* f64: Dekker's TwoProduct (Veltkamp's split) gives a·b = ph + pl exactly, TwoSum
  c + ph = th + tl exactly, then v = tl + pl rounded to odd and the result th + v rounded
  to nearest (Boldo & Melquiond's emulated FMA, Algorithm 5.4: correct without underflow
  or overflow). Elements where that does not hold — a non-finite operand, |a| or |b| ≥
  2⁹⁹⁵ (the split overflows), a product or addend of magnitude ≥ 2¹⁰²⁰ or a nonzero one
  below 2⁻⁹⁰⁰ (the error terms may underflow) — are computed by MPFR (gmpy2 in IEEE
  double's context: 53 bits, subnormals), one at a time; they are rare in a contraction.

test/unit/test_fma.py checks both against gmpy2's fma on random and adversarial inputs
(midpoints, cancellations, subnormals, overflow, signed zeros).
"""

from __future__ import annotations

import numpy as np

_SPLIT = 2.0 ** 27 + 1.0  # Veltkamp's constant for 53 bits
_BIG, _HUGE, _TINY = 2.0 ** 995, 2.0 ** 1020, 2.0 ** -900


def fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a·b + c rounded once, in the operands' type (float32 or float64, broadcast)."""
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if a.dtype == np.float32:
        return _fma32(a, b, c)
    return _fma64(a.astype(np.float64), np.asarray(b, np.float64), np.asarray(c, np.float64))


def _two_sum(x: np.ndarray, y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """The error of s = fl(x + y): x + y − s exactly (Knuth's TwoSum, no branch)."""
    yv = s - x
    xv = s - yv
    return (x - xv) + (y - yv)


def _to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """s + e rounded to odd in f64, given s = fl(s + e) and e its exact error: s where it
    is exact or its last bit is odd, else its neighbour towards e."""
    even = (s.view(np.uint64) & np.uint64(1)) == 0
    move = (e != 0) & np.isfinite(e) & even
    if not move.any():
        return s
    return np.where(move, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def _fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * np.asarray(b, np.float64)  # exact
        c64 = np.asarray(c, np.float64)
        s = p + c64
        e = _two_sum(p, c64, s)
        return np.asarray(_to_odd(np.asarray(s, np.float64), e)).astype(np.float32)


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    t = _SPLIT * x
    hi = t - (t - x)
    return hi, x - hi


def _fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    a, b, c = np.broadcast_arrays(a, b, c)
    with np.errstate(all="ignore"):
        ph = a * b
        ah, al = _split(a)
        bh, bl = _split(b)
        pl = ((ah * bh - ph) + ah * bl + al * bh) + al * bl  # a·b − ph exactly
        th = c + ph
        tl = _two_sum(c, ph, th)
        vs = tl + pl
        v = _to_odd(np.asarray(vs, np.float64), _two_sum(tl, pl, vs))
        # an exact zero takes the sign IEEE gives c + a·b (th: a·b = ph exactly then)
        out = np.asarray(np.where((th == 0) & (pl == 0), th, th + v), np.float64)
        safe = (np.isfinite(a) & np.isfinite(b) & np.isfinite(c) & (np.abs(a) < _BIG)
                & (np.abs(b) < _BIG) & (np.abs(ph) < _HUGE) & (np.abs(c) < _HUGE)
                & ((ph != 0) | (a == 0) | (b == 0)) & ((ph == 0) | (np.abs(ph) >= _TINY))
                & ((c == 0) | (np.abs(c) >= _TINY)))
    if safe.all():
        return out
    out = np.array(out, copy=True)
    for at in zip(*np.nonzero(~safe)) if out.ndim else [()]:
        out[at] = _mpfr_fma(float(a[at]), float(b[at]), float(c[at]))
    return out


def _mpfr_fma(a: float, b: float, c: float) -> float:
    """One f64 fma by MPFR at 53 bits with IEEE double's exponent range and subnormals."""
    import gmpy2
    with gmpy2.context(gmpy2.ieee(64)):
        return float(gmpy2.fma(gmpy2.mpfr(a), gmpy2.mpfr(b), gmpy2.mpfr(c)))
