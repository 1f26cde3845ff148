"""Re-derive the fitted coefficients of presk/emit/mathlib.py (tanh and sinh near 0,
erf, the sin/cos kernels) and the split of π/2 used by sin/cos.

Run `python -m presk.emit.mathlib_fit`: near-minimax (Chebyshev, mpmath.chebyfit at 50
digits) polynomials, each coefficient rounded to the target type and printed as an exact
hex float, with the fit's absolute error. exp and log use the fdlibm/musl coefficients
(cited in mathlib.py) and are not fitted here. Nothing imports this module.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

mp.mp.dps = 50

# (name, function of t, interval of t, number of coefficients) per type
def _specs(ty: str):
    f64 = ty == "f64"
    # tanh(x) = x + x^3 * P(x^2) on |x| < TANH_SMALL
    def tanh_tail(z):
        if z == 0:
            return mp.mpf(-1) / 3
        s = mp.sqrt(z)
        return (mp.tanh(s) - s) / (s * z)

    def erf_small(z):  # erf(x) = x + x * Q(x^2)
        if z == 0:
            return 2 / mp.sqrt(mp.pi) - 1
        s = mp.sqrt(z)
        return mp.erf(s) / s - 1

    def sinh_tail(z):  # sinh(x) = x + x^3 * P(x^2) on |x| < 1
        if z == 0:
            return mp.mpf(1) / 6
        s = mp.sqrt(z)
        return (mp.sinh(s) - s) / (s * z)

    out = [("tanh_small", tanh_tail, (0, 0.5625), 13 if f64 else 7),
           ("sinh_small", sinh_tail, (0, 1), 7 if f64 else 4),
           ("erf_small", erf_small, (0, 0.5625), 12 if f64 else 6)]
    pieces = ERF_PIECES[ty]
    for lo, hi, n in pieces:
        c = (lo + hi) / 2
        out.append((f"erf_{lo}_{hi}", (lambda c: lambda t: mp.erf(c + t) - 1)(mp.mpf(c)),
                    (-(hi - lo) / 2, (hi - lo) / 2), n))
    return out


# erf on [lo, hi): erf(x) = 1 + R(x - (lo+hi)/2), R fitted (absolute error)
ERF_PIECES = {
    "f64": [(0.75, 1.5, 19), (1.5, 2.25, 19), (2.25, 3.0, 18), (3.0, 4.0, 19),
            (4.0, 6.0, 22)],
    "f32": [(0.75, 1.5, 9), (1.5, 2.25, 9), (2.25, 3.0, 8), (3.0, 4.0, 8)],
}


def fit(ty: str) -> dict[str, list[str]]:
    dt = np.float64 if ty == "f64" else np.float32
    res = {}
    for name, f, (a, b), n in _specs(ty):
        poly, err = mp.chebyfit(f, [a, b], n, error=True)
        coeffs = [dt(float(c)) for c in poly]  # highest degree first
        # error of the rounded coefficients, sampled
        worst = mp.mpf(0)
        for i in range(401):
            t = mp.mpf(a) + (mp.mpf(b) - a) * i / 400
            v = mp.mpf(0)
            for c in coeffs:
                v = v * t + mp.mpf(float(c))
            worst = max(worst, abs(v - f(t)))
        print(f"{ty} {name}: {n} coeffs, fit error {mp.nstr(err, 3)}, "
              f"rounded {mp.nstr(worst, 3)}")
        res[name] = [float(c).hex() for c in coeffs]
    return res


def trig() -> None:
    """π/2 split fdlibm-style (pio2_i with few bits, pio2_it the rest rounded) and the
    sin/cos kernels: sin y = y + y³·P(y²), cos y = 1 − y²/2 + y⁴·C(y²) on |y| ≤ π/4."""
    def split(dt, bits_hi):
        out, rest = [], mp.pi / 2
        for _ in range(3):
            q = mp.mpf(2) ** (mp.floor(mp.log(abs(rest), 2)) - bits_hi + 1)
            hi = mp.floor(rest / q) * q
            out.append((float(hi).hex(), float(dt(float(rest - hi))).hex()))
            rest = rest - hi
        return out

    def sin_p(z):
        if z == 0:
            return mp.mpf(-1) / 6
        s = mp.sqrt(z)
        return (mp.sin(s) - s) / (s * z)

    def cos_c(z):
        if z == 0:
            return mp.mpf(1) / 24
        s = mp.sqrt(z)
        return (mp.cos(s) - 1 + z / 2) / (z * z)

    Z = float((mp.pi / 4) ** 2) * 1.001
    for ty, dt, bits, ns, nc in (("f64", np.float64, 33, 7, 6), ("f32", np.float32, 12, 4, 3)):
        print(ty, "invpio2", float(dt(float(2 / mp.pi))).hex(), "pio2", split(dt, bits))
        for name, f, n in (("sin", sin_p, ns), ("cos", cos_c, nc)):
            poly, err = mp.chebyfit(f, [0, Z], n, error=True)
            print(ty, name, mp.nstr(err, 3), [float(dt(float(c))).hex() for c in poly])


if __name__ == "__main__":
    import json
    print(json.dumps({ty: fit(ty) for ty in ("f64", "f32")}, indent=1))
    trig()
