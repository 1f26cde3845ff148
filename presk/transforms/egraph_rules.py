"""THE table of the e-graph optimizer's rewrite rules (presk/transforms/egraph.py).

Each rule is an identity over the reals, with a name, a family (algebraic, contraction,
accuracy) and a one-line reason. Its two sides are written in the optimizer's term
language, egglog s-expressions over these constructors:

| term | what it stands for |
|---|---|
| `(Leaf k)` | an opaque value: an argument, or the result of an op the optimizer keeps |
| `(Num q)` | a constant ℝ[] (q an exact rational: a folded constant stays exact) |
| `(F1 "exp" x)`, `(F2 "add" a b)` | an element-wise function of presk/ops, by its row's name |
| `(Powi n x)` | xⁿ, n natural |
| `(Red "mean" "feat" x)` | a reduction (sum, mean, max, min, logsumexp) over an axis, `""` every axis |
| `(Dot a b)` | `a · b` |
| `(Bcast t x)` | x broadcast to the type numbered t |

`where` holds the side conditions, egglog facts over the types the optimizer records
(`TypeOf`, and the relations `Compat`, `Drop`, `DotOK` of egraph.py): a rule whose two
sides agree as reals but whose result could differ in type says when it holds.

`evaluate` computes a side exactly (MPFR, through the op table's formulas) on values bound
to its variables; test/unit/test_egraph_rules.py checks each rule with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping

ALGEBRAIC, CONTRACTION, ACCURACY = "algebraic", "contraction", "accuracy"


@dataclass(frozen=True)
class Rule:
    name: str
    family: str
    lhs: str
    rhs: str
    reason: str
    where: tuple[str, ...] = ()


def _num(v: str) -> str:
    """An exact rational constant of the term language: `_num("1")`, `_num("1/2")`."""
    q = Fraction(v)
    return f'(Num (bigrat (from-string "{q.numerator}") (from-string "{q.denominator}")))'


ZERO, ONE, TWO = _num("0"), _num("1"), _num("2")

_SAME_TYPE = "(= (TypeOf ?b) (TypeOf ?c))"
_COMPAT = "(Compat (TypeOf ?a) (TypeOf ?b))"
_SCALAR_C = "(= (TypeOf ?c) 0)"  # type 0 is ℝ[] in every function (egraph._Types)
_ELEMENTWISE2 = ("add", "sub", "mul", "div")

RULES: tuple[Rule, ...] = (
    # ---- algebraic ----
    Rule("add-zero", ALGEBRAIC, f'(F2 "add" ?a {ZERO})', "?a", "0 is the neutral element of +"),
    Rule("zero-add", ALGEBRAIC, f'(F2 "add" {ZERO} ?a)', "?a", "0 is the neutral element of +"),
    Rule("sub-zero", ALGEBRAIC, f'(F2 "sub" ?a {ZERO})', "?a", "subtracting 0 changes nothing"),
    Rule("mul-one", ALGEBRAIC, f'(F2 "mul" ?a {ONE})', "?a", "1 is the neutral element of ·"),
    Rule("one-mul", ALGEBRAIC, f'(F2 "mul" {ONE} ?a)', "?a", "1 is the neutral element of ·"),
    Rule("div-one", ALGEBRAIC, f'(F2 "div" ?a {ONE})', "?a", "dividing by 1 changes nothing"),
    Rule("neg-neg", ALGEBRAIC, '(F1 "neg" (F1 "neg" ?a))', "?a", "−(−a) = a"),
    Rule("powi-one", ALGEBRAIC, "(Powi 1 ?a)", "?a", "a¹ = a"),
    Rule("mul-self", ALGEBRAIC, '(F2 "mul" ?a ?a)', "(Powi 2 ?a)", "a·a = a², one operand read"),
    Rule("div-const", ALGEBRAIC, '(F2 "div" ?a (Num ?q))',
         '(F2 "mul" ?a (Num (/ (bigrat (from-string "1") (from-string "1")) ?q)))',
         "a / q = a · (1/q): a multiply is cheaper than a divide (kept only when 1/q is an "
         "f64 exactly)", ('(!= ?q (bigrat (from-string "0") (from-string "1")))',)),
    Rule("recip-mul", ALGEBRAIC, '(F2 "div" ?a ?b)', f'(F2 "mul" ?a (F2 "div" {ONE} ?b))',
         "a / b = a · (1/b): when b is broadcast, one divide per element of b, not of a"),
    Rule("add-comm", ALGEBRAIC, '(F2 "add" ?a ?b)', '(F2 "add" ?b ?a)',
         "+ commutes (when the result's axes keep their order)", (_COMPAT,)),
    Rule("mul-comm", ALGEBRAIC, '(F2 "mul" ?a ?b)', '(F2 "mul" ?b ?a)',
         "· commutes (when the result's axes keep their order)", (_COMPAT,)),
    Rule("fold-add", ALGEBRAIC, '(F2 "add" (Num ?p) (Num ?q))', "(Num (+ ?p ?q))",
         "constant folding, exact over the rationals"),
    Rule("fold-sub", ALGEBRAIC, '(F2 "sub" (Num ?p) (Num ?q))', "(Num (- ?p ?q))",
         "constant folding, exact over the rationals"),
    Rule("fold-mul", ALGEBRAIC, '(F2 "mul" (Num ?p) (Num ?q))', "(Num (* ?p ?q))",
         "constant folding, exact over the rationals"),
    Rule("fold-neg", ALGEBRAIC, '(F1 "neg" (Num ?p))', "(Num (neg ?p))",
         "constant folding, exact over the rationals"),
    Rule("factor-left", ALGEBRAIC, '(F2 "add" (F2 "mul" ?a ?b) (F2 "mul" ?a ?c))',
         '(F2 "mul" ?a (F2 "add" ?b ?c))', "a·b + a·c = a·(b + c): one multiply fewer",
         (_SAME_TYPE,)),
    Rule("factor-right", ALGEBRAIC, '(F2 "add" (F2 "mul" ?b ?a) (F2 "mul" ?c ?a))',
         '(F2 "mul" (F2 "add" ?b ?c) ?a)', "b·a + c·a = (b + c)·a: one multiply fewer",
         (_SAME_TYPE,)),
    Rule("factor-sub", ALGEBRAIC, '(F2 "sub" (F2 "mul" ?a ?b) (F2 "mul" ?a ?c))',
         '(F2 "mul" ?a (F2 "sub" ?b ?c))', "a·b − a·c = a·(b − c): one multiply fewer",
         (_SAME_TYPE,)),
    Rule("bcast-f1", ALGEBRAIC, "(F1 ?f (Bcast ?t ?a))", "(Bcast ?t (F1 ?f ?a))",
         "an element-wise function of a broadcast is the broadcast of it: computed on the "
         "smaller operand"),
    Rule("bcast-powi", ALGEBRAIC, "(Powi ?n (Bcast ?t ?a))", "(Bcast ?t (Powi ?n ?a))",
         "a power of a broadcast is the broadcast of the power"),
    Rule("bcast-num", ALGEBRAIC, "(F2 ?f (Bcast ?t ?a) (Num ?q))",
         "(Bcast ?t (F2 ?f ?a (Num ?q)))",
         "an operation with a constant moves inside a broadcast",
         ('(Elementwise2 ?f)',)),
    Rule("reduce-bcast", ALGEBRAIC, "(Red ?k ?x (Bcast ?t ?a))", "?a",
         "the mean, max or min over an axis a value was only broadcast along is the value",
         ("(Drop ?t ?x (TypeOf ?a))", "(Idempotent ?k)")),
    # ---- contraction and reduction ----
    Rule("sum-mul-dot", CONTRACTION, '(Red "sum" ?x (F2 "mul" ?a ?b))', "(Dot ?a ?b)",
         "Σ over the last axis of a product with a vector is a dot: no product tensor",
         ("(DotOK (TypeOf ?a) (TypeOf ?b) ?x)",)),
    Rule("dot-scale-left", CONTRACTION, '(Dot (F2 "mul" ?a (Num ?q)) ?b)',
         '(F2 "mul" (Dot ?a ?b) (Num ?q))',
         "a scale moves through a dot: applied to the (smaller) result"),
    Rule("dot-scale-right", CONTRACTION, '(Dot ?a (F2 "mul" ?b (Num ?q)))',
         '(F2 "mul" (Dot ?a ?b) (Num ?q))',
         "a scale moves through a dot: applied to the (smaller) result"),
    Rule("reduce-scale", CONTRACTION, '(Red ?k ?x (F2 "mul" ?a (Num ?q)))',
         '(F2 "mul" (Red ?k ?x ?a) (Num ?q))',
         "a scale moves through a sum or mean: applied to the (smaller) result",
         ("(Linear ?k)",)),
    # ---- accuracy ----
    Rule("log1p", ACCURACY, f'(F1 "log" (F2 "add" {ONE} ?a))', '(F1 "log1p" ?a)',
         "log(1 + a) loses a's low bits in the sum when |a| is small; log1p keeps them"),
    Rule("log1p-r", ACCURACY, f'(F1 "log" (F2 "add" ?a {ONE}))', '(F1 "log1p" ?a)',
         "log(a + 1) loses a's low bits in the sum when |a| is small; log1p keeps them"),
    Rule("expm1", ACCURACY, f'(F2 "sub" (F1 "exp" ?a) {ONE})', '(F1 "expm1" ?a)',
         "exp(a) − 1 cancels when |a| is small; expm1 does not"),
    Rule("logsumexp", ACCURACY, '(F1 "log" (Red "sum" ?x (F1 "exp" ?a)))',
         '(Red "logsumexp" ?x ?a)',
         "log Σ exp overflows or underflows where logsumexp, shifted by the max, does not"),
    Rule("variance", ACCURACY,
         '(F2 "sub" (Red "mean" ?x (Powi 2 ?a)) (Powi 2 (Red "mean" ?x ?a)))',
         '(Red "mean" ?x (Powi 2 (F2 "sub" ?a (Red "mean" ?x ?a))))',
         "E[a²] − E[a]² cancels when the mean is large against the spread; "
         "E[(a − E[a])²] subtracts before squaring"),
    Rule("softplus", ACCURACY, '(F1 "log1p" (F1 "exp" ?a))', '(F1 "softplus" ?a)',
         "log(1 + eᵃ) overflows for large a; softplus does not"),
    Rule("log-sigmoid", ACCURACY, '(F1 "log" (F1 "sigmoid" ?a))',
         '(F1 "neg" (F1 "softplus" (F1 "neg" ?a)))',
         "log σ(a) = −softplus(−a): σ underflows to 0 for very negative a, softplus not"),
    Rule("sqrt-diff", ACCURACY, f'(F2 "sub" (F1 "sqrt" (F2 "add" ?a {ONE})) (F1 "sqrt" ?a))',
         f'(F2 "div" {ONE} (F2 "add" (F1 "sqrt" (F2 "add" ?a {ONE})) (F1 "sqrt" ?a)))',
         "√(a+1) − √a cancels for large a; 1/(√(a+1) + √a) adds instead"),
    Rule("one-minus-cos", ACCURACY, f'(F2 "sub" {ONE} (F1 "cos" ?a))',
         f'(F2 "mul" {TWO} (Powi 2 (F1 "sin" (F2 "mul" ?a {_num("1/2")}))))',
         "1 − cos a cancels for small a; 2·sin²(a/2) does not"),
    Rule("shift-cancels", ACCURACY, '(F2 "sub" (F2 "add" ?a ?c) (F2 "add" ?b ?c))',
         '(F2 "sub" ?a ?b)',
         "(a + c) − (b + c) = a − b: a common scalar addend cancels exactly (so a large "
         "shift never reaches the difference)", (_SCALAR_C,)),
    Rule("mean-shift", ALGEBRAIC, '(Red "mean" ?x (F2 "add" ?a ?c))',
         '(F2 "add" (Red "mean" ?x ?a) ?c)',
         "the mean of a shifted value is the shifted mean (c a scalar)", (_SCALAR_C,)),
    Rule("diff-squares", ACCURACY, '(F2 "sub" (Powi 2 ?a) (Powi 2 ?b))',
         '(F2 "mul" (F2 "sub" ?a ?b) (F2 "add" ?a ?b))',
         "a² − b² cancels when a ≈ b; (a − b)(a + b) subtracts the operands exactly first",
         (_COMPAT,)),
)
"""Every rule of the optimizer, in one table."""

BY_NAME: dict[str, Rule] = {r.name: r for r in RULES}
FAMILIES = (ALGEBRAIC, CONTRACTION, ACCURACY)
ELEMENTWISE2 = _ELEMENTWISE2
IDEMPOTENT = ("mean", "max", "min")  # reducing copies of one value gives the value
LINEAR = ("sum", "mean")


# ---- the term language as a tree: parsing a side, evaluating it ----

_TOKEN = re.compile(r'\(|\)|"[^"]*"|[^\s()]+')


def parse(text: str) -> Any:
    """An s-expression as nested lists of tokens (strings keep their quotes)."""
    stack: list[list] = [[]]
    for tok in _TOKEN.findall(text):
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    assert len(stack) == 1 and len(stack[0]) == 1, text
    return stack[0][0]


def variables(text: str) -> list[str]:
    """The pattern variables of a side (`?a`, …), in order of first appearance."""
    seen: list[str] = []
    for tok in _TOKEN.findall(text):
        if tok.startswith("?") and tok not in seen:
            seen.append(tok)
    return seen


def rational(node: Any, env: Mapping[str, Any] | None = None) -> Fraction:
    """The value of a `(bigrat (from-string "p") (from-string "q"))`, of an arithmetic
    primitive over such (`(/ r s)`, `(+ r s)`, …) or of a variable bound in `env`."""
    if isinstance(node, Fraction):
        return node
    if isinstance(node, str):
        return Fraction((env or {})[node])
    head, *args = node
    if head == "bigrat":
        return Fraction(int(args[0][1].strip('"')), int(args[1][1].strip('"')))
    vals = [rational(a, env) for a in args]
    return {"+": lambda: vals[0] + vals[1], "-": lambda: vals[0] - vals[1],
            "*": lambda: vals[0] * vals[1], "/": lambda: vals[0] / vals[1],
            "neg": lambda: -vals[0]}[head]()


def evaluate(text: str, env: Mapping[str, Any], g: Any) -> Any:
    """A side's exact value: `env` binds each variable to an MPFR vector (a list), a
    string (a function or reduction name, an axis), an int (a power) or a Fraction (a
    constant); `g` is gmpy2 at the wanted precision. Element-wise ops map over vectors
    (a scalar broadcasts), a reduction or a dot makes a one-element vector, a broadcast
    is the identity."""
    from presk import ops

    def ev(node: Any) -> Any:
        if isinstance(node, str):
            if node.startswith("?"):
                return env[node]
            if node.startswith('"'):
                return node.strip('"')
            return int(node)
        head, *args = node
        if head == "Num":
            q = rational(args[0], env)
            return [g.mpfr(q.numerator) / q.denominator]
        if head in ("F1", "F2"):
            fn, *xs = (ev(a) for a in args)
            return _map(lambda *v: ops.row(fn).mpfr(g, *v), xs)
        if head == "Powi":
            n, x = ev(args[0]), ev(args[1])
            return [v ** n for v in x]
        if head == "Bcast":
            return ev(args[1])
        if head == "Dot":
            a, b = ev(args[0]), ev(args[1])
            return [g.fsum([x * y for x, y in zip(a, b)])]
        if head == "Red":
            kind, _, x = (ev(a) for a in args)
            return [_reduce(kind, x, g)]
        raise ValueError(f"no term `{head}`")
    return ev(parse(text))


def _map(f, xs: list[list]) -> list:
    n = max(len(x) for x in xs)
    return [f(*(x[i] if len(x) > 1 else x[0] for x in xs)) for i in range(n)]


def _reduce(kind: str, x: list, g: Any) -> Any:
    if kind == "sum":
        return g.fsum(x)
    if kind == "mean":
        return g.fsum(x) / len(x)
    if kind == "max":
        return max(x)
    if kind == "min":
        return min(x)
    if kind == "logsumexp":
        return g.log(g.fsum([g.exp(v) for v in x]))
    raise ValueError(f"no reduction `{kind}`")
