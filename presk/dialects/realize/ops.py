"""PSK-Realize's other compute ops (reductions, softmax, contraction, sums, spreads,
broadcasts), the data movers (convert, constant, slice, stack), and the fusion group.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (ArrayAttr, DenseArrayBase, FloatAttr, IntegerAttr,
    StringAttr, UnitAttr, f64, i64)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (IRDLOperation, attr_def, lazy_traits_def, operand_def, opt_attr_def,
    region_def, result_def, traits_def, var_operand_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, IsolatedFromAbove, Pure
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import AxisAttr, NamedOp, named_ops, print_op_attrs, site_attrs
from presk.shapes import Axis

from .base import (ComputeOp, OneTensorOp, RealizeOp, TwoTensorOp, _check_map, _i64s, _ints,
    realize_op)
from .types import RTensorType, _ttype, element_name, fits, rtype_text


# ---- reductions and the rest ----


class ReduceOp(OneTensorOp, ABC):
    """A reduction over axis index `axis` (its name `axis_name`), or every axis."""

    axis = opt_attr_def(IntegerAttr)
    axis_name = opt_attr_def(StringAttr)

    def __init__(self, operand: SSAValue | Operation, axis: int | None, result_type: RTensorType,
                 *, axis_name: str | None = None, site: str, name: str | None = None):
        super().__init__(operand, result_type, site=site, name=name,
                         axis=IntegerAttr(axis, i64) if axis is not None else None,
                         axis_name=StringAttr(axis_name) if axis_name else None)

    @property
    def axis_index(self) -> int | None:
        return self.axis.value.data if self.axis is not None else None

    def verify_(self) -> None:
        super().verify_()
        t, result = self.operand.type, self.result.type
        k = self.axis_index
        if k is None:
            expected: tuple[int, ...] = ()
        else:
            if not 0 <= k < t.rank:
                raise VerifyException(f"axis {k} is not an axis of {rtype_text(t)}")
            expected = t.sizes[:k] + t.sizes[k + 1:]
        if result.sizes != expected:
            over = f"axis {k}" if k is not None else "every axis"
            raise VerifyException(f"shape mismatch: reducing {rtype_text(t)} over {over} makes "
                                  f"{list(expected)}, not {rtype_text(result)}")


REDUCTIONS: dict[str, type[ReduceOp]] = named_ops(ReduceOp, realize_op, __name__, [
    NamedOp("SumOp", "psk_realize.sum", """`%r = psk_realize.sum %a {axis = 1 : i64, axis_name = "model", site = "f/%2"} : (!psk_realize.tensor<f32, batch: 4, model: 4>) -> !psk_realize.tensor<f32, batch: 4>`: Σ, k ascending."""),
    NamedOp("MeanOp", "psk_realize.mean", """`%r = psk_realize.mean %a {site = "loss/%7"} : (!psk_realize.tensor<f64, batch: 4, model: 4>) -> !psk_realize.tensor<f64>`: the sum divided by the count."""),
    NamedOp("MaxOp", "psk_realize.max", """`%r = psk_realize.max %a {axis = 0 : i64, site = "f/%3"} : (!psk_realize.tensor<f32, 4, 3>) -> !psk_realize.tensor<f32, 3>`: the largest element (NaN propagating)."""),
    NamedOp("MinOp", "psk_realize.min", """`%r = psk_realize.min %a {site = "f/%4"} : (!psk_realize.tensor<f32, 3>) -> !psk_realize.tensor<f32>`: the smallest element (NaN propagating)."""),
    NamedOp("LogSumExpOp", "psk_realize.logsumexp", """`%r = psk_realize.logsumexp %a {axis = 1 : i64, site = "f/%2"} : (!psk_realize.tensor<f64, 4, 4>) -> !psk_realize.tensor<f64, 4>`: max + log Σ exp(x − max)."""),
])
"""The reductions, which differ in their name only (and in what they compute)."""
SumOp, MeanOp, MaxOp, MinOp, LogSumExpOp = REDUCTIONS.values()


@realize_op
class SoftmaxOp(OneTensorOp):
    """`%r = psk_realize.softmax %a {axis = 1 : i64, axis_name = "model", site = "f/%2"} : T`: softmax along axis index `axis`."""

    name = "psk_realize.softmax"

    axis = attr_def(IntegerAttr)
    axis_name = opt_attr_def(StringAttr)

    def __init__(self, operand: SSAValue | Operation, axis: int, *, axis_name: str | None = None,
                 site: str, name: str | None = None):
        super().__init__(operand, _ttype(operand), site=site, name=name,
                         axis=IntegerAttr(axis, i64),
                         axis_name=StringAttr(axis_name) if axis_name else None)

    @property
    def axis_index(self) -> int:
        return self.axis.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.operand.type.sizes != self.result.type.sizes:
            raise VerifyException("shape mismatch: softmax keeps its operand's shape")
        if not 0 <= self.axis_index < self.operand.type.rank:
            raise VerifyException(f"axis {self.axis_index} is not an axis of "
                                  f"{rtype_text(self.operand.type)}")


@realize_op
class DotOp(TwoTensorOp):
    """`%r = psk_realize.dot %a, %b {site = "Linear.apply/%2"} : (A, B) -> R`: the last axis of `lhs` contracts with the first of `rhs`."""

    name = "psk_realize.dot"

    def verify_(self) -> None:
        super().verify_()
        a, b, r = self.lhs.type.sizes, self.rhs.type.sizes, self.result.type.sizes
        if not a or not b or a[-1] != b[0] or r != a[:-1] + b[1:]:
            raise VerifyException(f"shape mismatch: {rtype_text(self.lhs.type)} · "
                                  f"{rtype_text(self.rhs.type)} does not make "
                                  f"{rtype_text(self.result.type)}")


@realize_op
class ContractOp(TwoTensorOp):
    """`%r = psk_realize.contract %a, %b {lhs_axes = array<i64: 0>, rhs_axes = array<i64: 0>, site = "f/%9"} : (A, B) -> R`: lhs's axes `lhs_axes` with rhs's `rhs_axes` pairwise; the result is lhs's other
    axes then rhs's, permuted by `perm` when given (result axis i is that list's perm[i])."""

    name = "psk_realize.contract"

    lhs_axes = attr_def(DenseArrayBase)
    rhs_axes = attr_def(DenseArrayBase)
    perm = opt_attr_def(DenseArrayBase)

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 lhs_axes: Sequence[int], rhs_axes: Sequence[int], result_type: RTensorType,
                 *, perm: Sequence[int] | None = None, site: str, name: str | None = None):
        super().__init__(lhs, rhs, result_type, site=site, name=name, lhs_axes=_i64s(lhs_axes),
                         rhs_axes=_i64s(rhs_axes), perm=_i64s(perm) if perm is not None else None)

    @property
    def axes(self) -> tuple[list[int], list[int], list[int] | None]:
        return (_ints(self.lhs_axes), _ints(self.rhs_axes),
                _ints(self.perm) if self.perm is not None else None)

    def verify_(self) -> None:
        super().verify_()
        lhs, rhs, perm = self.axes
        a, b = self.lhs.type.sizes, self.rhs.type.sizes
        if len(lhs) != len(rhs) or any(not 0 <= i < len(a) for i in lhs) or \
                any(not 0 <= j < len(b) for j in rhs) or \
                any(a[i] != b[j] for i, j in zip(lhs, rhs)):
            raise VerifyException(f"shape mismatch: axes {lhs} of {rtype_text(self.lhs.type)} "
                                  f"do not pair with {rhs} of {rtype_text(self.rhs.type)}")
        rest = [s for i, s in enumerate(a) if i not in lhs] + \
            [s for j, s in enumerate(b) if j not in rhs]
        if perm is not None:
            if sorted(perm) != list(range(len(rest))):
                raise VerifyException(f"perm {perm} is not a permutation of {len(rest)} axes")
            rest = [rest[p] for p in perm]
        if tuple(rest) != self.result.type.sizes:
            raise VerifyException(f"shape mismatch: the contraction makes {rest}, not "
                                  f"{rtype_text(self.result.type)}")


class _AxisListOp(OneTensorOp, ABC):
    """A one-operand op whose one attribute, named by `AXES`, lists axis indices."""

    AXES: ClassVar[str]

    def __init__(self, operand: SSAValue | Operation, axes: Sequence[int],
                 result_type: RTensorType, *, site: str, name: str | None = None):
        super().__init__(operand, result_type, site=site, name=name, **{self.AXES: _i64s(axes)})

    def _axis_list(self) -> list[int]:
        return _ints(self.attributes[self.AXES])


@realize_op
class SumToOp(_AxisListOp):
    """`%r = psk_realize.sum_to %a {keep = array<i64: 1>, site = "f/%7"} : (A) -> R`: sum away every axis but `keep` (indices, increasing)."""

    name = "psk_realize.sum_to"

    keep = attr_def(DenseArrayBase)
    AXES: ClassVar[str] = "keep"

    @property
    def kept(self) -> list[int]:
        return self._axis_list()

    def verify_(self) -> None:
        super().verify_()
        t = self.operand.type
        keep = self.kept
        if keep != sorted(set(keep)) or any(not 0 <= k < t.rank for k in keep) or \
                tuple(t.sizes[k] for k in keep) != self.result.type.sizes:
            raise VerifyException(f"shape mismatch: keeping axes {keep} of {rtype_text(t)} "
                                  f"does not make {rtype_text(self.result.type)}")


@realize_op
class SpreadOp(ComputeOp):
    """`%r = psk_realize.spread %a, %like {places = array<i64: 0>, site = "f/%8"} : (A, L) -> L`: the operand broadcast to `like`'s shape, its axis k onto like's `places[k]`; with
    `mean`, divided by how many elements each operand element spreads over."""

    name = "psk_realize.spread"

    operand = operand_def(RTensorType)
    like = operand_def(RTensorType)
    result = result_def(RTensorType)
    places = attr_def(DenseArrayBase)
    mean = opt_attr_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, like: SSAValue | Operation,
                 places: Sequence[int], result_type: RTensorType, *, mean: bool = False,
                 site: str, name: str | None = None):
        super().__init__(operands=[operand, like], result_types=[result_type],
                         attributes=site_attrs(site, name, places=_i64s(places),
                                           mean=UnitAttr() if mean else None))

    @property
    def place_list(self) -> list[int]:
        return _ints(self.places)

    def _tensor_operands(self) -> list[SSAValue]:
        return [self.operand]  # `like` gives a shape only

    def verify_(self) -> None:
        super().verify_()
        if self.like.type.sizes != self.result.type.sizes:
            raise VerifyException("shape mismatch: the result's shape is not that of `like`")
        _check_map("operand", self.operand.type, self.place_list, self.result.type)


@realize_op
class BroadcastOp(_AxisListOp):
    """`%r = psk_realize.broadcast %a {map = array<i64: 1>, site = "f/%4"} : (A) -> R`: the operand broadcast to the result, its axis k onto the result's `map[k]`."""

    name = "psk_realize.broadcast"

    map = attr_def(DenseArrayBase)
    AXES: ClassVar[str] = "map"

    @property
    def place_list(self) -> list[int]:
        return self._axis_list()

    def verify_(self) -> None:
        super().verify_()
        _check_map("operand", self.operand.type, self.place_list, self.result.type)


# ---- conversions, constants, slices ----


@realize_op
class ConvertOp(RealizeOp):
    """`%r = psk_realize.convert %a {site = "f/%3"} : (!psk_realize.tensor<bf16, 3>) -> !psk_realize.tensor<f32, 3>`: a change of element type, rounding to nearest even when it narrows. Its site is
    the site of the op that reads it (or of the bf16 value it stores)."""

    name = "psk_realize.convert"

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())
    ELEMENTWISE: ClassVar[bool] = True

    def __init__(self, operand: SSAValue | Operation, element: Attribute | str, *, site: str,
                 name: str | None = None):
        super().__init__(operands=[operand],
                         result_types=[_ttype(operand).with_element(element)],
                         attributes=site_attrs(site, name))

    @property
    def widening(self) -> bool:
        order = {"bf16": 0, "f32": 1, "f64": 2}
        return order[element_name(self.result.type)] > order[element_name(self.operand.type)]

    def verify_(self) -> None:
        super().verify_()
        a, r = self.operand.type, self.result.type
        if a.sizes != r.sizes:
            raise VerifyException(f"shape mismatch: converting {rtype_text(a)} to "
                                  f"{rtype_text(r)}")
        if a.element == r.element:
            raise VerifyException(f"a convert from {element_name(a)} to itself")


@realize_op
class ConstantOp(RealizeOp):
    """`%r = psk_realize.constant {site = "RMSNorm.apply/%5", value = 1.000000e-06 : f64} : !psk_realize.tensor<f64>`: a scalar of any element type: `value` rounded to it."""

    name = "psk_realize.constant"

    value = attr_def(FloatAttr)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, value: float, element: Attribute | str = "f64", *, site: str,
                 name: str | None = None):
        super().__init__(result_types=[RTensorType.scalar(element)],
                         attributes=site_attrs(site, name, value=FloatAttr(value, f64)))

    @property
    def number(self) -> float:
        return self.value.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.result.type.rank:
            raise VerifyException(f"a constant is a scalar, not {rtype_text(self.result.type)}")


@realize_op
class SliceOp(RealizeOp):
    """`%r = psk_realize.slice %s {index = 0 : i64, site = "Tower.apply/%3"} : (S) -> R`: iteration `index`'s view of a stacked value: its leading axis taken at `index`."""

    name = "psk_realize.slice"

    operand = operand_def(RTensorType)
    index = attr_def(IntegerAttr)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, index: int, *, site: str,
                 name: str | None = None):
        t = _ttype(operand)
        super().__init__(operands=[operand],
                         result_types=[RTensorType(t.element, ArrayAttr(t.axes.data[1:]))],
                         attributes=site_attrs(site, name, index=IntegerAttr(index, i64)))

    @property
    def position(self) -> int:
        return self.index.value.data

    def verify_(self) -> None:
        super().verify_()
        a, r = self.operand.type, self.result.type
        if not a.rank or a.sizes[1:] != r.sizes or a.element != r.element:
            raise VerifyException(f"shape mismatch: a slice of {rtype_text(a)} is not "
                                  f"{rtype_text(r)}")
        if not 0 <= self.position < a.sizes[0]:
            raise VerifyException(f"index {self.position} is outside {rtype_text(a)}")


@realize_op
class StackOp(RealizeOp):
    """`%r = psk_realize.stack %g0, %g1, %g2 {site = "Tower.apply.bwd/%18"} : (T, T, T) -> S`: the operands (one type) stacked along a new leading axis: element l is operand l.
    What a fold's reverse sweep makes of its iterations' parameter cotangents."""

    name = "psk_realize.stack"

    items = var_operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, items: Sequence[SSAValue | Operation], *, site: str,
                 name: str | None = None):
        t = _ttype(items[0])
        result = RTensorType(t.element, ArrayAttr([AxisAttr.from_axis(Axis(None, len(items))),
                                                   *t.axes.data]))
        super().__init__(operands=[list(items)], result_types=[result],
                         attributes=site_attrs(site, name))

    def verify_(self) -> None:
        super().verify_()
        if not self.items:
            raise VerifyException("a stack needs one item or more")
        first = self.items[0].type
        for v in self.items:
            if not fits(v.type, first):
                raise VerifyException(f"a stack of {rtype_text(first)} is given "
                                      f"{rtype_text(v.type)}")
        r = self.result.type
        if r.element != first.element or r.sizes != (len(self.items), *first.sizes):
            raise VerifyException(f"stacking {len(self.items)} × {rtype_text(first)} does not "
                                  f"make {rtype_text(r)}")


@realize_op
class YieldOp(IRDLOperation):
    """The value a group computes: `psk_realize.yield %v : T`."""

    name = "psk_realize.yield"

    value = operand_def(RTensorType)

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GroupOp, ReduceGroupOp)))

    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue | Operation):
        super().__init__(operands=[value])


class FusedOp(RealizeOp, ABC):
    """What both kinds of fusion group share: inputs (the block's arguments), a body of
    steps ending in `yield`, the site of the root (the step it yields), one launch."""

    inputs = var_operand_def(RTensorType)
    result = result_def(RTensorType)
    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove(), Pure())
    COMPUTE: ClassVar[bool] = True

    @classmethod
    def make(cls, inputs: Sequence[SSAValue], result_type: RTensorType, *, site: str,
             name: str | None = None) -> tuple[FusedOp, Block]:
        """An empty group and its block (arguments typed like the inputs): fill the block,
        ending with a YieldOp."""
        block = Block(arg_types=[SSAValue.get(v).type for v in inputs])
        op = cls.create(operands=list(inputs), result_types=[result_type],
                        attributes=site_attrs(site, name), regions=[Region(block)])
        return op, block

    @property
    def steps(self) -> list[Operation]:
        """The ops of the body, the yield aside."""
        return [o for o in self.body.block.ops if not isinstance(o, YieldOp)]

    @property
    def root(self) -> Operation:
        """The op whose value the group yields."""
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        owner = last.value.owner
        assert isinstance(owner, Operation)
        return owner

    @staticmethod
    def _what(op: Operation) -> str:
        return f"{op.attributes['site'].data} {op.name}" if "site" in op.attributes \
            else op.name  # type: ignore[attr-defined]

    def verify_(self) -> None:
        super().verify_()
        block = self.body.block
        if [a.type for a in block.args] != [v.type for v in self.inputs]:
            raise VerifyException("the group's block arguments are not typed like its inputs")
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("a group ends with psk_realize.yield")
        if last.value.type != self.result.type:
            raise VerifyException(f"the group yields {rtype_text(last.value.type)}, not "
                                  f"{rtype_text(self.result.type)}")
        owner = last.value.owner
        if isinstance(owner, Operation) and "site" in owner.attributes and \
                owner.attributes["site"] != self.site:
            raise VerifyException(f"the group's site is not the site of its root, "
                                  f"{owner.attributes['site'].data}")  # type: ignore[attr-defined]
        self._verify_steps()

    @abstractmethod
    def _verify_steps(self) -> None:
        """What each kind admits as a step (element-wise ops over one shape; a reduction
        with its producers and consumers)."""

    def print(self, printer: Printer) -> None:
        if self.inputs:
            printer.print_string(" ")
            printer.print_list(self.inputs, printer.print_operand)
        print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        with printer.in_parens():
            printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser):
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        inputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        result = parser.parse_type()
        values = parser.resolve_operands(operands, inputs, pos)
        region = parser.parse_region()
        return cls.create(operands=values, result_types=[result], attributes=attrs,
                          regions=[region])


@realize_op
class GroupOp(FusedOp):
    """`%r = psk_realize.group %a, %b {site = "f/%7"} : (A, B) -> R { ^0(%x: A, %y: B): … psk_realize.yield %s : R }`: element-wise ops over one shape, fused: one loop nest."""

    name = "psk_realize.group"

    ELEMENTWISE: ClassVar[bool] = True

    def _verify_steps(self) -> None:
        shape = self.result.type.sizes
        for op in self.steps:
            what = self._what(op)
            if not (isinstance(op, RealizeOp) and op.ELEMENTWISE) or isinstance(op, FusedOp):
                raise VerifyException(f"{what} is not element-wise: a group holds element-wise "
                                      "operations only")
            for r in op.results:
                if _ttype(r).sizes != shape:
                    raise VerifyException(f"{what} makes {rtype_text(r.type)}, the group's "
                                          f"shape is {list(shape)}: a group is one loop nest "
                                          "over one shape")


@realize_op
class ReduceGroupOp(FusedOp):
    """`%r = psk_realize.reduce_group %x, %e, %g {site = "f/%10"} : (A, E, G) -> R { … }`:
    reductions fused with the element-wise work around them, one loop nest over the rows
    of one shape F: its reductions (sum, mean, max, min, logsumexp) all reduce F over the
    same axis (or every axis) to the kept shape K; every other step is element-wise and
    makes F (read by a reduction, or computed from the reduced values row by row: a
    normalization) or K (on the reduced values). A step of F reads a value of K that the
    group computes on the kept axes, in their order. In block order, a row's reductions
    and its K steps run once per row, each F step where it is read (recomputed, the same
    operations in the same types: the bits of the unfused ops)."""

    name = "psk_realize.reduce_group"

    @property
    def reductions(self) -> list[ReduceOp]:
        return [op for op in self.steps if isinstance(op, ReduceOp)]

    @property
    def full(self) -> RTensorType:
        """F: the shape the reductions reduce."""
        return self.reductions[0].operand.type

    @property
    def reduced_axis(self) -> int | None:
        return self.reductions[0].axis_index

    @property
    def kept(self) -> list[int]:
        """F's axes the reductions keep: K's axes, in order."""
        k = self.reduced_axis
        return [i for i in range(self.full.rank) if k is not None and i != k]

    def _verify_steps(self) -> None:
        reductions = self.reductions
        if not reductions:
            raise VerifyException("a reduce_group holds a reduction")
        full, axis = self.full.sizes, self.reduced_axis
        kept = reductions[0].result.type.sizes
        inside = {r for op in self.steps for r in op.results}
        for op in self.steps:
            what = self._what(op)
            if isinstance(op, ReduceOp):
                if op.operand.type.sizes != full or op.axis_index != axis:
                    raise VerifyException(f"{what} reduces {rtype_text(op.operand.type)}: "
                                          "a reduce_group's reductions reduce one shape over "
                                          "one axis")
                continue
            if not (isinstance(op, ComputeOp) and op.ELEMENTWISE):
                raise VerifyException(f"{what} is neither a reduction nor element-wise "
                                      "arithmetic")
            sizes = _ttype(op.results[0]).sizes
            if sizes not in (full, kept):
                raise VerifyException(f"{what} makes {rtype_text(op.results[0].type)}: the "
                                      f"steps of a reduce_group make {list(full)} or "
                                      f"{list(kept)}")
            if sizes == full and sizes != kept:
                for v, places in _operand_places(op):
                    if v in inside and _ttype(v).sizes == kept and places != self.kept:
                        raise VerifyException(f"{what} reads a reduced value at {places}, "
                                              f"not on the kept axes {self.kept}")


def _operand_places(op: Operation) -> list[tuple[SSAValue, list[int]]]:
    """An element-wise op's operands, each with the result axes its axes land on."""
    from .elementwise import BinaryOp
    if isinstance(op, BinaryOp):
        lhs, rhs = op.maps
        return [(op.lhs, lhs), (op.rhs, rhs)]
    return [(v, list(range(_ttype(v).rank))) for v in op.operands]
