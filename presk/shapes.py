"""The shape algebra of ℝ tensors with named axes, shared by the frontend and PSK-Core.

A tensor type is a list of axes, each an optional name and a size (a literal or a dim
symbol), optionally preceded by `...`, a polymorphic prefix that stands for whatever
leading axes the caller has. Within one function there is a single `...`, so two
prefixes that meet are the same prefix.

This module is pure Python: `presk check` uses it without paying for xDSL.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

Size = Union[int, str]
"""An axis size: a natural literal or the name of a dim symbol."""


class ShapeError(Exception):
    """Two shapes that do not fit together; the message names both."""


@dataclass(frozen=True)
class Axis:
    name: str | None
    size: Size

    def __str__(self) -> str:
        return f"{self.name}: {self.size}" if self.name is not None else str(self.size)


@dataclass(frozen=True)
class TensorType:
    """ℝ[axes], optionally with a leading `...`."""

    axes: tuple[Axis, ...] = ()
    prefix: bool = False

    def __str__(self) -> str:
        parts = (["..."] if self.prefix else []) + [str(a) for a in self.axes]
        return "ℝ[" + ", ".join(parts) + "]"

    @property
    def is_scalar(self) -> bool:
        return not self.prefix and not self.axes

    def names(self) -> list[str]:
        return [a.name for a in self.axes if a.name is not None]

    def index_of(self, name: str) -> int | None:
        for i, a in enumerate(self.axes):
            if a.name == name:
                return i
        return None

    def substitute(self, env: Mapping[str, Size]) -> "TensorType":
        """Replace dim symbols by what `env` binds them to."""
        return TensorType(
            tuple(Axis(a.name, env.get(a.size, a.size) if isinstance(a.size, str) else a.size)
                  for a in self.axes),
            self.prefix,
        )

    def with_prefix(self, binding: "TensorType") -> "TensorType":
        """Replace `...` by the axes (and prefix) it binds to at a call."""
        if not self.prefix:
            return self
        return TensorType(binding.axes + self.axes, binding.prefix)

    def element_count(self) -> int | None:
        """The number of reals, when every size is a literal and there is no prefix."""
        if self.prefix or any(isinstance(a.size, str) for a in self.axes):
            return None
        n = 1
        for a in self.axes:
            n *= int(a.size)
        return n


SCALAR = TensorType()


def _merge_axis(x: Axis, y: Axis, a: TensorType, b: TensorType) -> Axis:
    if x.name is not None and y.name is not None and x.name != y.name:
        raise ShapeError(f"axis `{x.name}` meets axis `{y.name}` in {a} and {b}")
    if x.size != y.size:
        raise ShapeError(f"axis sizes {x.size} and {y.size} differ in {a} and {b}")
    return Axis(x.name if x.name is not None else y.name, x.size)


def _align_by_name(short: TensorType, long: TensorType) -> dict[int, int] | None:
    """Place every axis of `short` on the axis of `long` with its name, if all are named."""
    if not short.axes or any(a.name is None for a in short.axes):
        return None
    places = [long.index_of(a.name) for a in short.axes]  # type: ignore[arg-type]
    if any(p is None for p in places):
        return None
    if places != sorted(places):
        raise ShapeError(f"the named axes of {short} stand in another order in {long}")
    return dict(enumerate(places))  # type: ignore[arg-type]


def broadcast(a: TensorType, b: TensorType) -> TensorType:
    """The type of an element-wise operation on `a` and `b`.

    Named axes align by name: an operand that lacks a name broadcasts along it. Otherwise
    axes align by position from the right, and an unnamed axis takes the name of the named
    axis of the same size it meets. A missing leading axis broadcasts.
    """
    return alignment(a, b)[0]


def alignment(a: TensorType, b: TensorType) -> tuple[TensorType, list[int], list[int]]:
    """`broadcast`'s result, and where each operand's explicit axes land in it.

    The lists give, for each explicit axis of `a` (and of `b`), the index of the result's
    explicit axis it aligns with. A prefix, when an operand has one, is the result's prefix:
    an interpreter at concrete shapes puts the prefix's axes first and offsets these
    indices by its length, so alignment never depends on what `...` binds to.
    """
    if a.is_scalar or b.is_scalar:
        other = b if a.is_scalar else a
        same = list(range(len(other.axes)))
        return other, (same if other is a else []), (same if other is b else [])
    # The operand with more axes (a prefix counts as more) gives the result its layout.
    swap = (len(a.axes), a.prefix) > (len(b.axes), b.prefix)
    short, long = (b, a) if swap else (a, b)
    if short.prefix and not long.prefix:
        raise ShapeError(f"cannot align the polymorphic prefix of {short} with {long}")
    placement = _align_by_name(short, long)
    if placement is None:
        offset = len(long.axes) - len(short.axes)
        placement = {i: i + offset for i in range(len(short.axes))}
    axes = list(long.axes)
    for i, j in placement.items():
        axes[j] = _merge_axis(short.axes[i], long.axes[j], a, b)
    result = TensorType(tuple(axes), long.prefix)
    short_places = [placement[i] for i in range(len(short.axes))]
    long_places = list(range(len(long.axes)))
    return (result, long_places, short_places) if swap else (result, short_places, long_places)


def reduce(a: TensorType, axis: str | None) -> TensorType:
    """The type of a reduction over the axis named `axis`, or over everything."""
    if axis is None:
        return SCALAR
    i = a.index_of(axis)
    if i is None:
        raise ShapeError(f"{a} has no axis `{axis}`")
    return TensorType(a.axes[:i] + a.axes[i + 1:], a.prefix)


def contract(a: TensorType, b: TensorType) -> TensorType:
    """`a · b`: the last axis of `a` contracts with the first axis of `b`."""
    if not a.axes or not b.axes:
        raise ShapeError(f"a contraction needs an axis on each side, not {a} and {b}")
    if b.prefix:
        raise ShapeError(f"the right operand of a contraction cannot have a prefix: {b}")
    _merge_axis(a.axes[-1], b.axes[0], a, b)
    return TensorType(a.axes[:-1] + b.axes[1:], a.prefix)


def bind(param: TensorType, arg: TensorType, symbols: frozenset[str],
         env: dict[str, Size]) -> TensorType | None:
    """Match an argument against a parameter's declared type.

    Binds the callee's dim `symbols` into `env` and returns what the parameter's `...`
    stands for (None when it has none). An unnamed axis fits a named one of the same size.
    """
    if param.prefix:
        if len(arg.axes) < len(param.axes) and not arg.prefix:
            raise ShapeError(f"{arg} has fewer axes than {param}")
        if len(arg.axes) < len(param.axes):
            raise ShapeError(f"cannot match the polymorphic prefix of {arg} with {param}")
        split = len(arg.axes) - len(param.axes)
        binding = TensorType(arg.axes[:split], arg.prefix)
        tail = arg.axes[split:]
    else:
        if arg.prefix or len(arg.axes) != len(param.axes):
            raise ShapeError(f"{arg} does not fit {param}")
        binding, tail = None, arg.axes
    for p, x in zip(param.axes, tail):
        if p.name is not None and x.name is not None and p.name != x.name:
            raise ShapeError(f"axis `{x.name}` of {arg} meets axis `{p.name}` of {param}")
        size = p.size
        if isinstance(size, str) and size in symbols:
            size = env.setdefault(size, x.size)
        if size != x.size:
            raise ShapeError(f"axis size {x.size} of {arg} does not fit {size} of {param}")
    return binding


def conforms(actual: TensorType, declared: TensorType) -> bool:
    """A value of type `actual` may stand where `declared` is promised.

    The declaration may name an axis the value leaves unnamed, not rename one.
    """
    if actual.prefix != declared.prefix or len(actual.axes) != len(declared.axes):
        return False
    for x, d in zip(actual.axes, declared.axes):
        if x.size != d.size:
            return False
        if x.name is not None and d.name is not None and x.name != d.name:
            return False
    return True


# ---- what reverse-mode differentiation needs ---------------------------------------------

def sum_to(a: TensorType, keep: list[int], keep_prefix: bool) -> TensorType:
    """The type left after summing away every explicit axis of `a` but `keep` (in order),
    and the prefix unless `keep_prefix`."""
    if keep != sorted(set(keep)) or any(not 0 <= k < len(a.axes) for k in keep):
        raise ShapeError(f"cannot keep axes {keep} of {a}")
    if keep_prefix and not a.prefix:
        raise ShapeError(f"{a} has no prefix to keep")
    return TensorType(tuple(a.axes[k] for k in keep), keep_prefix)


def check_spread(a: TensorType, target: TensorType, places: list[int]) -> None:
    """`a` spread into `target`: its explicit axis k lands on target's axis places[k]."""
    if len(places) != len(a.axes) or places != sorted(set(places)) or \
            any(not 0 <= p < len(target.axes) for p in places):
        raise ShapeError(f"cannot place the axes of {a} at {places} in {target}")
    if a.prefix and not target.prefix:
        raise ShapeError(f"the prefix of {a} has nowhere to go in {target}")
    for k, p in enumerate(places):
        if a.axes[k].size != target.axes[p].size:
            raise ShapeError(f"axis {a.axes[k]} of {a} does not fit {target.axes[p]} of {target}")


def contract_axes(a: TensorType, b: TensorType, lhs: list[int], rhs: list[int],
                  prefix: bool) -> TensorType:
    """A general contraction: a's explicit axes `lhs` with b's `rhs` pairwise, and both
    prefixes with each other when `prefix`. The result: the prefix an operand keeps, then
    a's other axes, then b's."""
    if len(lhs) != len(rhs) or len(set(lhs)) != len(lhs) or len(set(rhs)) != len(rhs):
        raise ShapeError(f"contracted axes {lhs} and {rhs} do not pair up")
    if any(not 0 <= i < len(a.axes) for i in lhs) or any(not 0 <= j < len(b.axes) for j in rhs):
        raise ShapeError(f"contracted axes {lhs}, {rhs} are not axes of {a} and {b}")
    for i, j in zip(lhs, rhs):
        if a.axes[i].size != b.axes[j].size:
            raise ShapeError(f"axis sizes {a.axes[i].size} and {b.axes[j].size} differ in {a} "
                             f"and {b}")
    if prefix and not (a.prefix and b.prefix):
        raise ShapeError(f"only two prefixes contract with each other, not {a} and {b}")
    if not prefix and a.prefix and b.prefix:
        raise ShapeError(f"two prefixes would stay in the result of {a} and {b}")
    rest_a = tuple(x for i, x in enumerate(a.axes) if i not in lhs)
    rest_b = tuple(x for j, x in enumerate(b.axes) if j not in rhs)
    return TensorType(rest_a + rest_b, (a.prefix or b.prefix) and not prefix)
