"""A tiny expression form over element-wise functions: composites and derivative rules.

A composite (sigmoid = 1 / (1 + exp(−x))) and a derivative rule (tanh: dr · (1 − y²)) are
written ONCE as an `Expr` over the variables `X` (the operand; `A`, `B` a binary function's
two), `Y` (the result), `DR` (the cotangent) and the table's functions, and every engine walks it with `walk`: the kernel
conversion builds scalar ops from it, the f64 interpreter numpy calls, differentiation Core
ops. Python's operators build the tree (`1 / (1 + call("exp", -X))`), so a rule reads as
its formula, in the order of operations it is computed in: `a * b / c` is (a·b)/c.

A constant is an f64 (`Const`); `signed(c)` is a constant of a derivative rule that takes
the cotangent's pending sign (presk/transforms/differentiate.py) instead of flipping it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Iterator, TypeVar

V = TypeVar("V")


def _operator(fn: str) -> tuple[Callable[[Expr, object], Expr], Callable[[Expr, object], Expr]]:
    """The two methods of a binary operator: `e ∘ o` and `o ∘ e`, o lifted to an Expr."""

    def left(self: Expr, o: object) -> Expr:
        return Apply(fn, (self, lift(o)))

    def right(self: Expr, o: object) -> Expr:
        return Apply(fn, (lift(o), self))

    return left, right


class Expr:
    """A node; `+ − × ÷`, unary minus and `** n` (n a natural) build `Apply`/`Powi`."""

    __add__, __radd__ = _operator("add")
    __sub__, __rsub__ = _operator("sub")
    __mul__, __rmul__ = _operator("mul")
    __truediv__, __rtruediv__ = _operator("div")

    def __neg__(self) -> Expr:
        return Apply("neg", (self,))

    def __pow__(self, n: int) -> Expr:
        return Powi(self, n)


@dataclass(frozen=True, eq=False)
class Var(Expr):
    name: str  # "x", "y" or "dr"


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: float
    signed: bool = False


@dataclass(frozen=True, eq=False)
class Apply(Expr):
    fn: str  # a row of the table
    args: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Powi(Expr):
    """x^n (psk_core.powi; every engine squares and multiplies: presk/powers.py)."""
    base: Expr
    n: int


@dataclass(frozen=True, eq=False)
class Heaviside(Expr):
    """1 where positive, 0 where negative, `at_zero` at 0 (psk_core.heaviside)."""
    arg: Expr
    at_zero: float


X, Y, DR = Var("x"), Var("y"), Var("dr")
A, B = Var("a"), Var("b")  # the operands of a binary function


def lift(v: object) -> Expr:
    if isinstance(v, Expr):
        return v
    if isinstance(v, (int, float)):
        return Const(float(v))
    raise TypeError(f"not an expression: {v!r}")


def call(fn: str, *args: object) -> Expr:
    """The table's function `fn` applied to `args`."""
    return Apply(fn, tuple(lift(a) for a in args))


def signed(c: float) -> Const:
    """A constant factor of a derivative rule that absorbs the cotangent's sign."""
    return Const(float(c), signed=True)


def nodes(e: Expr) -> Iterator[Expr]:
    """Every node of `e`, `e` first, then its operands' nodes left to right."""
    yield e
    if isinstance(e, Apply):
        for a in e.args:
            yield from nodes(a)
    elif isinstance(e, Powi):
        yield from nodes(e.base)
    elif isinstance(e, Heaviside):
        yield from nodes(e.arg)


def functions_of(e: Expr) -> set[str]:
    """The table's functions `e` applies."""
    return {n.fn for n in nodes(e) if isinstance(n, Apply)}


def variables_of(e: Expr) -> set[str]:
    """The variables `e` reads: "x", "y", "dr", "a", "b"."""
    return {n.name for n in nodes(e) if isinstance(n, Var)}


def has_signed(e: Expr) -> bool:
    """Whether `e` has a `signed` constant."""
    return any(isinstance(n, Const) and n.signed for n in nodes(e))


@dataclass
class Walker(Generic[V]):
    """How one engine computes each kind of node. `walk` visits the tree in post-order,
    operands left to right (with `constants_last`, an operation's computed operands before
    its constants), and each variable once: an engine that emits ops emits them in that
    order."""

    const: Callable[[Const], V]
    apply: Callable[[str, list[V]], V]
    var: Callable[[str], V] | None = None
    powi: Callable[[V, int], V] | None = None
    heaviside: Callable[[V, float], V] | None = None
    constants_last: bool = False

    def walk(self, e: Expr, env: dict[str, V] | None = None) -> V:
        """The value of `e`, its variables those of `env` (the others from `var`, called
        at their first use)."""
        seen: dict[str, V] = dict(env or {})
        return self._walk(e, seen)

    def _walk(self, e: Expr, seen: dict[str, V]) -> V:
        if isinstance(e, Var):
            if e.name not in seen:
                assert self.var is not None, f"`{e.name}` has no value"
                seen[e.name] = self.var(e.name)
            return seen[e.name]
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Powi):
            assert self.powi is not None, "this engine has no powi"
            return self.powi(self._walk(e.base, seen), e.n)
        if isinstance(e, Heaviside):
            assert self.heaviside is not None, "this engine has no heaviside"
            return self.heaviside(self._walk(e.arg, seen), e.at_zero)
        assert isinstance(e, Apply)
        order = list(range(len(e.args)))
        if self.constants_last:
            order.sort(key=lambda i: isinstance(e.args[i], Const))
        values: dict[int, V] = {i: self._walk(e.args[i], seen) for i in order}
        return self.apply(e.fn, [values[i] for i in range(len(e.args))])
