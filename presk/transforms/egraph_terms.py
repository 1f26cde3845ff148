"""The terms of psk-egraph-opt: a PSK-Core function as egglog terms (`function_terms`,
`function_program`, the rules' program), the saturated e-graph read back into Python
(`Graph`, `Node`), and a node back into a PSK-Core op (`build_op`, `node_type`).

The two directions live together because they are one encoding: a head and its payload
(`F2 "mul"`, `Red "sum" axis`, `Bcast type`) written by `function_terms` is read by
`read_graph` and rebuilt by `build_op`; a change to one is a change to all three.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from xdsl.ir import Operation, SSAValue

from presk import shapes
from presk.dialects import core as C
from presk.dialects.core.elementwise import FUNCTION_OPS

from . import egraph_rules as RULES


# ---- the terms ----

@dataclass(frozen=True)
class Node:
    """One e-node: `head` (Leaf, Num, F1, F2, Powi, Red, Dot, Bcast), its payload (a
    leaf's index, a constant, a function or reduction and its axis, a power, a target
    type's number) and its operands' e-classes."""

    head: str
    payload: tuple
    children: tuple[str, ...]


_REDUCE_OPS: dict[type, str] = {C.SumOp: "sum", C.MeanOp: "mean", C.MaxOp: "max",
                                C.MinOp: "min", C.LogSumExpOp: "logsumexp"}
_REDUCE_CLASS = {v: k for k, v in _REDUCE_OPS.items()}


def _is_tensor_constant(op: Operation) -> bool:
    return isinstance(op, C.ConstantOp) and isinstance(op.results[0].type, C.TensorAttr)


def _type_or_none(shape: Callable[[], shapes.TensorType]) -> C.TensorAttr | None:
    """The tensor type of a shape function's result; None where the shapes do not fit."""
    try:
        return C.TensorAttr.from_shape(shape())
    except shapes.ShapeError:
        return None


class Types:
    """The tensor types of one function, numbered, with the facts the rules read."""

    def __init__(self) -> None:
        self.ids: dict[C.TensorAttr, int] = {}
        self.types: list[C.TensorAttr] = []
        self.scalar = self.id(C.TensorAttr.scalar())

    def id(self, t: C.TensorAttr) -> int:
        if t not in self.ids:
            self.ids[t] = len(self.types)
            self.types.append(t)
        return self.ids[t]

    def facts(self) -> list[str]:
        """Compat (same type, or one a scalar), Drop (the type a reduction over an axis
        leaves, closed under further reductions), DotOK (a product's sum over the last
        axis that is a dot), Bc (the type of an element-wise op of two types)."""
        out: list[str] = []
        todo = list(self.types)
        seen: set[int] = set()
        while todo:
            t = todo.pop()
            tid = self.id(t)
            if tid in seen:
                continue
            seen.add(tid)
            for axis in [a.name for a in t.shape.axes if a.name] + [None]:
                r = _type_or_none(lambda: shapes.reduce(t.shape, axis))
                if r is None:
                    continue
                out.append(f'(Drop {tid} "{axis or ""}" {self.id(r)})')
                todo.append(r)
        n = len(self.types)
        for i in range(n):
            for j in range(n):
                a, b = self.types[i], self.types[j]
                if i == j or i == self.scalar or j == self.scalar:
                    out.append(f"(Compat {i} {j})")
                r = _type_or_none(lambda: shapes.broadcast(a.shape, b.shape))
                if r in self.ids:
                    out.append(f"(Bc {i} {j} {self.ids[r]})")
                last = a.shape.axes[-1] if a.shape.axes else None
                if (last is not None and last.name and not b.shape.prefix
                        and len(b.shape.axes) == 1 and b.shape.axes[0] == last and r == a):
                    out.append(f'(DotOK {i} {j} "{last.name}")')
                d = _type_or_none(lambda: shapes.contract(a.shape, b.shape))
                if d in self.ids:
                    out.append(f"(Ct {i} {j} {self.ids[d]})")
        return out


_PRELUDE = """
(datatype T
  (Leaf i64) (Num BigRat) (F1 String T) (F2 String T T) (Powi i64 T)
  (Red String String T) (Dot T T) (Bcast i64 T))
(function TypeOf (T) i64 :merge old)
(relation Compat (i64 i64))
(relation Drop (i64 String i64))
(relation DotOK (i64 i64 String))
(relation Bc (i64 i64 i64))
(relation Ct (i64 i64 i64))
(relation Elementwise2 (String))
(relation Idempotent (String))
(relation Linear (String))
(relation Site (T i64))
(ruleset typing)
(ruleset rewrites)
(rule ((= e (F1 ?f ?a)) (= (TypeOf ?a) ?t)) ((set (TypeOf e) ?t)) :ruleset typing)
(rule ((= e (Powi ?n ?a)) (= (TypeOf ?a) ?t)) ((set (TypeOf e) ?t)) :ruleset typing)
(rule ((= e (Bcast ?t ?a))) ((set (TypeOf e) ?t)) :ruleset typing)
(rule ((= e (F2 ?f ?a ?b)) (Bc (TypeOf ?a) (TypeOf ?b) ?t)) ((set (TypeOf e) ?t))
      :ruleset typing)
(rule ((= e (Red ?k ?x ?a)) (Drop (TypeOf ?a) ?x ?t)) ((set (TypeOf e) ?t)) :ruleset typing)
(rule ((= e (Dot ?a ?b)) (Ct (TypeOf ?a) (TypeOf ?b) ?t)) ((set (TypeOf e) ?t))
      :ruleset typing)
"""


def _rule_text(rule: RULES.Rule) -> str:
    facts = " ".join((f"(= ?root {rule.lhs})",) + rule.where)
    return (f"(rule ({facts}) ((union ?root {rule.rhs})) :ruleset rewrites "
            f':name "{rule.name}")')


def _rational_text(value: float) -> str:
    q = Fraction(value)
    return f'(Num (bigrat (from-string "{q.numerator}") (from-string "{q.denominator}")))'


# ---- one function into terms ----

@dataclass
class FunctionTerms:
    """A function's body as terms: `lets[i]` the term of the i-th modelled value, the
    leaves (block arguments, then opaque results), and what each value is."""

    func: C.FuncOp
    types: Types
    lets: list[str] = field(default_factory=list)
    value_let: dict[SSAValue, int] = field(default_factory=dict)  # value → its let index
    let_op: list[Operation | None] = field(default_factory=list)
    let_value: list[SSAValue] = field(default_factory=list)
    leaves: list[SSAValue] = field(default_factory=list)
    leaf_pos: list[int] = field(default_factory=list)  # the op index defining each leaf


def _term_of(op: Operation, ref: Callable[[SSAValue], str], types: Types) -> str | None:
    """The term of an op the optimizer models, over its operands' references."""
    if isinstance(op, (C.PowIOp, C.HeavisideOp, C.SoftmaxOp)):
        if isinstance(op, C.PowIOp):
            return f"(Powi {op.n.value.data} {ref(op.operands[0])})"
        return None
    function = getattr(type(op), "FUNCTION", None)
    if function is not None and FUNCTION_OPS.get(function) is type(op):
        args = " ".join(ref(o) for o in op.operands)
        return f'(F{len(op.operands)} "{function}" {args})'
    if type(op) in _REDUCE_OPS:
        return f'(Red "{_REDUCE_OPS[type(op)]}" "{op.axis_name or ""}" {ref(op.operands[0])})'
    if isinstance(op, C.DotOp):
        return f"(Dot {ref(op.operands[0])} {ref(op.operands[1])})"
    if isinstance(op, C.BroadcastOp):
        return f"(Bcast {types.id(op.results[0].type)} {ref(op.operands[0])})"
    if _is_tensor_constant(op) and math.isfinite(op.number):
        return _rational_text(op.number)
    return None


def function_terms(func: C.FuncOp) -> FunctionTerms:
    f = FunctionTerms(func, Types())

    def leaf(value: SSAValue, pos: int) -> None:
        f.leaves.append(value)
        f.leaf_pos.append(pos)
        add(value, f"(Leaf {len(f.leaves) - 1})", None)

    def add(value: SSAValue, term: str, op: Operation | None) -> None:
        f.value_let[value] = len(f.lets)
        f.lets.append(term)
        f.let_op.append(op)
        f.let_value.append(value)

    def ref(value: SSAValue) -> str:
        return f"$v{f.value_let[value]}"

    for arg in func.body.block.args:
        leaf(arg, -1)
    for pos, op in enumerate(func.body.block.ops):
        if isinstance(op, C.ReturnOp):
            continue
        term = None
        if all(o in f.value_let for o in op.operands) and len(op.results) == 1 \
                and isinstance(op.results[0].type, C.TensorAttr):
            term = _term_of(op, ref, f.types)
        if term is not None:
            add(op.results[0], term, op)
        else:
            for r in op.results:
                leaf(r, pos)
    return f


def rules_program() -> str:
    """The datatype, the typing rules and the rewrite rules: loaded once per module."""
    lines = [_PRELUDE]
    lines += [f"(Elementwise2 \"{n}\")" for n in RULES.ELEMENTWISE2]
    lines += [f"(Idempotent \"{n}\")" for n in RULES.IDEMPOTENT]
    lines += [f"(Linear \"{n}\")" for n in RULES.LINEAR]
    lines += [_rule_text(r) for r in RULES.RULES]
    return "\n".join(lines)


def function_program(f: FunctionTerms) -> str:
    """One function's terms, their types and the type facts the rules read."""
    lines = [f"(rule ((= e (Num ?q))) ((set (TypeOf e) {f.types.scalar})) :ruleset typing)"]
    for i, term in enumerate(f.lets):
        lines.append(f"(let $v{i} {term})")
        lines.append(f"(Site $v{i} {i})")
    for value, i in f.value_let.items():
        if isinstance(value.type, C.TensorAttr):
            lines.append(f"(set (TypeOf $v{i}) {f.types.id(value.type)})")
    lines += f.types.facts()
    return "\n".join(lines)


# ---- the saturated e-graph, read back ----

@dataclass
class Graph:
    """The e-graph as Python reads it: the nodes of each e-class, each class's type, and
    the class of each let (original value)."""

    nodes: dict[str, list[Node]]
    types: dict[str, int]
    let_class: list[str]

    @property
    def node_count(self) -> int:
        return sum(len(v) for v in self.nodes.values())


HEADS = ("Leaf", "Num", "F1", "F2", "Powi", "Red", "Dot", "Bcast")
_RATIO = re.compile(r"Ratio \{ numer: (-?\d+), denom: (\d+) \}")


def read_graph(data: dict, lets: int) -> Graph:
    raw = data["nodes"]
    cls = {k: v["eclass"] for k, v in raw.items()}
    prim = {k: v["op"] for k, v in raw.items() if k.startswith("primitive-")}
    prim_of_class = {v["eclass"]: v["op"] for k, v in raw.items()
                     if k.startswith("primitive-")}
    nodes: dict[str, list[Node]] = {}
    types: dict[str, int] = {}
    let_class: list[str | None] = [None] * lets
    for key, v in raw.items():
        op, kids = v["op"], v["children"]
        if key.startswith("primitive-"):
            continue
        if op == "TypeOf":
            types[cls[kids[0]]] = int(prim_of_class[v["eclass"]])
        elif op == "Site":
            let_class[int(prim[kids[1]])] = cls[kids[0]]
        elif op in HEADS:
            nodes.setdefault(v["eclass"], []).append(_node(op, kids, prim, cls))
    assert all(c is not None for c in let_class)
    return Graph(nodes, types, let_class)  # type: ignore[arg-type]


def _node(op: str, kids: list[str], prim: dict[str, str], cls: dict[str, str]) -> Node:
    def text(k: str) -> str:
        return prim[k].strip('"')
    if op == "Leaf":
        return Node(op, (int(text(kids[0])),), ())
    if op == "Num":
        m = _RATIO.fullmatch(prim[kids[0]])
        assert m is not None, prim[kids[0]]
        return Node(op, (Fraction(int(m.group(1)), int(m.group(2))),), ())
    if op in ("F1", "F2"):
        return Node(op, (text(kids[0]),), tuple(cls[k] for k in kids[1:]))
    if op == "Powi":
        return Node(op, (int(text(kids[0])),), (cls[kids[1]],))
    if op == "Red":
        return Node(op, (text(kids[0]), text(kids[1])), (cls[kids[2]],))
    if op == "Bcast":
        return Node(op, (int(text(kids[0])),), (cls[kids[1]],))
    return Node(op, (), tuple(cls[k] for k in kids))  # Dot


# ---- Core ops from nodes ----

def build_op(node: Node, operands: Sequence[SSAValue], result_type: C.TensorAttr,
             types: Types, site: str, name: str | None = None) -> Operation:
    """The PSK-Core op computing `node` on these operand values."""
    head, p = node.head, node.payload
    if head == "Num":
        return C.ConstantOp(float(p[0]), site=site, name=name, result_type=result_type)
    if head == "F1":
        return FUNCTION_OPS[p[0]](operands[0], site=site, name=name)
    if head == "F2":
        return FUNCTION_OPS[p[0]](operands[0], operands[1], site=site, name=name,
                                  result_type=result_type)
    if head == "Powi":
        return C.PowIOp(operands[0], p[0], site=site, name=name)
    if head == "Red":
        return _REDUCE_CLASS[p[0]](operands[0], p[1] or None, site=site, name=name)
    if head == "Dot":
        return C.DotOp(operands[0], operands[1], site=site, name=name,
                       result_type=result_type)
    if head == "Bcast":
        return C.BroadcastOp(operands[0], types.types[p[0]], site=site, name=name)
    raise AssertionError(head)


def node_type(node: Node, kids: Sequence[C.TensorAttr], types: Types) -> C.TensorAttr | None:
    """The type `node` computes from operands of these types (None: it does not fit)."""
    head, p = node.head, node.payload
    try:
        if head == "Num":
            return C.TensorAttr.scalar()
        if head in ("F1", "Powi"):
            return kids[0]
        if head == "F2":
            return C.TensorAttr.from_shape(shapes.broadcast(kids[0].shape, kids[1].shape))
        if head == "Red":
            return C.TensorAttr.from_shape(shapes.reduce(kids[0].shape, p[1] or None))
        if head == "Dot":
            return C.TensorAttr.from_shape(shapes.contract(kids[0].shape, kids[1].shape))
        if head == "Bcast":
            target = types.types[p[0]]
            fits = shapes.conforms(shapes.broadcast(kids[0].shape, target.shape), target.shape)
            return target if fits else None
    except shapes.ShapeError:
        return None
    return None
