"""Fused multiply-adds, a realization's choice per contraction site (issue 16 item 3).

* presk/fma.py's exact a·b + c against MPFR's fma (gmpy2 in IEEE single's and double's
  contexts: correct rounding, subnormals) on random inputs and on the adversarial ones: sums
  that f64 rounds onto an f32 midpoint (where rounding twice would be wrong), f64 sums a
  hair off a midpoint, cancellations, subnormal and overflowing results, signed zeros,
  infinities;
* the realization's `fma` field: read, written, refused when malformed or not a
  contraction's site;
* a fused contraction's kernel holds `psk_kernel.fma` (no mul) and computes the same bits
  natively (the register tile, llvm.fma on vectors), in the kernel interpreter and in C
  (`fmaf`/`fma`), value and gradient, f32 and f64; unfused it is the mul + add it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from presk.analysis.realization import (FORMAT, Realization, RealizationError,
                                        parse_realization)
from presk.fma import fma
from programs import dot_program

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_native_interpreter_and_c_compute_the_same_fused_bits[f64]",
}


gmpy2 = pytest.importorskip("gmpy2")


def mpfr_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    dtype = a.dtype
    bits = 32 if dtype == np.float32 else 64
    out = np.empty(a.shape, dtype)
    with gmpy2.context(gmpy2.ieee(bits)):
        for i, (x, y, z) in enumerate(zip(a.tolist(), b.tolist(), c.tolist())):
            out[i] = float(gmpy2.fma(gmpy2.mpfr(x), gmpy2.mpfr(y), gmpy2.mpfr(z)))
    return out


def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
    u = f"u{got.itemsize}"
    return bool(np.all((got.view(u) == want.view(u)) | (np.isnan(got) & np.isnan(want))))


def _midpoints(dtype, n: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """c = 1 and a·b ≈ half an ulp of 1 in `dtype`: a·b + c sits on or a hair off the
    midpoint between 1 and its successor, the case a double rounding gets wrong."""
    p = 24 if dtype == np.float32 else 53
    a = rng.uniform(1.0, 2.0, n).astype(dtype)
    b = (2.0 ** -p / a.astype(np.float64)).astype(dtype)
    sign = rng.choice([-1.0, 1.0], n).astype(dtype)
    return a, b * sign, np.ones(n, dtype)


def _cases(dtype, rng) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    n = 4000
    info = np.finfo(dtype)
    a, b = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
    near = (-(a.astype(np.float64) * b) * (1 + rng.standard_normal(n) * 1e-7)).astype(dtype)
    tiny = np.full(n, info.tiny, dtype) * rng.uniform(-4, 4, n).astype(dtype)
    big = np.full(n, info.max, dtype) / rng.uniform(1, 3, n).astype(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, info.max,
                         info.tiny, info.smallest_subnormal], dtype)
    sa, sb, sc = (x.reshape(-1) for x in np.meshgrid(specials, specials, specials))
    return {
        "random": (a, b, rng.standard_normal(n).astype(dtype)),
        "cancelling": (a, b, near),
        "midpoints": _midpoints(dtype, n, rng),
        "subnormal": (tiny, rng.uniform(-1e-3, 1e-3, n).astype(dtype), tiny),
        "overflow": (big, rng.uniform(0.5, 4, n).astype(dtype), big),
        "scaled": (a * dtype(2.0 ** 60), b * dtype(2.0 ** -70), near * dtype(2.0 ** -10)),
        "specials": (sa, sb, sc),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_is_mpfrs_correctly_rounded_fma(dtype) -> None:
    rng = np.random.default_rng(16)
    for name, (a, b, c) in _cases(dtype, rng).items():
        got = fma(a, b, c)
        assert got.dtype == dtype
        assert same_bits(got, mpfr_fma(a, b, c)), name


def test_the_midpoints_are_adversarial() -> None:
    """Rounding the f64 sum straight to f32 (twice) is wrong on some of them: the test
    above would see a double rounding."""
    a, b, c = _midpoints(np.float32, 4000, np.random.default_rng(3))
    twice = (a.astype(np.float64) * b + c).astype(np.float32)
    assert not same_bits(twice, mpfr_fma(a, b, c))


def test_signed_zeros() -> None:
    for dtype in (np.float32, np.float64):
        z = np.array([-0.0], dtype)
        one = np.array([1.0], dtype)
        assert np.signbit(fma(z, one, z))[0]  # −0·1 + −0 = −0
        assert not np.signbit(fma(z, one, -z))[0]  # −0 + +0 = +0
        assert not np.signbit(fma(one, one, -one))[0]  # an exact cancellation is +0


# --------------------------------------------------------------------------------------
# The realization's field
# --------------------------------------------------------------------------------------


def test_the_field_is_read_and_written() -> None:
    r = parse_realization({"format": FORMAT, "sites": {"f/%2": "f32"},
                           "fma": ["f/%3", "g.bwd/%7", "f/%3"]})
    assert r.fma == ("f/%3", "g.bwd/%7") and r.fused("f/%3") and not r.fused("f/%2")
    assert parse_realization(r.to_json()) == r
    assert r.summary() == "f64+sequential+1sites+0params+2fma"
    assert "fma" not in Realization().to_json()  # a file without it stays as it was


@pytest.mark.parametrize("fma_field, words", [
    ("f/%3", "a list of contraction sites"), ([3], "a list of contraction sites"),
    (["f3"], "not of the form <function>/%<n>")])
def test_a_malformed_field_is_one_line(fma_field, words) -> None:
    with pytest.raises(RealizationError, match=words):
        parse_realization({"format": FORMAT, "fma": fma_field})


# --------------------------------------------------------------------------------------
# Every engine
# --------------------------------------------------------------------------------------


FUSED = ("M.apply/%3", "M.apply.bwd/%7", "M.apply.bwd/%8")


def _call(tmp: Path, kind: str, fused: bool, i: int = 9, k: int = 37, j: int = 40):
    from presk.analysis import entry as E
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    from presk.pipeline import entry_call
    core = lower_program(elaborate(str(dot_program(tmp, i, k, j))))
    prepared = E.prepare(core, "loss", {})
    rng = np.random.default_rng(i + k + j)
    params = {f.path: rng.standard_normal(f.shape) for f in prepared.fields}
    values = {n: rng.standard_normal(s) for n, s in prepared.inputs.items()}
    sites = {"M.apply/%3": "f32"} if kind == "f32" else {}
    real = Realization(None, sites, {"w": kind} if kind == "f32" else {},
                       FUSED if fused else ())
    return entry_call(core, "loss", {}, params, values, real, True, True)


def test_the_sites_are_every_contraction(tmp_path: Path) -> None:
    from presk.analysis.sensitivity import contraction_sites
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    from presk.pipeline import differentiate
    core = lower_program(elaborate(str(dot_program(tmp_path, 3, 4, 5))))
    assert contraction_sites(core, "loss") == ["M.apply/%3"]
    differentiate(core, ["loss"], "store")
    assert tuple(contraction_sites(core, "loss.value_vjp")) == FUSED


def test_a_site_that_is_no_contraction_is_refused(tmp_path: Path) -> None:
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    from presk.pipeline import entry_call
    from presk.pipeline.errors import InvalidInput
    core = lower_program(elaborate(str(dot_program(tmp_path, 3, 4, 5))))
    real = Realization(None, {}, {}, ("loss/%4",))
    with pytest.raises(InvalidInput, match="fma site `loss/%4` is not a contraction"):
        entry_call(core, "loss", {}, {"w": np.ones((4, 5))}, {"x": np.ones((3, 4))}, real)


@pytest.mark.parametrize("kind", ["f32", "f64"])
def test_native_interpreter_and_c_compute_the_same_fused_bits(tmp_path: Path, monkeypatch,
                                                              kind: str) -> None:
    from presk.analysis.kernel_interpret import KernelInterpreter
    from presk.dialects import kernel as K
    from presk.emit.c_program import c_sources
    from presk.runtime.compile import native_program
    monkeypatch.setenv("PRESK_CACHE", "off")
    results = {}
    for fused in (False, True):
        call = _call(tmp_path, kind, fused)
        km = call.pipeline.kernel
        contractions = [k for k in K.kernels(km).values() if k.title.data.startswith(("dot", "contract"))]
        ops = [op for k in contractions for op in k.walk()]
        assert sum(isinstance(op, K.FmaOp) for op in ops) == (3 if fused else 0)
        assert any(isinstance(op, K.MulOp) for op in ops) != fused
        assert all(k.layout.kind.data == "tiled" for k in contractions)
        want = KernelInterpreter(km).run(call.host, call.inputs)
        got = native_program(km).entry(call.host)(call.inputs)
        for name, g, w in zip(call.output_names, got, want):
            assert g.tobytes() == w.tobytes(), (fused, name)
        kernels_c = c_sources(km)["kernels.c"]
        assert (("fmaf(" if kind == "f32" else "fma(") in kernels_c) == fused
        results[fused] = want
    # the choice changes bits (f32: somewhere among 9·40 + 37·40 + 9·37 sums)
    if kind == "f32":
        assert any(a.tobytes() != b.tobytes() for a, b in zip(results[False], results[True]))

