"""Each precision rule's formula (docs/precision.md) pinned on small programs, its figure
computed by hand here from the envelope, the sensitivities and the inputs: `cond`'s local
rounding bound R for an exact op, an arithmetic op, a library function, a sum, an
operand read converted (charged at the reader, at the operand's magnitude for a sub);
`k` and `normwise` on a product and a sum; the solver's estimate charging a value carried
in f64 and read narrower (test/precision_programs/carried_shift.psk)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from presk.analysis import entry as E
from presk.analysis import envelope as EV
from presk.analysis.bounds import U, bounds, gamma
from presk.analysis.realization import Realization
from presk.analysis.sensitivity import sensitivities
from presk.pipeline import load_core

u = U["f32"]


def _setup(path: str, dims: dict[str, int]):
    module, _ = load_core(path)
    prepared = E.prepare(module, "f" if "rule_" in path else "loss", dims)
    name = prepared.func.sym_name.data
    values = E.inputs(prepared, 0, None)
    envelope = EV.calibrate(module, name, dims)
    sens = sensitivities(module, name, dims, {}, values)
    return module, name, values, envelope, {k: float(v) for k, v in sens.sites.items()}


def _terms(module, name, dims, envelope, real, values):
    """cond's terms: cond and rss are functions of them, so cond = Σ and rss = √Σ²."""
    b = bounds(module, name, dims, envelope, real, {}, values, rules=("cond", "rss"))
    return b, {f.site: f.term for f in b.sites}


def test_cond_charges_each_kind_of_op_as_documented():
    module, name, values, env, s = _setup("test/data/rule_chain.psk", {})
    real = Realization(entry=name, sites={f"f/%{i}": "f32" for i in (2, 3, 4, 5)})
    b, terms = _terms(module, name, {}, env, real, values)
    x, y = values["x"], values["y"]
    a, p = -x, -x * y
    e = np.exp(p)
    m = {2: np.max(np.abs(a)), 3: np.max(np.abs(p)), 4: np.max(np.abs(e)), 5: np.sum(e)}
    # neg is exact: only its operand x, an f64 input read in f32, is charged (u·|a|)
    assert terms["f/%2"] == pytest.approx(s["f/%2"] * u * m[2], rel=1e-9)
    # mul: one rounding, and y read converted (a is f32 already): 2·u·|p|
    assert terms["f/%3"] == pytest.approx(s["f/%3"] * 2 * u * m[3], rel=1e-9)
    # exp: a library function, 4 ulps; p is read in its own type
    assert terms["f/%4"] == pytest.approx(s["f/%4"] * 4 * u * m[4], rel=1e-9)
    # the sum of 4 positive terms in the blocked order, (e₀ + e₂) + (e₁ + e₃): two
    # roundings on a term's path, γ₂·1·|Σ| + u·|Σ|
    assert terms["f/%5"] == pytest.approx(s["f/%5"] * (gamma(2, "f32") + u) * m[5], rel=1e-9)
    # the sensitivities are the hand-computed ones too: ‖∂L/∂v‖₁
    assert s["f/%2"] == pytest.approx(np.sum(np.abs(e * y)), rel=1e-12)
    assert s["f/%4"] == pytest.approx(4.0, rel=1e-12)
    assert b.bounds["cond"] == pytest.approx(math.fsum(terms.values()), rel=1e-12)
    assert b.bounds["rss"] == pytest.approx(math.sqrt(math.fsum(t * t for t in terms.values())),
                                            rel=1e-12)


def test_cond_in_f64_is_never_charged_a_conversion():
    module, name, values, env, s = _setup("test/data/rule_chain.psk", {})
    _, terms = _terms(module, name, {}, env, Realization(entry=name), values)
    x, y = values["x"], values["y"]
    assert terms["f/%2"] == 0.0  # exact, nothing converted
    assert terms["f/%3"] == pytest.approx(s["f/%3"] * U["f64"] * np.max(np.abs(x * y)),
                                          rel=1e-9)


def test_cond_charges_a_carried_value_read_narrower_at_its_magnitude():
    """carried_shift: d = z − 10000 computes in f32 and reads z (a call's result, f64,
    |z| ≈ 1e4) converted; 10000 itself is exact in f32 and is not charged."""
    path, dims = "test/precision_programs/carried_shift.psk", {"B": 2}
    module, name, values, env, s = _setup(path, dims)
    real = Realization(entry=name, sites={"loss/%4": "f32"})  # d follows it: f32
    b, terms = _terms(module, name, dims, env, real, values)
    z = env.sites["loss/%1"].max_abs
    d = env.sites["loss/%3"].max_abs
    assert terms["loss/%3"] == pytest.approx(s["loss/%3"] * (u * d + u * z), rel=1e-9)
    b = bounds(module, name, dims, env, real, {}, values, rules=("cond",), do_measure=True)
    assert b.measured <= b.bounds["cond"]


def test_k_and_normwise_on_a_product_and_a_sum():
    """sum(x * y) over two elements in f32, x = [3, −0.5], y = [0.25, 2] (products of
    both signs): each operand converted (u·|x|); the product's error |x|·e_y + |y|·e_x +
    e_x·e_y plus its rounding u·(|xy| + e); `k` keeps the largest error of the product
    for both elements, `normwise` also its relative error (so the smaller product keeps
    its own); the sum's operands are converted again (every operand of an op in f32),
    then the errors add and γ₁·Σ(|tᵢ| + eᵢ) is charged."""
    module, name, _, env, _ = _setup("test/data/rule_product.psk", {})
    values = {"x": np.array([3.0, -0.5]), "y": np.array([0.25, 2.0])}
    real = Realization(entry=name, sites={"f/%2": "f32", "f/%3": "f32"})
    x, y = np.abs(values["x"]), np.abs(values["y"])
    t = x * y
    ex, ey = u * x, u * y
    e = x * ey + y * ex + ex * ey
    e = e + u * (t + e)

    def summed(e):
        e = e + u * (t + e)  # the sum reads its operand converted
        return np.sum(e) + gamma(1, "f32") * np.sum(t + e)
    b = bounds(module, name, {}, env, real, {}, values, rules=("k", "normwise"))
    assert b.bounds["k"] == pytest.approx(summed(np.full(2, np.max(e))), rel=1e-6)
    assert b.bounds["normwise"] == pytest.approx(summed(e), rel=1e-6)
    assert b.bounds["k"] > b.bounds["normwise"]


def test_solver_estimate_charges_a_value_carried_and_read_narrower():
    """Under {d f32, z f64} the recording converts z to f32 where d reads it: the
    estimate's term for z is s_z · r_z(f32) (the envelope's rounding of z to f32), not 0,
    and it is not below the measured error (d's own term, what was charged before, is
    orders of magnitude below it)."""
    from presk.analysis.bounds import measure
    from presk.analysis.conversions import input_sites
    from presk.analysis.solver import read_types
    from presk.pipeline import kernel_pipeline
    path, dims = "test/precision_programs/carried_shift.psk", {"B": 2}
    module, name, values, env, s = _setup(path, dims)
    real = Realization(entry=name, sites={"loss/%4": "f32"})
    rec = kernel_pipeline(module, name, dims, real).realize
    reads = read_types(rec, set(), input_sites(module, name), lambda k: k in s)
    assert reads["loss/%1"] == ("f32", "loss/%3")
    term = s["loss/%1"] * env.sites["loss/%1"].rounding["f32"].max_error
    own = s["loss/%3"] * env.sites["loss/%3"].rounding["f32"].max_error
    measured, _ = measure(module, name, dims, {}, values, real)
    assert term >= measured > 100 * own
