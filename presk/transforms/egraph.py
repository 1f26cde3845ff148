"""psk-egraph-opt{node_limit=20000 time_limit=1.0 iterations=30}: rewrite each function
of PSK-Core into its cheapest equal form, by equality saturation with egglog.

Each function body (ANF) becomes an e-graph: every op the optimizer understands (the
element-wise functions of presk/ops, powi, the reductions, dot, broadcast, constants ℝ[])
is a term over the terms of its operands; every other value (an argument, a call, a fold,
a field, …) is an opaque `Leaf`. The rules of egraph_rules.py (identities over the reals)
run until nothing changes, the e-graph holds `node_limit` nodes, `time_limit` seconds
pass or `iterations` rounds are done. The types ride along as facts (`TypeOf`, kept up
by a typing ruleset), so a rule that holds only for some types says when.

Extraction picks, bottom-up, for every e-class the node of least cost (tree cost: a node's
own cost plus its operands' classes' best), among the nodes that type-check against the
class's type, whose constant is an f64 exactly, and whose opaque leaves are defined before
the class is first needed (so the rebuilt body stays in order). A node's cost is

    cost = time + W · bits

- time: its arithmetic ops, math-library calls, elements loaded and stored and bytes
  moved, priced by a machine profile's constants (`Prices`, as presk/analysis/
  cost_model.py prices a nest) when one is given, else `ops + 16·calls + bytes/4`;
- bits: the bits it loses to cancellation or to its condition number, log₂ max(1, κ)
  averaged over its elements, κ measured on a probe (the original function run in f64 on
  the entry's inputs; `Probe`); without a probe, 0 — so `presk-opt` alone optimizes time.
  With a budget b, only the bits beyond what an f32 site can lose within b count
  (max(0, bits − log₂(b/2⁻²⁴))): those are the sites the solver could not narrow;
- W = T₀ / 20, T₀ the original function's time: one bit is worth 5 % of the function.

Rebuilding emits the chosen terms in the order of their first use; an op that computes
what an original op computed, with the same operands, keeps its attributes (site, name);
the root of a rewritten value keeps the original's site and name, and the ops a rewrite
adds get sites derived from it (`loss/%701`, `loss/%702`, …). Every rewrite the result
uses is an `Explanation`: its rule (found by matching each rule's right side against the
chosen term and its left side against the e-graph), the site it replaced, the sites it
made and the predicted saving. The module is verified after rebuilding.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from presk.dialects import core as C

from . import egraph_rules as RULES
from .egraph_cost import CostModel, Prices, Probe
from .egraph_terms import (HEADS, FunctionTerms, Graph, Node, build_op, function_program,
                           function_terms, node_type, read_graph, rules_program)


DEFAULT_NODE_LIMIT = 20000
DEFAULT_TIME_LIMIT = 1.0
DEFAULT_ITERATIONS = 30
BIT_WEIGHT = 1 / 20  # one bit lost is worth 5 % of the function's time


class OptimizerError(Exception):
    """The optimizer cannot take this input: one line for the user."""


# ---- saturation ----

@dataclass
class Saturation:
    graph: Graph
    iterations: int
    stop: str  # "saturated", "node limit", "time limit", "iterations"
    seconds: float
    matches: dict[str, int]


class Session:
    """One egglog e-graph with the rules loaded; each function runs inside a push/pop, so
    the rules are compiled once per module, not once per function."""

    def __init__(self) -> None:
        from egglog import bindings
        self.bindings = bindings
        self.eg = bindings.EGraph()
        self.eg.run_program(*self.eg.parse_program(rules_program()))
        self.push, self.pop = (self.eg.parse_program(t) for t in ("(push)", "(pop)"))


def saturate(f: FunctionTerms, node_limit: int, time_limit: float, iterations: int,
             session: Session | None = None) -> Saturation:
    session = session or Session()
    start = time.perf_counter()
    eg = session.eg
    eg.run_program(*session.push)
    try:
        return _saturate(eg, f, node_limit, time_limit, iterations, start)
    except session.bindings.EggSmolError as exc:  # a bug of ours, not the user's: where
        raise OptimizerError(f"psk-egraph-opt: egglog refused the program of "
                             f"@{f.func.sym_name.data}: {exc}") from None
    finally:
        eg.run_program(*session.pop)


def _saturate(eg: Any, f: FunctionTerms, node_limit: int, time_limit: float, iterations: int,
              start: float) -> Saturation:
    eg.run_program(*eg.parse_program(function_program(f)))
    step = eg.parse_program("(run-schedule (saturate (run typing)) (run rewrites))")
    size = eg.parse_program("(print-size)")
    stop, done, matches = "iterations", 0, {}
    while done < iterations:
        report = eg.run_program(*step)[-1].report
        done += 1
        for name, n in report.num_matches_per_rule.items():
            matches[name] = matches.get(name, 0) + n
        nodes = sum(n for name, n in eg.run_program(*size)[0].sizes if name in HEADS)
        if not report.updated:
            stop = "saturated"
            break
        if nodes >= node_limit:
            stop = "node limit"
            break
        if time.perf_counter() - start >= time_limit:
            stop = "time limit"
            break
    eg.run_program(*eg.parse_program("(run-schedule (saturate (run typing)))"))
    data = json.loads(eg.serialize([], max_functions=None,
                                   max_calls_per_function=None).to_json())
    graph = read_graph(data, len(f.lets))
    return Saturation(graph, done, stop, time.perf_counter() - start, matches)


# ---- extraction ----

@dataclass(frozen=True)
class Choice:
    node: Node
    cost: float  # tree cost: time + weight·bits, the operands' included
    time: float  # the tree's time
    bits: float  # the tree's bits
    latest: int  # the latest opaque leaf the tree reads (its op's index)
    own_time: float
    own_bits: float


@dataclass
class _Extraction:
    f: FunctionTerms
    graph: Graph
    model: CostModel
    best: dict[str, Choice] = field(default_factory=dict)
    avail: dict[str, int] = field(default_factory=dict)
    original: dict[str, list[tuple[Node, Operation]]] = field(default_factory=dict)

    def class_type(self, c: str) -> C.TensorAttr | None:
        t = self.graph.types.get(c)
        return None if t is None else self.model.types.types[t]

    def own(self, node: Node, c: str) -> tuple[float, float] | None:
        """(time, bits) of `node` in class `c`, None if it does not fit there."""
        out = self.class_type(c)
        if node.head == "Leaf":  # a tuple, a tree, an f64 has no type fact: it fits
            fits = out is None or self.f.leaves[node.payload[0]].type == out
            return (0.0, 0.0) if fits else None
        kids = [self.class_type(k) for k in node.children]
        if out is None or any(k is None for k in kids):
            return None
        if node.head == "Num" and (float(node.payload[0]) != node.payload[0]
                                   or not math.isfinite(float(node.payload[0]))):
            return None  # a folded constant that is no f64
        if node_type(node, kids, self.model.types) != out:  # type: ignore[arg-type]
            return None
        time_ = max(self.model.time(node, out, kids), 1e-9)  # type: ignore[arg-type]
        bits = self.model.bits(node, c, node.children, self.evaluate)
        return time_, bits

    def evaluate(self, node: Node, args: list, c: str) -> Any:
        """`node` on these operand values (f64), by the probe's interpreter step."""
        kids = [self.class_type(k) for k in node.children]
        block = Block(arg_types=kids)
        op = build_op(node, block.args, self.class_type(c), self.model.types, "opt/%0")
        assert self.model.probe is not None
        return self.model.probe.step(op, args)

    def leaf_pos(self, node: Node) -> int:
        return self.f.leaf_pos[node.payload[0]] if node.head == "Leaf" else -1

    def run(self) -> None:
        classes = self.graph.nodes
        cache: dict[tuple[str, Node], tuple[float, float] | None] = {}
        for _ in range(len(classes) + 1):
            changed = False
            for c, nodes in classes.items():
                for n in nodes:
                    if any(k not in self.best for k in n.children):
                        continue
                    if (c, n) not in cache:
                        cache[(c, n)] = self.own(n, c)
                    own = cache[(c, n)]
                    if own is None:
                        continue
                    kids = [self.best[k] for k in n.children]
                    latest = max([self.leaf_pos(n)] + [k.latest for k in kids])
                    if latest > self.avail.get(c, 1 << 60):
                        continue
                    t = own[0] + sum(k.time for k in kids)
                    b = own[1] + sum(k.bits for k in kids)
                    cost = t + self.model.weight * b
                    old = self.best.get(c)
                    if old is None or cost < old.cost * (1 - 1e-9) - 1e-12:
                        self.best[c] = Choice(n, cost, t, b, latest, own[0], own[1])
                        changed = True
            if not changed:
                return

    def learn_values(self) -> None:
        """Each class's value: the probe's for an original one, else computed from a node
        whose operands have values (all nodes of a class are equal over the reals)."""
        p = self.model.probe
        if p is None:
            return
        vals = self.model._values
        for i, c in enumerate(self.graph.let_class):
            value = self.f.let_value[i]
            if value in p.values and c not in vals:
                vals[c] = p.values[value]
        for _ in range(8):
            grew = False
            for c, nodes in self.graph.nodes.items():
                if c in vals or self.class_type(c) is None:
                    continue
                for n in nodes:
                    if n.head == "Leaf" or not all(k in vals for k in n.children):
                        continue
                    if any(self.class_type(k) is None for k in n.children):
                        continue
                    kids = [self.class_type(k) for k in n.children]
                    if node_type(n, kids, self.model.types) != self.class_type(c):
                        continue
                    value = self.evaluate(n, [vals[k] for k in n.children], c)
                    if value is None:  # the interpreter cannot form it: no figure
                        continue
                    vals[c] = value
                    grew = True
                    break
            if not grew:
                return


# ---- explanations ----

@dataclass
class Explanation:
    """A rewrite the optimized function uses."""

    rule: str  # the rule's name (egraph_rules.RULES), or "a chain of rewrites"
    site: str  # the site it replaced
    new_sites: list[str]  # the sites of the ops it added
    saving: float  # predicted cost (time + W·bits) of the original term less the new one's
    time_saving: float
    bits_saving: float
    before: str  # the original term, as a short formula
    after: str  # the new one


@dataclass
class FunctionReport:
    name: str
    values: int  # the values the optimizer modelled
    nodes: int
    classes: int
    iterations: int
    stop: str
    saturate_seconds: float
    extract_seconds: float
    time_before: float  # predicted, each op once (the DAG)
    time_after: float
    bits_before: float
    bits_after: float
    rewrites: list[Explanation]


def _payload_text(node: Node) -> str:
    head, p = node.head, node.payload
    if head == "Num":
        return f"{float(p[0]):g}"
    if head in ("F1", "F2"):
        return p[0]
    if head == "Powi":
        return f"^{p[0]}"
    if head == "Red":
        return f"{p[0]}[{p[1]}]" if p[1] else p[0]
    return head.lower()


def _match(pat: Any, c: str, env: dict, nodes_of: Callable[[str], list[Node]]) -> list[dict]:
    """Bindings under which the pattern `pat` (egraph_rules.parse) matches a node of class
    `c` (the nodes `nodes_of` gives), extending `env`."""
    if isinstance(pat, str):
        if pat in env:
            return [env] if env[pat] == c else []
        return [{**env, pat: c}]
    head, *args = pat
    out: list[dict] = []
    for node in nodes_of(c):
        if node.head != head:
            continue
        n_payload = len(node.payload)
        envs = [env]
        for a, v in zip(args[:n_payload], node.payload):
            envs = [e2 for e in envs for e2 in _match_payload(a, v, e)]
        for a, k in zip(args[n_payload:], node.children):
            envs = [e2 for e in envs for e2 in _match(a, k, e, nodes_of)]
        out += envs
    return out


def _match_payload(pat: Any, value: Any, env: dict) -> list[dict]:
    if isinstance(pat, list):  # a rational expression: only a literal one is compared
        if pat[0] == "bigrat":
            return [env] if RULES.rational(pat) == value else []
        return [env]
    if pat.startswith("?"):
        if pat in env:
            return [env] if env[pat] == value else []
        return [{**env, pat: value}]
    literal = pat.strip('"') if pat.startswith('"') else int(pat)
    return [env] if literal == value else []


class _Rebuild:
    """The chosen terms as PSK-Core ops, in the order of first use, with explanations."""

    def __init__(self, x: _Extraction) -> None:
        self.x = x
        self.memo: dict[str, SSAValue] = {}
        self.leaf_value: dict[int, SSAValue] = {}
        self.new_ops: list[Operation] = []
        self.rewrites: list[Explanation] = []
        self.counter: dict[str, int] = {}
        self.used = {op.site.data for op in x.f.func.body.block.ops if "site" in op.attributes}
        self.time_after = 0.0
        self.bits_after = 0.0

    def derived_site(self, owner: str) -> str:
        """`f/%7` → `f/%701`, `f/%702`, …: the replaced site's number followed by a count
        (a site stays `<function>/%<n>`), skipping any the function already has."""
        fn, _, number = owner.rpartition("/%")
        while True:
            self.counter[owner] = self.counter.get(owner, 0) + 1
            site = f"{fn}/%{number}{self.counter[owner]:02d}"
            if site not in self.used:
                self.used.add(site)
                return site

    def value(self, c: str, owner: Explanation | None = None) -> SSAValue:
        if c in self.memo:
            return self.memo[c]
        x, choice = self.x, self.x.best[c]
        node = choice.node
        if node.head == "Leaf":
            leaf = node.payload[0]
            v = self.leaf_value.get(leaf, x.f.leaves[leaf])
            self.memo[c] = v
            return v
        originals = x.original.get(c, [])
        same = next((op for n, op in originals if n == node), None)
        explanation = None
        if same is not None:
            site, name = same.site.data, _name(same)
        elif originals:
            first = originals[0][1]
            site, name = first.site.data, _name(first)
            explanation = self.explain(c, site)
        else:
            assert owner is not None, "a new value outside any rewrite"
            site, name = self.derived_site(owner.site), None
            owner.new_sites.append(site)
        inner = explanation or owner
        operands = [self.value(k, inner) for k in node.children]
        op = build_op(node, operands, x.class_type(c), x.model.types, site, name)
        self.new_ops.append(op)
        self.time_after += choice.own_time
        self.bits_after += choice.own_bits
        self.memo[c] = op.results[0]
        return op.results[0]

    def explain(self, c: str, site: str) -> Explanation:
        x = self.x
        before = _original_cost(x, c, {})
        after = x.best[c]
        e = Explanation(self.rule_of(c), site, [], before[0] - after.cost,
                        before[1] - after.time, before[2] - after.bits,
                        _formula(c, x, original=True), _formula(c, x, original=False))
        self.rewrites.append(e)
        return e

    def rule_of(self, c: str) -> str:
        """The rules that made the chosen term at `c`: at each chosen node the rewrite
        made (the root and the new classes under it), a rule whose right side matches the
        chosen term and whose left side matches the e-graph (else one whose right side
        matches: a step of a longer chain), joined by ` + `."""
        x = self.x
        chosen = lambda k: [x.best[k].node] if k in x.best else []  # noqa: E731
        every = lambda k: x.graph.nodes.get(k, [])  # noqa: E731
        names: list[str] = []
        todo, seen = [c], set()
        while todo:
            k = todo.pop(0)
            if k in seen:
                continue
            seen.add(k)
            full, partial = [], []
            for rule in RULES.RULES:
                if k != c and rule.rhs.startswith("?"):  # it makes no node below the root
                    continue
                envs = _match(RULES.parse(rule.rhs), k, {}, chosen)
                if any(_match(RULES.parse(rule.lhs), k, env, every) for env in envs):
                    full.append(rule.name)
                elif envs and k == c and not rule.rhs.startswith("?"):  # ?a: anything
                    partial.append(rule.name)
            found = ([r for r in full if not r.endswith("-comm")]
                     or [r for r in partial if not r.endswith("-comm")] or full)
            if found and found[0] not in names:
                names.append(found[0])
            todo += [kid for kid in x.best[k].node.children if not x.original.get(kid)]
        return " + ".join(names) or "a chain of rewrites"


def _name(op: Operation) -> str | None:
    name = op.attributes.get("name")
    return name.data if name is not None else None  # type: ignore[attr-defined]


def _original_cost(x: _Extraction, c: str, memo: dict) -> tuple[float, float, float]:
    """(cost, time, bits) of the original term of class `c` (tree cost)."""
    if c in memo:
        return memo[c]
    originals = x.original.get(c)
    if not originals:  # a leaf, or a class the original reaches only through a leaf
        best = x.best[c]
        memo[c] = (best.cost, best.time, best.bits)
        return memo[c]
    best = x.best[c]
    memo[c] = (best.cost, best.time, best.bits)  # a cycle (x·1 is x) ends at the best
    node = originals[0][0]
    own = x.own(node, c) or (0.0, 0.0)
    t, b = own
    for k in node.children:
        _, kt, kb = _original_cost(x, k, memo)
        t, b = t + kt, b + kb
    memo[c] = (t + x.model.weight * b, t, b)
    return memo[c]


def _formula(c: str, x: _Extraction, original: bool, depth: int = 5) -> str:
    """A short text of the term at class `c`: the original's or the chosen one."""
    if original and x.original.get(c):
        node = x.original[c][0][0]
    elif c in x.best:
        node = x.best[c].node
    else:
        return "…"
    if node.head == "Leaf":
        return _value_name(x, x.f.leaves[node.payload[0]])
    if node.head == "Num":
        return _payload_text(node)
    if depth == 0:
        return "…"
    args = ", ".join(_formula(k, x, original, depth - 1) for k in node.children)
    return f"{_payload_text(node)}({args})"


def _value_name(x: _Extraction, v: SSAValue) -> str:
    if isinstance(v.owner, Block):
        names = x.f.func.arg_name_list
        return names[v.index] if v.index < len(names) else f"%arg{v.index}"
    owner = v.owner
    name = _name(owner) if isinstance(owner, Operation) else None
    return name or (owner.site.data if hasattr(owner, "site") else "%?")


# ---- the driver ----

@dataclass(frozen=True)
class Options:
    node_limit: int = DEFAULT_NODE_LIMIT
    time_limit: float = DEFAULT_TIME_LIMIT
    iterations: int = DEFAULT_ITERATIONS
    budget: float | None = None  # the relative error budget the solver will be given
    dims: Mapping[str, int] = field(default_factory=dict)  # sizes for the cost
    prices: Prices | None = None  # a machine profile's constants; None: ops + bytes/4


def optimize_function(func: C.FuncOp, options: Options = Options(),
                      probe: Probe | None = None,
                      session: Session | None = None) -> FunctionReport:
    """Rewrite `func` in place into its cheapest form; what was done, and why."""
    f = function_terms(func)
    sat = saturate(f, options.node_limit, options.time_limit, options.iterations, session)
    start = time.perf_counter()
    known = probe if probe is not None and any(a in probe.values
                                               for a in func.body.block.args) else None
    model = CostModel(f.types, options.dims, known, options.budget, options.prices)
    x = _Extraction(f, sat.graph, model)
    for i, c in enumerate(sat.graph.let_class):
        pos = f.leaf_pos[_leaf_index(f, i)] if f.let_op[i] is None else \
            list(func.body.block.ops).index(f.let_op[i])
        x.avail[c] = min(x.avail.get(c, 1 << 60), pos)
        op = f.let_op[i]
        if op is not None:
            x.original.setdefault(c, []).append((_original_node(f, i, sat.graph), op))
    _original_first(x)
    x.learn_values()
    time_before, bits_before = _dag_cost(x)
    model.weight = BIT_WEIGHT * time_before
    x.run()
    rebuild = _Rebuild(x)
    _replace_body(func, f, rebuild)
    func.verify()
    return FunctionReport(
        func.sym_name.data, len(f.lets), sat.graph.node_count, len(sat.graph.nodes),
        sat.iterations, sat.stop, sat.seconds, time.perf_counter() - start,
        time_before, rebuild.time_after, bits_before, rebuild.bits_after, rebuild.rewrites)


def _leaf_index(f: FunctionTerms, let: int) -> int:
    return f.leaves.index(f.let_value[let])


def _original_node(f: FunctionTerms, let: int, graph: Graph) -> Node:
    """The node the original op of a let is in the e-graph: its term, over its operands'
    classes."""
    op = f.let_op[let]
    assert op is not None
    kids = tuple(graph.let_class[f.value_let[o]] for o in op.operands)
    c = graph.let_class[let]
    for n in graph.nodes[c]:
        if n.children == kids and _term_head(f.lets[let]) == n.head and \
                _same_payload(f.lets[let], n):
            return n
    raise AssertionError(f"the original of {f.lets[let]} is not in its class")


def _term_head(term: str) -> str:
    return term[1:].split()[0]


def _same_payload(term: str, node: Node) -> bool:
    parsed = RULES.parse(term)
    args = parsed[1:1 + len(node.payload)]
    return all(_match_payload(a, v, {}) for a, v in zip(args, node.payload))


def _original_first(x: _Extraction) -> None:
    """Each class's original nodes first, so that a tie keeps the program as written."""
    for c, originals in x.original.items():
        first = [n for n, _ in originals]
        x.graph.nodes[c] = first + [n for n in x.graph.nodes[c] if n not in first]


def _dag_cost(x: _Extraction) -> tuple[float, float]:
    """(time, bits) of the original function, each op once."""
    t = b = 0.0
    for c, originals in x.original.items():
        for node, _ in originals[:1]:
            own = x.own(node, c)
            if own is not None:
                t, b = t + own[0], b + own[1]
    return t, b


def _replace_body(func: C.FuncOp, f: FunctionTerms, rebuild: _Rebuild) -> None:
    """The body rebuilt: each kept (opaque) op cloned onto the chosen values of its
    operands, each chosen term emitted before its first use, the old ops erased."""
    x = rebuild.x
    block = func.body.block
    old = list(block.ops)
    modelled = {id(op) for op in f.let_op if op is not None}
    live = _live_classes(x, f)
    for i, op in enumerate(old):
        if id(op) in modelled:
            c = x.graph.let_class[f.value_let[op.results[0]]]
            if c in live:  # emitted where it was, if it is still needed
                rebuild.value(c)
            continue
        mapper = {o: rebuild.value(x.graph.let_class[f.value_let[o]]) for o in op.operands}
        clone = op.clone(value_mapper=mapper)
        for r_old, r_new in zip(op.results, clone.results):
            if r_old in f.value_let:
                rebuild.leaf_value[_leaf_index(f, f.value_let[r_old])] = r_new
        rebuild.new_ops.append(clone)
    for op in old:
        block.detach_op(op)
    for op in reversed(old):
        op.erase(safe_erase=False)
    block.add_ops(rebuild.new_ops)


def _live_classes(x: _Extraction, f: FunctionTerms) -> set[str]:
    """The classes the rebuilt body computes: those the kept ops and the return read,
    and what their chosen terms read."""
    todo = [x.graph.let_class[f.value_let[o]] for op in f.func.body.block.ops
            if not any(op is m for m in f.let_op) for o in op.operands]
    live: set[str] = set()
    while todo:
        c = todo.pop()
        if c not in live:
            live.add(c)
            todo += x.best[c].node.children
    return live


@dataclass
class ModuleReport:
    functions: list[FunctionReport]
    priced_by: str | None = None  # the machine profile the time term used, if any

    @property
    def rewrites(self) -> list[tuple[str, Explanation]]:
        return [(f.name, e) for f in self.functions for e in f.rewrites]


def optimize(module: ModuleOp, options: Options = Options(),
             probe: Probe | None = None) -> ModuleReport:
    """Every function of the module optimized in place, the module verified."""
    session = Session()
    reports = [optimize_function(op, options, probe, session) for op in list(module.ops)
               if isinstance(op, C.FuncOp)]
    module.verify()
    return ModuleReport(reports)


@dataclass(frozen=True)
class EGraphOptPass(ModulePass):
    """psk-egraph-opt: equality saturation and extraction of every function (without a
    probe: the cost is time alone, operations and bytes)."""

    name = "psk-egraph-opt"

    node_limit: int = DEFAULT_NODE_LIMIT
    time_limit: float = DEFAULT_TIME_LIMIT
    iterations: int = DEFAULT_ITERATIONS

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        optimize(op, Options(self.node_limit, self.time_limit, self.iterations))
