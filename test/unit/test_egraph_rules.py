"""Every rule of the e-graph optimizer (presk/transforms/egraph_rules.py) is an identity
over the reals: hypothesis draws values for its variables, and both sides, evaluated in
MPFR at 200 bits through the op table's own formulas (egraph_rules.evaluate), agree to
MPFR's rounding (2⁻¹⁷⁶ relative to max(|side|, 1): the size of the terms a cancelling
side subtracts) wherever both are defined (NaN on both sides where neither is).

A variable bound to a tensor is a vector of three reals (an element-wise op maps over it,
a reduction or a dot makes one element); a function or reduction variable (`?f`, `?k`)
and a constant (`?q`) are drawn from what the rule's conditions allow.
"""

from __future__ import annotations

from fractions import Fraction

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from presk.transforms import egraph_rules as R

PREC = 200
_CTX = gmpy2.context(precision=PREC, emin=-100000, emax=100000)

# what a non-tensor variable of a rule may be, by the rule's conditions
_CHOICES = {
    "?f": {"bcast-f1": ["exp", "tanh", "neg", "sqrt", "log1p"],
           "bcast-num": list(R.ELEMENTWISE2)},
    "?k": {"reduce-bcast": list(R.IDEMPOTENT), "reduce-scale": list(R.LINEAR)},
    "?x": None,  # an axis: any name (the MPFR vectors have one axis)
    "?t": None,  # a broadcast's target: the identity here
    "?n": [0, 1, 2, 3, 5],
}
_CONSTANT = ("?p", "?q")

reals = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False, allow_infinity=False)
vectors = st.lists(reals, min_size=3, max_size=3)
constants = st.fractions(min_value=-8, max_value=8, max_denominator=16).filter(lambda q: q != 0)


def _close(a, b) -> bool:
    if gmpy2.is_nan(a) or gmpy2.is_nan(b):
        return gmpy2.is_nan(a) and gmpy2.is_nan(b)
    if gmpy2.is_infinite(a) or gmpy2.is_infinite(b):
        return a == b
    # a cancelling side (exp(a) − 1 at tiny a) is exact only to the rounding of the terms
    # it subtracts, of size ≥ 1 for the values drawn: the scale is never below 1
    scale = max(abs(a), abs(b), gmpy2.mpfr(1))
    return abs(a - b) <= scale * gmpy2.mpfr(2) ** -(PREC - 24)


def _check(rule: R.Rule, env: dict) -> None:
    with gmpy2.context(_CTX):
        lhs = R.evaluate(rule.lhs, env, gmpy2)
        rhs = R.evaluate(rule.rhs, env, gmpy2)
        assert len(lhs) == len(rhs) or 1 in (len(lhs), len(rhs)), (rule.name, lhs, rhs)
        for a, b in zip(lhs * (len(rhs) if len(lhs) == 1 else 1),
                        rhs * (len(lhs) if len(rhs) == 1 else 1)):
            assert _close(a, b), f"{rule.name}: {a} ≠ {b} at {env}"


def _strategy(rule: R.Rule):
    parts = {}
    for v in R.variables(rule.lhs + " " + rule.rhs):
        choice = _CHOICES.get(v)
        if v in _CONSTANT:
            parts[v] = constants
        elif isinstance(choice, dict):
            parts[v] = st.sampled_from(choice.get(rule.name, ["add"]))
        elif isinstance(choice, list):
            parts[v] = st.sampled_from(choice)
        elif v in _CHOICES:
            parts[v] = st.just("axis")
        else:
            parts[v] = vectors.map(lambda xs: [gmpy2.mpfr(x) for x in xs])
    return st.fixed_dictionaries(parts)


@pytest.mark.parametrize("rule", R.RULES, ids=[r.name for r in R.RULES])
def test_each_rule_is_an_identity_over_the_reals(rule: R.Rule) -> None:
    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(_strategy(rule))
    def check(env: dict) -> None:
        if rule.name == "reduce-bcast":  # the operand is the broadcast value: one copy
            env = {**env, "?a": env["?a"][:1]}
        if any("(TypeOf ?c) 0" in w for w in rule.where):  # ?c is a scalar ℝ[]
            env = {**env, "?c": env["?c"][:1]}
        _check(rule, env)
    check()


def test_the_table_names_each_rule_once_with_a_reason() -> None:
    names = [r.name for r in R.RULES]
    assert len(names) == len(set(names))
    assert all(r.reason and r.family in R.FAMILIES for r in R.RULES)
    assert {r.family for r in R.RULES} == set(R.FAMILIES)


def test_a_folded_constant_is_exact() -> None:
    with gmpy2.context(_CTX):
        got = R.evaluate("(Num (+ ?p ?q))", {"?p": Fraction(1, 3), "?q": Fraction(1, 6)},
                         gmpy2)
    assert got == [gmpy2.mpfr(1) / 2]
