"""FPCore in (`presk import-fpcore`): the straight-line subset of FPBench's FPCore 1.x/2.0
as a .psk program, and its box precondition as ranges (`presk-ranges/1`).

What is taken: arithmetic (`+ - * /`, n-ary `+` and `*` folded left, unary `-`), the math
functions Presk has (`sqrt exp log tanh sin cos erf fabs fmax fmin`), `pow` to a natural
literal, numbers (decimal, rational, hexadecimal: each read as the f64 nearest, as a .psk
literal is), `PI` and `E` (their f64 values), `let` and `let*`, and a precondition whose
conjuncts bound variables (`(<= lo x hi)`, `(< lo x hi)`, `(>= x lo)`, …). Conjuncts that
are not bounds are dropped (a bound over a box holding the set is a bound over the set)
and said so. Anything else — `if`, `while`, comparisons in the body, tensors, a function
Presk lacks, a variable without a range — is refused with one line naming it.

Each FPCore `f` becomes two functions: `f_each`, element-wise over `ℝ[...]` (so it can run
over a batch of points), and the entry `f` over `ℝ[]` that calls it. Pure Python.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from .parser import RESERVED

# Not to be taken by a translated variable: the reserved words, and the builtins that
# are not functions of reals (a name equal to one would shadow it).
KEYWORDS = RESERVED | {"grad", "value_and_grad", "real"}
BUILTINS = set("sqrt exp log tanh sigmoid gelu softplus sin cos relu abs min max sum mean "
               "logsumexp softmax erf".split())
UNARY = {"sqrt": "sqrt", "exp": "exp", "log": "log", "tanh": "tanh", "sin": "sin",
         "cos": "cos", "erf": "erf", "fabs": "abs"}
BINARY_FN = {"fmax": "max", "fmin": "min"}
CONSTANTS = {"PI": math.pi, "E": math.e}


class FPCoreError(Exception):
    """What cannot be imported: one line, with the file, line and column."""


@dataclass
class Node:
    value: object  # a str (symbol, number text), a `Str`, or a list of Nodes
    line: int
    col: int


@dataclass
class Str:
    text: str


@dataclass
class Core:
    name: str  # the .psk function's name
    title: str  # the :name property, or the name
    args: list[str]  # the .psk names of the arguments, in order
    lets: list[tuple[str, str]]  # (name, .psk expression), in order
    result: str
    ranges: dict[str, list[float]]  # argument (.psk name) → [lo, hi]
    dropped: list[str] = field(default_factory=list)  # conjuncts of :pre not bounds


# ---- reading ----

_TOKEN = re.compile(r'\s+|;[^\n]*|"(?:[^"\\]|\\.)*"|[()\[\]]|[^\s()\[\];"]+')


def parse(text: str, path: str) -> list[Node]:
    """The file's S-expressions."""
    stack: list[list[Node]] = [[]]
    opens: list[tuple[int, int]] = []
    line, col, pos = 1, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise FPCoreError(f"{path}:{line}:{col}: unreadable text")
        tok = m.group(0)
        if tok in ("(", "["):
            stack.append([])
            opens.append((line, col))
        elif tok in (")", "]"):
            if len(stack) == 1:
                raise FPCoreError(f"{path}:{line}:{col}: `{tok}` closes nothing")
            items = stack.pop()
            ol, oc = opens.pop()
            stack[-1].append(Node(items, ol, oc))
        elif tok[0] == '"':
            stack[-1].append(Node(Str(tok[1:-1]), line, col))
        elif not tok[0].isspace() and tok[0] != ";":
            stack[-1].append(Node(tok, line, col))
        nl = tok.count("\n")
        line, col = (line + nl, len(tok) - tok.rfind("\n")) if nl else (line, col + len(tok))
        pos = m.end()
    if len(stack) != 1:
        ol, oc = opens[-1]
        raise FPCoreError(f"{path}:{ol}:{oc}: `(` is never closed")
    return stack[0]


# ---- translating ----

class _Names:
    """FPCore identifiers as .psk names: letters, digits and `_`, no keyword, unique."""

    def __init__(self, taken: set[str] | None = None) -> None:
        self.taken = set(taken or ())

    def fresh(self, ident: str) -> str:
        base = re.sub(r"\W", "_", ident.replace("*", "_star").replace("'", "_prime"))
        if not base or not (base[0].isalpha() or base[0] == "_"):
            base = "v_" + base
        if base in KEYWORDS or base in BUILTINS:
            base += "_"
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def _number(tok: str) -> float | None:
    try:
        if tok.lower().startswith(("0x", "-0x", "+0x")):
            return float.fromhex(tok)
        if "/" in tok:
            return float(Fraction(tok))
        return float(tok)
    except (ValueError, ZeroDivisionError):
        return None


def _literal(v: float) -> str:
    text = repr(float(v))
    if text.startswith("-"):
        return f"(-{text[1:]})"
    return text


class _Translator:
    def __init__(self, path: str) -> None:
        self.path = path

    def where(self, n: Node) -> str:
        return f"{self.path}:{n.line}:{n.col}"

    def refuse(self, n: Node, what: str) -> FPCoreError:
        return FPCoreError(f"{self.where(n)}: {what}")

    def core(self, n: Node, names: _Names) -> Core:
        items = n.value
        assert isinstance(items, list)
        rest = items[1:]
        ident = None
        if rest and isinstance(rest[0].value, str):  # FPCore 2.0: (FPCore name (args) …)
            ident = rest[0].value
            rest = rest[1:]
        if not rest or not isinstance(rest[0].value, list):
            raise self.refuse(n, "an FPCore is (FPCore (arguments…) properties… body)")
        arg_nodes = rest[0].value
        props: dict[str, Node] = {}
        i = 1
        while i + 1 < len(rest) and isinstance(rest[i].value, str) and \
                str(rest[i].value).startswith(":"):
            props[str(rest[i].value)] = rest[i + 1]
            i += 2
        if i != len(rest) - 1:
            raise self.refuse(n, "an FPCore has one body after its properties")
        body = rest[i]
        title_node = props.get(":name")
        title = title_node.value.text if title_node is not None and isinstance(
            title_node.value, Str) else (ident or "fpcore")
        prec = props.get(":precision") or props.get(":type")
        if prec is not None and prec.value not in ("binary64", "real"):
            raise self.refuse(prec, f"precision {prec.value}: import binary64 programs (a "
                              "narrower type is a realization: presk solve chooses it)")
        fname = names.fresh(ident or title)
        scope: dict[str, str] = {}
        local = _Names({fname, fname + "_each"})
        args = []
        for a in arg_nodes:
            if not isinstance(a.value, str):
                raise self.refuse(a, "an argument with dimensions (a tensor) is not imported")
            scope[a.value] = local.fresh(a.value)
            args.append(scope[a.value])
        lets: list[tuple[str, str]] = []
        result = self.expr(body, scope, lets, local)
        ranges, dropped = self.pre(props.get(":pre"), scope)
        for a, name in zip(arg_nodes, args):
            if name not in ranges:
                raise self.refuse(a, f"argument `{a.value}` has no range in :pre (a box "
                                  "bound (<= lo x hi) is needed)")
        return Core(fname, title, args, lets, result, ranges, dropped)

    # the body: an expression, its lets hoisted in order
    def expr(self, n: Node, scope: dict[str, str], lets: list, names: _Names) -> str:
        v = n.value
        if isinstance(v, Str):
            raise self.refuse(n, "a string is not a number")
        if isinstance(v, str):
            if v in scope:
                return scope[v]
            if v in CONSTANTS:
                return _literal(CONSTANTS[v])
            num = _number(v)
            if num is None:
                raise self.refuse(n, f"`{v}` is no argument, let or number")
            if not math.isfinite(num):
                raise self.refuse(n, f"`{v}` is not finite")
            return _literal(num)
        assert isinstance(v, list)
        if not v or not isinstance(v[0].value, str):
            raise self.refuse(n, "an empty or headless form")
        head, args = str(v[0].value), v[1:]
        if head in ("let", "let*"):
            return self.let(n, head, args, scope, lets, names)
        if head in ("if", "while", "while*", "for", "for*", "tensor", "tensor*", "ref",
                    "dim", "size", "cast", "!", "digits", "array"):
            raise self.refuse(n, f"`{head}` is outside the straight-line subset Presk imports")
        if head in ("<", ">", "<=", ">=", "==", "!=", "and", "or", "not"):
            raise self.refuse(n, f"`{head}` (a comparison) in a body is not imported")
        sub = [self.expr(a, scope, lets, names) for a in args] \
            if head not in ("pow",) else None
        if head == "-" and len(args) == 1:
            return f"(-{sub[0]})"
        if head in ("+", "*") and len(args) >= 2:
            out = sub[0]
            for s in sub[1:]:
                out = f"({out} {head} {s})"
            return out
        if head in ("-", "/") and len(args) == 2:
            return f"({sub[0]} {head} {sub[1]})"
        if head in UNARY and len(args) == 1:
            return f"{UNARY[head]}({sub[0]})"
        if head in BINARY_FN and len(args) == 2:
            return f"{BINARY_FN[head]}({sub[0]}, {sub[1]})"
        if head == "pow" and len(args) == 2:
            k = args[1].value
            if isinstance(k, str) and k.isdigit():
                return f"({self.expr(args[0], scope, lets, names)} ^ {int(k)})"
            raise self.refuse(n, "pow to a non-natural exponent is not imported (Presk's "
                              "x ^ y needs a positive base, and the box analysis covers x ^ n)")
        raise self.refuse(n, f"`{head}` with {len(args)} argument(s) is not a function Presk "
                          "has")

    def let(self, n: Node, head: str, args: list[Node], scope, lets, names) -> str:
        if len(args) != 2 or not isinstance(args[0].value, list):
            raise self.refuse(n, f"({head} ([name value] …) body)")
        inner = dict(scope)
        for b in args[0].value:
            if not isinstance(b.value, list) or len(b.value) != 2 or \
                    not isinstance(b.value[0].value, str):
                raise self.refuse(b, "a binding is [name value]")
            value = self.expr(b.value[1], inner if head == "let*" else scope, lets, names)
            name = names.fresh(str(b.value[0].value))
            lets.append((name, value))
            inner[str(b.value[0].value)] = name
        return self.expr(args[1], inner, lets, names)

    # the precondition: bounds on arguments
    def pre(self, n: Node | None, scope: dict[str, str]):
        ranges: dict[str, list[float]] = {}
        dropped: list[str] = []
        if n is None:
            return ranges, dropped
        conj = n.value[1:] if isinstance(n.value, list) and n.value and \
            n.value[0].value == "and" else [n]
        for c in conj:
            if not self.bound(c, scope, ranges):
                dropped.append(self.where(c))
        for name, (lo, hi) in ranges.items():
            if lo > hi:
                raise FPCoreError(f"{self.path}: the range of `{name}` is empty ({lo} > {hi})")
        return ranges, dropped

    def bound(self, c: Node, scope: dict[str, str], ranges: dict) -> bool:
        v = c.value
        if not isinstance(v, list) or len(v) < 3 or v[0].value not in ("<=", "<", ">=", ">"):
            return False
        terms = [t.value for t in v[1:]]
        if v[0].value in (">=", ">"):
            terms = terms[::-1]
        # an increasing chain: numbers and one argument
        vars_ = [i for i, t in enumerate(terms) if isinstance(t, str) and t in scope]
        nums = [_number(t) if isinstance(t, str) and t not in scope else
                (CONSTANTS.get(t) if isinstance(t, str) else None) for t in terms]
        if len(vars_) != 1 or any(nums[i] is None for i in range(len(terms)) if i != vars_[0]):
            return False
        k = vars_[0]
        name = scope[terms[k]]  # type: ignore[index]
        lo, hi = ranges.get(name, [-math.inf, math.inf])
        if k > 0:
            lo = max(lo, max(nums[i] for i in range(k)))  # type: ignore[type-var]
        if k < len(terms) - 1:
            hi = min(hi, min(nums[i] for i in range(k + 1, len(terms))))  # type: ignore[type-var]
        ranges[name] = [lo, hi]
        return True


def translate(text: str, path: str) -> list[Core]:
    forms = parse(text, path)
    t = _Translator(path)
    names = _Names()
    cores = []
    for f in forms:
        if not (isinstance(f.value, list) and f.value and f.value[0].value == "FPCore"):
            raise t.refuse(f, "expected (FPCore …)")
        cores.append(t.core(f, names))
    if not cores:
        raise FPCoreError(f"{path}: no FPCore in the file")
    for c in cores:
        for name, (lo, hi) in c.ranges.items():
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise FPCoreError(f"{path}: `{c.title}`: argument `{name}` is bounded on one "
                                  "side only (a box needs both)")
    return cores


POINTS = "POINTS"  # the dim of the `f_points` entries (`to_psk(points=True)`)


def to_psk(cores: list[Core], source: str, points: bool = False) -> str:
    """The .psk text; with `points`, each `f` also gets `f_points`, its entry over one
    axis of POINTS points (for measuring it natively at many points in one call)."""
    lines = [f"-- imported from {source} by presk import-fpcore: the straight-line FPCore",
             "-- subset; each `f_each` is element-wise over ℝ[...], each `f` its entry over",
             "-- ℝ[]; the precondition's box is in the ranges file (presk-ranges/1)."]
    if points:
        lines += ["", f"dim {POINTS}"]
    for c in cores:
        lines.append("")
        lines.append(f"-- {c.title}: " + ", ".join(
            f"{a} ∈ [{_g(lo)}, {_g(hi)}]" for a, (lo, hi) in c.ranges.items()))
        if c.dropped:
            lines.append("-- (conjuncts of :pre that bound no single argument were dropped: "
                         "the box holds the set they describe)")
        params = ", ".join(f"{a} : ℝ[...]" for a in c.args)
        lines.append(f"fn {c.name}_each({params}) -> ℝ[...] =")
        for name, value in c.lets:
            lines.append(f"  let {name} = {value}")
        lines.append(f"  let {_result_name(c)} = {c.result}")
        lines.append(f"  {_result_name(c)}")
        lines.append("")
        scalar = ", ".join(f"{a} : ℝ[]" for a in c.args)
        lines.append(f"fn {c.name}({scalar}) -> ℝ[] =")
        lines.append(f"  {c.name}_each({', '.join(c.args)})")
        if points:
            axis = f"ℝ[point: {POINTS}]"
            lines += ["", f"fn {c.name}_points(" + ", ".join(f"{a} : {axis}" for a in c.args)
                      + f") -> {axis} =", f"  {c.name}_each({', '.join(c.args)})"]
    return "\n".join(lines) + "\n"


def _result_name(c: Core) -> str:
    taken = {n for n, _ in c.lets} | set(c.args)
    name = "result"
    while name in taken:
        name += "_"
    return name


def _g(x: float) -> str:
    return f"{x:.17g}" if x != int(x) or abs(x) >= 1e16 else str(int(x))
