"""The types of elaborated Presk values: ℝ tensors (presk.shapes), tuples, parameter trees,
and the two hyperparameter scalars f64 and nat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from ..shapes import Axis, Size, TensorType

if TYPE_CHECKING:
    from .program import ModuleInfo


@dataclass(frozen=True)
class ScalarT:
    """A hyperparameter: `f64` (a float outside the differentiable world) or `nat`."""

    name: str

    def __str__(self) -> str:
        return self.name


F64 = ScalarT("f64")
NAT = ScalarT("nat")


@dataclass(frozen=True)
class TupleT:
    items: tuple["Type", ...]

    def __str__(self) -> str:
        return "(" + ", ".join(str(t) for t in self.items) + ")"


@dataclass(frozen=True)
class ParamsT:
    """The parameter tree of a module instance, stacked once per entry of `stack`."""

    module: "ModuleInfo"
    dims: tuple[Size, ...] = ()
    stack: tuple[Size, ...] = ()

    def __str__(self) -> str:
        return "params " + self.instance_name()

    def instance_name(self) -> str:
        text = self.module.name
        if self.dims:
            text += "{" + ", ".join(str(d) for d in self.dims) + "}"
        for count in reversed(self.stack):
            text = f"stack{{{count}}}({text})"
        return text

    def env(self) -> dict[str, Size]:
        return dict(zip(self.module.dims, self.dims))

    def unstacked(self) -> "ParamsT":
        return ParamsT(self.module, self.dims, self.stack[1:])

    def subtree(self, target: "ParamsT") -> "ParamsT":
        """A use's target (written in this module's dims) as a subtree of this tree: at this
        tree's dims, stacked as this tree is, then as the use is."""
        inner = substitute(target, self.env())
        assert isinstance(inner, ParamsT)
        return ParamsT(inner.module, inner.dims, self.stack + inner.stack)


Type = Union[TensorType, TupleT, ParamsT, ScalarT]


def substitute(t: Type, env: dict[str, Size]) -> Type:
    """Replace dim symbols in any type."""
    if isinstance(t, TensorType):
        return t.substitute(env)
    if isinstance(t, TupleT):
        return TupleT(tuple(substitute(i, env) for i in t.items))
    if isinstance(t, ParamsT):
        sub = lambda s: env.get(s, s) if isinstance(s, str) else s  # noqa: E731
        return ParamsT(t.module, tuple(sub(d) for d in t.dims), tuple(sub(s) for s in t.stack))
    return t


def stacked(t: TensorType, counts: tuple[Size, ...]) -> TensorType:
    """A tensor field of a stacked tree: one leading unnamed axis per stack."""
    return TensorType(tuple(Axis(None, c) for c in counts) + t.axes, t.prefix)
