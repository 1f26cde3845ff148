"""presk/emit/mathlib.py: accuracy in ulps against MPFR, determinism of the numpy
evaluation, and the C emitter computing the same bits as the numpy evaluator.

The error of a point is the distance, in units in the last place (counted as adjacent
representable numbers), between the library's result and the exact value (MPFR at 128
bits) rounded to the type. MAX_ULPS holds the bounds measured (docs/mathlib.md), from the
op table's rows (presk/ops: `ulps`).
"""

from __future__ import annotations

import shutil
import subprocess

import gmpy2
import numpy as np
import pytest

from presk import ops
from presk.emit import mathlib

# measured worst case over the grids below (docs/mathlib.md): the op table's `ulps`, which
# the box analysis charges (softplus f64: 2, seen on a denser grid)
MAX_ULPS = {(f.name, ty): f.ulps[i] for f in ops.ROWS if f.ulps is not None
            for i, ty in enumerate(("f32", "f64"))}
assert set(MAX_ULPS) == {(n, ty) for n in ops.library() for ty in ("f32", "f64")}

_HI = gmpy2.context(precision=128, emin=-100000, emax=100000)
_ROUND = {
    "f64": gmpy2.context(precision=53, emin=-1073, emax=1024, subnormalize=True),
    "f32": gmpy2.context(precision=24, emin=-148, emax=128, subnormalize=True),
}


def _exact(fn: str, x: float, *more: float):
    """The table's MPFR formula (presk/ops; pow: MPFR's mpfr_pow follows C99 Annex F at
    the special values)."""
    return ops.row(fn).mpfr(gmpy2, gmpy2.mpfr(x), *(gmpy2.mpfr(m) for m in more))


def reference(fn: str, ty: str, xs: np.ndarray, *more: np.ndarray) -> np.ndarray:
    """The exact values of fn at xs (and the further arguments `more`, for pow),
    correctly rounded to the type."""
    out = np.empty(len(xs), dtype=np.float64)
    with np.errstate(invalid="ignore"):  # NaN payloads
        xs64 = xs.astype(np.float64).tolist()
        more64 = [m.astype(np.float64).tolist() for m in more]
    for i, x in enumerate(xs64):
        if fn in ("sin", "cos") and abs(x) > float.fromhex(mathlib.TRIG[ty]["limit"]):
            out[i] = np.nan  # documented: NaN beyond the reduction's range
            continue
        with gmpy2.context(_HI):
            y = _exact(fn, float(x), *(m[i] for m in more64))
        with gmpy2.context(_ROUND[ty]):
            y = y + 0 if not (gmpy2.is_nan(y) or gmpy2.is_infinite(y)) else y
            out[i] = float(y)
    return out.astype(mathlib.TI[ty].dtype)


def _ordinal(a: np.ndarray, ty: str) -> np.ndarray:
    ti = mathlib.TI[ty]
    bits = a.view(ti.sint).astype(np.int64)
    mag = bits & np.int64(np.iinfo(ti.sint).max)
    return np.where(bits < 0, -mag, mag)


def ulp_errors(got: np.ndarray, want: np.ndarray, ty: str) -> np.ndarray:
    nan_g, nan_w = np.isnan(got), np.isnan(want)
    d = np.abs(_ordinal(got, ty) - _ordinal(want, ty)).astype(np.float64)
    d[nan_g & nan_w] = 0
    d[nan_g ^ nan_w] = np.inf
    return d


DOMAIN = {  # (lo, hi) of the dense grid, per type
    "exp": {"f64": (-746.0, 710.0), "f32": (-104.0, 89.0)},
    "log": {"f64": (0.0, 4.0), "f32": (0.0, 4.0)},
    "log1p": {"f64": (-1.0, 4.0), "f32": (-1.0, 4.0)},
    "tanh": {"f64": (-25.0, 25.0), "f32": (-10.0, 10.0)},
    "erf": {"f64": (-7.0, 7.0), "f32": (-5.0, 5.0)},
    "softplus": {"f64": (-750.0, 750.0), "f32": (-110.0, 110.0)},
    "sin": {"f64": (-1.7e6, 1.7e6), "f32": (-7000.0, 7000.0)},
    "cos": {"f64": (-1.7e6, 1.7e6), "f32": (-7000.0, 7000.0)},
    "sinh": {"f64": (-711.0, 711.0), "f32": (-90.0, 90.0)},
    "expm1": {"f64": (-50.0, 710.0), "f32": (-25.0, 89.0)},
}


def points(fn: str, ty: str, n: int = 12000) -> np.ndarray:
    ti = mathlib.TI[ty]
    dt = ti.dtype
    fi = np.finfo(dt)
    rng = np.random.default_rng(7)
    lo, hi = DOMAIN[fn][ty]
    parts = [np.linspace(lo, hi, n).astype(dt),
             rng.uniform(lo, hi, n).astype(dt),
             # near 0 and near 1, on a logarithmic scale, both signs
             (np.logspace(-30, 0.3, n // 4) * rng.choice([-1, 1], n // 4)).astype(dt),
             (1 + np.linspace(-0.3, 0.3, n // 4)).astype(dt),
             # any magnitude: random bit patterns of finite floats
             rng.integers(0, int(np.iinfo(ti.uint).max), n // 4, dtype=np.uint64)
             .astype(ti.uint).view(dt),
             np.linspace(-10, 10, n).astype(dt)]
    special = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny,
               -fi.tiny, fi.max, -fi.max, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, 2.0]
    if fn == "exp":
        K = mathlib.EXP[ty]
        for edge in (float.fromhex(K["ovf"]), float.fromhex(K["unf"])):
            e = dt(edge)
            for _ in range(20):
                special += [e]
                e = np.nextafter(e, dt(0))
            e = dt(edge)
            for _ in range(20):
                special += [e]
                e = np.nextafter(e, dt(np.inf) if edge > 0 else dt(-np.inf))
    if fn == "expm1":  # where exp's reduction changes k, and the ends ±edge
        edge = float.fromhex(mathlib.EXPM1[ty]["edge"])
        for e0 in (edge, -edge, 0.5 * np.log(2.0), -0.5 * np.log(2.0)):
            for step in (dt(np.inf), dt(-np.inf)):
                v = dt(e0)
                for _ in range(20):
                    special += [v]
                    v = np.nextafter(v, step)
    if fn == "sinh":  # the ends of its three ranges, and where it overflows
        top = float(np.arcsinh(np.float64(fi.max)))
        for edge in (1.0, float.fromhex(mathlib.SINH[ty]["huge"]), top):
            for sign in (1, -1):
                e = dt(sign * edge)
                for step in (dt(0), dt(sign * np.inf)):
                    v = e
                    for _ in range(20):
                        special += [v]
                        v = np.nextafter(v, step)
    if fn in ("sin", "cos"):
        # the floats nearest to multiples of π/2 (the largest cancellation) and the limit
        lim = float.fromhex(mathlib.TRIG[ty]["limit"])
        k = np.concatenate([np.arange(1, 2000), np.unique(np.geomspace(1, lim / 1.58, 2000)
                                                          .astype(np.int64))])
        with gmpy2.context(_HI):
            near = np.array([float(gmpy2.mpfr(int(j)) * gmpy2.const_pi() / 2) for j in k])
        near = near.astype(dt)
        parts += [near, -near, np.nextafter(near, dt(0)), np.nextafter(near, dt(np.inf))]
        special += [lim, -lim, np.nextafter(dt(lim), dt(np.inf))]
    x = np.concatenate(parts + [np.array(special, dtype=dt)])
    return x[np.isfinite(x) | np.isnan(x) | np.isinf(x)]


def pow_points(ty: str, n: int = 12000) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) pairs for pow: any positive x (log-uniform over the whole range) with y such
    that y·log x is uniform over the exp's range and a little beyond (over- and
    underflow, subnormal results); x near 1 (|x − 1| down to 1e−16 / 1e−7) with the large
    y that keep the result in range (where log x must be precise); x in [−10, 10] with
    real and integer y in [−30, 30] (negative x: NaN or a sign by parity); random bit
    patterns; small integers to small integer powers (exact results); and every pair of
    special values (±0, ±smallest subnormal, ±max, ±inf, NaN, ±1, ±2^p, odd 2^(p-1)+1…)."""
    ti = mathlib.TI[ty]
    dt = ti.dtype
    fi = np.finfo(dt)
    rng = np.random.default_rng(7)
    top, bottom = (709.0, -745.0) if ty == "f64" else (88.0, -103.0)
    xs, ys = [], []
    x = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)), n))
    x = x.astype(dt).astype(np.float64)
    x = x[x != 1]
    xs.append(x)
    ys.append(rng.uniform(bottom * 1.02, top * 1.02, len(x)) / np.log(x))
    x = 1 + rng.uniform(-1, 1, n) * 10.0 ** rng.uniform(-16 if ty == "f64" else -7, -1, n)
    x = x.astype(dt).astype(np.float64)
    x = x[x != 1]
    xs.append(x)
    ys.append(rng.uniform(bottom, top, len(x)) / np.log(x))
    x = rng.uniform(-10, 10, n)
    y = rng.uniform(-30, 30, n)
    xs += [x, x]
    ys += [y, np.round(y)]
    for part in (xs, ys):
        part.append(rng.integers(0, int(np.iinfo(ti.uint).max), n // 4, dtype=np.uint64)
                    .astype(ti.uint).view(dt))
    xs.append(rng.integers(-20, 21, n // 4).astype(np.float64))
    ys.append(rng.integers(-12, 13, n // 4).astype(np.float64))
    p = 2.0 ** (ti.mbits + 1)
    special = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, fi.max,
               -fi.max, np.nan, np.inf, -np.inf, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
               1.5, -2.5, p, -p, p / 2 + 1, -(p / 2 + 1), p / 2 - 1, p / 4 + 0.5]
    sx, sy = np.meshgrid(np.array(special, dtype=dt), np.array(special, dtype=dt))
    xs.append(sx.ravel())
    ys.append(sy.ravel())
    with np.errstate(all="ignore"):  # NaN payloads of the bit patterns
        return (np.concatenate([a.astype(dt) for a in xs]),
                np.concatenate([a.astype(dt) for a in ys]))


def arguments(fn: str, ty: str, n: int = 12000) -> tuple[np.ndarray, ...]:
    """The test's points of fn, one array per argument."""
    return pow_points(ty, n) if fn == "pow" else (points(fn, ty, n),)


def measure(fn: str, ty: str) -> tuple[float, tuple[float, ...]]:
    xs = arguments(fn, ty)
    got = mathlib.evaluate(fn, ty, *xs)
    err = ulp_errors(got, reference(fn, ty, *xs), ty)
    i = int(err.argmax())
    return float(err.max()), tuple(float(x[i]) for x in xs)


CASES = [(f, t) for f in mathlib.FUNCTIONS for t in mathlib.TYPES]
SLOW_CASES = {
    "test_erfs_one_rule_is_its_cases_rules[f64]",  # (make test-fast keeps the f32 case)
}
UNARY = [f for f in mathlib.FUNCTIONS if mathlib.arity(f) == 1]


@pytest.mark.parametrize("fn,ty", CASES)
def test_accuracy_against_mpfr(fn: str, ty: str) -> None:
    worst, at = measure(fn, ty)
    assert worst <= MAX_ULPS[(fn, ty)], f"{fn} {ty}: {worst} ulps at {at!r}"


@pytest.mark.parametrize("fn,ty", CASES)
def test_numpy_evaluation_is_deterministic(fn: str, ty: str) -> None:
    xs = arguments(fn, ty, 2000)
    a = mathlib.evaluate(fn, ty, *xs)
    b = mathlib.evaluate(fn, ty, *(x.copy() for x in xs))
    # element by element (scalar loops) and strided (another numpy loop) give the same bits
    c = np.concatenate([mathlib.evaluate(fn, ty, *(x[i:i + 1] for x in xs))
                        for i in range(0, len(xs[0]), 97)])
    d = mathlib.evaluate(fn, ty, *(np.repeat(x, 2)[::2] for x in xs))
    assert a.dtype == mathlib.TI[ty].dtype
    assert a.tobytes() == b.tobytes() == d.tobytes()
    assert c.tobytes() == a[::97].tobytes()


_DRIVER = """
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    if (argc != 5) return 2;
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    %(T)s x, y;
    while (fread(&x, sizeof x, 1, in) == 1) {
%(calls)s
    }
    fclose(in); fclose(out);
    in = fopen(argv[3], "rb"), out = fopen(argv[4], "wb");
    while (fread(&x, sizeof x, 1, in) == 1 && fread(&y, sizeof y, 1, in) == 1) {
        %(T)s r = presk_pow_%(ty)s(x, y); fwrite(&r, sizeof r, 1, out);
    }
    fclose(in); fclose(out);
    return 0;
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
@pytest.mark.parametrize("ty", mathlib.TYPES)
def test_c_emitter_computes_the_same_bits(ty: str, tmp_path) -> None:
    ti = mathlib.TI[ty]
    src = "".join(mathlib.to_c(fn, ty) for fn in mathlib.FUNCTIONS)
    calls = "\n".join(
        f"        {{ {ti.c_type} r = presk_{fn}_{ty}(x); fwrite(&r, sizeof r, 1, out); }}"
        for fn in UNARY)
    (tmp_path / "m.c").write_text(src + _DRIVER % {"T": ti.c_type, "calls": calls, "ty": ty})
    exe = tmp_path / "m"
    cc = subprocess.run(["cc", "-O2", "-ffp-contract=off", "-std=c99", "-Wall", "-Wextra",
                         "-Werror", str(tmp_path / "m.c"), "-o", str(exe), "-lm"],
                        capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    x = np.concatenate([points(fn, ty, 600) for fn in UNARY])
    assert len(x) > 3000
    x.tofile(tmp_path / "in.bin")
    px, py = pow_points(ty, 3000)
    np.stack([px, py], axis=1).tofile(tmp_path / "pow.bin")
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin"),
                    str(tmp_path / "pow.bin"), str(tmp_path / "powout.bin")], check=True)
    got = np.fromfile(tmp_path / "out.bin", dtype=ti.dtype).reshape(len(x), -1)
    for j, fn in enumerate(UNARY):
        want = mathlib.evaluate(fn, ty, x)
        differ = want.view(ti.uint) != got[:, j].view(ti.uint)
        assert not differ.any(), (fn, ty, x[differ][:5], want[differ][:5], got[differ, j][:5])
    want = mathlib.evaluate("pow", ty, px, py)
    got = np.fromfile(tmp_path / "powout.bin", dtype=ti.dtype)
    differ = want.view(ti.uint) != got.view(ti.uint)
    assert len(got) == len(px) and not differ.any(), (px[differ][:5], py[differ][:5])


if __name__ == "__main__":  # print the accuracy table
    for fn, ty in CASES:
        worst, at = measure(fn, ty)
        print(f"| {fn} | {ty} | {worst:g} | {at!r} |")


def _erf_by_cases(x: np.ndarray, ty: str) -> np.ndarray:
    """erf as its cases' own Horner rules (the small case's in x², each piece's in
    |x| − c_i) and a select — numpy, one rounding an operation in the type — which the one
    rule of `mathlib._erf` (every case's argument and coefficients picked first) must
    equal bit for bit."""
    ti = mathlib.TI[ty]
    dt = ti.dtype
    fit = mathlib.FIT[ty]
    c = lambda h: dt(float.fromhex(h))  # noqa: E731

    def horner(coeffs, t):
        acc = np.full_like(t, c(coeffs[0]))
        for h in coeffs[1:]:
            acc = acc * t + c(h)
        return acc
    with np.errstate(all="ignore"):
        a, z = np.abs(x), x * x
        out = np.where(x < 0, dt(-1), dt(1)).astype(dt)
        for lo, hi in reversed(mathlib.ERF_PIECES[ty]):
            inside = a < dt(hi)
            piece = dt(1) + horner(fit[f"erf_{lo}_{hi}"], a - dt((lo + hi) / 2))
            out = np.where(inside, np.where(x < 0, -piece, piece), out)
        out = np.where(a < dt(0.75), x + x * horner(fit["erf_small"], z), out)
        return np.where(np.isnan(x), x, out)


@pytest.mark.parametrize("ty", mathlib.TYPES)
def test_erfs_one_rule_is_its_cases_rules(ty: str) -> None:
    ti = mathlib.TI[ty]
    rng = np.random.default_rng(7)
    edges = np.array([0.75, 1.5, 2.25, 3.0, 4.0, 6.0], dtype=ti.dtype)
    near = np.concatenate([edges, np.nextafter(edges, ti.dtype(0)),
                           np.nextafter(edges, ti.dtype(10))])
    x = np.concatenate([rng.uniform(-7, 7, 200_000), rng.standard_normal(100_000),
                        10.0 ** rng.uniform(-300 if ty == "f64" else -40, 0, 50_000)]
                       ).astype(ti.dtype)
    x = np.concatenate([x, -x[-50_000:], near, -near,
                        np.array([0.0, -0.0, np.inf, -np.inf], dtype=ti.dtype)])
    got, want = mathlib.evaluate("erf", ty, x), _erf_by_cases(x, ty)
    differ = got.view(ti.uint) != want.view(ti.uint)
    assert not differ.any(), (x[differ][:5], got[differ][:5], want[differ][:5])
