"""PSK-Core's structural ops: reductions, softmax, contraction, broadcast, scalars,
constants, tuples, and the ops reverse-mode differentiation makes.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence

from xdsl.dialects.builtin import (ArrayAttr, Float64Type, FloatAttr, IntegerAttr,
    IntegerType, StringAttr, TupleType, UnitAttr, f64, i64)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (attr_def, operand_def, opt_attr_def, result_def, traits_def,
    var_operand_def)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import NamedOp, named_ops, site_attrs
from presk import shapes

from .base import CoreOp, OneTensorOp, TwoTensorOp, _infer, _int_list, _ints, _value_type, core_op
from .elementwise import BinaryOp, UnaryOp
from .modules import field_type, lookup_module
from .types import ParamsAttr, TensorAttr, type_conforms, type_text


# --------------------------------------------------------------------------------------
# Reductions, softmax, contraction, broadcast
# --------------------------------------------------------------------------------------


class ReduceOp(OneTensorOp, ABC):
    """A reduction over the axis named `axis`, or over every axis when it is absent."""

    axis = opt_attr_def(StringAttr)

    def __init__(
        self, operand: SSAValue | Operation, axis: str | None = None, *, site: str,
        name: str | None = None,
    ):
        result = _infer(site, lambda: self.infer(_value_type(operand), axis))
        super().__init__(operand, result, site=site, name=name,
                         axis=StringAttr(axis) if axis is not None else None)

    @property
    def axis_name(self) -> str | None:
        return self.axis.data if self.axis is not None else None

    @staticmethod
    def infer(operand: Attribute, axis: str | None) -> TensorAttr:
        assert isinstance(operand, TensorAttr)
        return TensorAttr.from_shape(shapes.reduce(operand.shape, axis))

    def verify_(self) -> None:
        super().verify_()
        inferred = self.infer(self.operand.type, self.axis_name)
        if not type_conforms(inferred, self.result.type):
            over = f"axis `{self.axis_name}`" if self.axis_name else "every axis"
            raise VerifyException(
                f"reducing {type_text(self.operand.type)} over {over} makes "
                f"{type_text(inferred)}, not {type_text(self.result.type)}"
            )


REDUCTIONS: dict[str, type[ReduceOp]] = named_ops(ReduceOp, core_op, __name__, [
    NamedOp("SumOp", "psk_core.sum", """`%r = psk_core.sum %x {axis = "model", site = "f/%2"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<batch: B>`: Σ over the axis (every axis without one)."""),
    NamedOp("MeanOp", "psk_core.mean", """`%r = psk_core.mean %x {site = "loss/%7"} : (!psk_core.tensor<batch: B>) -> !psk_core.tensor<>`: the sum over the axis divided by its size."""),
    NamedOp("MaxOp", "psk_core.max", """`%r = psk_core.max %x {axis = "batch", site = "f/%3"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<model: D>`: the largest element (NaN propagating)."""),
    NamedOp("MinOp", "psk_core.min", """`%r = psk_core.min %x {site = "f/%4"} : (!psk_core.tensor<model: D>) -> !psk_core.tensor<>`: the smallest element (NaN propagating)."""),
    NamedOp("LogSumExpOp", "psk_core.logsumexp", """`%r = psk_core.logsumexp %x {axis = "model", site = "f/%2"} : (!psk_core.tensor<batch: B, model: D>) -> !psk_core.tensor<batch: B>`: log Σ exp, shifted by the max."""),
])
"""The reductions, which differ in their name only (and in what they compute)."""
SumOp, MeanOp, MaxOp, MinOp, LogSumExpOp = REDUCTIONS.values()


@core_op
class SoftmaxOp(UnaryOp):
    """`%r = psk_core.softmax %x {axis = "model", site = "f/%7"} : !psk_core.tensor<batch: B, model: 4>`: softmax along the axis named `axis`; the result has the operand's type."""

    name = "psk_core.softmax"

    axis = attr_def(StringAttr)

    def __init__(
        self, operand: SSAValue | Operation, axis: str, *, site: str, name: str | None = None
    ):
        super().__init__(operand, site=site, name=name, axis=StringAttr(axis))

    def verify_(self) -> None:
        super().verify_()
        shapes.reduce(self.operand.type.shape, self.axis.data)


@core_op
class DotOp(BinaryOp):
    """`%r = psk_core.dot %a, %b {site = "Linear.apply/%3"} : (!psk_core.tensor<..., In>, !psk_core.tensor<In, Out>) -> !psk_core.tensor<..., Out>`: `lhs · rhs`, the last axis of `lhs` contracted with the first of `rhs`."""

    name = "psk_core.dot"

    @classmethod
    def infer(cls, lhs: Attribute, rhs: Attribute) -> TensorAttr:
        assert isinstance(lhs, TensorAttr) and isinstance(rhs, TensorAttr)
        return TensorAttr.from_shape(shapes.contract(lhs.shape, rhs.shape))


@core_op
class BroadcastOp(OneTensorOp):
    """`%r = psk_core.broadcast %x {site = "f/%4"} : (!psk_core.tensor<model: D>) -> !psk_core.tensor<batch: B, model: D>`: the value broadcast or aligned to the result type, which it must broadcast to."""

    name = "psk_core.broadcast"

    def verify_(self) -> None:
        super().verify_()
        source, target = self.operand.type.shape, self.result.type.shape
        if not shapes.conforms(shapes.broadcast(source, target), target):
            raise VerifyException(f"{source} does not broadcast to {target}")


# --------------------------------------------------------------------------------------
# Scalars, constants, tuples
# --------------------------------------------------------------------------------------


@core_op
class RealOp(CoreOp):
    """`%r = psk_core.real %eps {site = "RMSNorm.apply/%5"} : (f64) -> !psk_core.tensor<>`: `real(eps)`, a hyperparameter (an f64, or a nat) as ℝ[]."""

    name = "psk_core.real"

    operand = operand_def(Float64Type | IntegerType)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None):
        super().__init__(
            operands=[operand], result_types=[TensorAttr.scalar()],
            attributes=site_attrs(site, name),
        )

    def verify_(self) -> None:
        super().verify_()
        if not self.result.type.shape.is_scalar:
            raise VerifyException(f"the result {type_text(self.result.type)} is not ℝ[]")


@core_op
class ConstantOp(CoreOp):
    """`%c = psk_core.constant {site = "Block.apply/%3", value = 1.000000e-06 : f64} : f64`: a literal, an f64 (a hyperparameter's value), a nat (as i64, its value integral) or ℝ[]."""

    name = "psk_core.constant"

    value = attr_def(FloatAttr)
    result = result_def(Float64Type | IntegerType | TensorAttr)

    traits = traits_def(Pure())

    def __init__(
        self, value: float, *, site: str, name: str | None = None,
        result_type: Float64Type | IntegerType | TensorAttr = f64,
    ):
        super().__init__(
            result_types=[result_type],
            attributes=site_attrs(site, name, value=FloatAttr(value, f64)),
        )

    @property
    def number(self) -> float:
        return self.value.value.data

    def verify_(self) -> None:
        super().verify_()
        if not isinstance(self.value.type, Float64Type):
            raise VerifyException(f"the value must be an f64, not {self.value.type}")
        result = self.result.type
        if isinstance(result, TensorAttr) and not result.shape.is_scalar:
            raise VerifyException(f"a constant is f64, nat or ℝ[], not {type_text(result)}")
        if isinstance(result, IntegerType) and not (self.number >= 0 and
                                                    float(self.number).is_integer()):
            raise VerifyException(f"a nat constant is a natural, not {self.number}")


@core_op
class TupleOp(CoreOp):
    """`%t = psk_core.tuple %a, %b {site = "f/%6"} : (A, B) -> tuple<A, B>`: the values packed into a tuple."""

    name = "psk_core.tuple"

    elements = var_operand_def()
    result = result_def(TupleType)

    traits = traits_def(Pure())

    def __init__(
        self, elements: Sequence[SSAValue | Operation], *, site: str, name: str | None = None
    ):
        super().__init__(
            operands=[list(elements)],
            result_types=[TupleType([_value_type(e) for e in elements])],
            attributes=site_attrs(site, name),
        )

    def verify_(self) -> None:
        super().verify_()
        if list(self.result.type.types) != [e.type for e in self.elements]:
            raise VerifyException(
                f"the result {type_text(self.result.type)} is not the tuple "
                "of the operands' types"
            )


@core_op
class GetOp(CoreOp):
    """`%x = psk_core.get %t {index = 0 : i64, site = "loss/%2"} : (tuple<A, B>) -> A`: element `index` of a tuple (`batch.0`)."""

    name = "psk_core.get"

    operand = operand_def(TupleType)
    index = attr_def(IntegerAttr)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue | Operation, index: int, *, site: str, name: str | None = None
    ):
        result = _infer(site, lambda: self.infer(_value_type(operand), index))
        super().__init__(
            operands=[operand], result_types=[result],
            attributes=site_attrs(site, name, index=IntegerAttr(index, i64)),
        )

    @staticmethod
    def infer(operand: Attribute, index: int) -> Attribute:
        assert isinstance(operand, TupleType)
        if not 0 <= index < len(operand.types):
            raise VerifyException(f"index {index} is outside {type_text(operand)}")
        return operand.types.data[index]

    def verify_(self) -> None:
        super().verify_()
        element = self.infer(self.operand.type, self.index.value.data)
        if element != self.result.type:
            raise VerifyException(
                f"element {self.index.value.data} of {type_text(self.operand.type)} "
                f"is {type_text(element)}, not {type_text(self.result.type)}"
            )


# --------------------------------------------------------------------------------------
# What reverse-mode differentiation needs (presk/transforms/differentiate.py makes these)
# --------------------------------------------------------------------------------------


@core_op
class SumToOp(OneTensorOp):
    """`%r = psk_core.sum_to %d {keep = [1 : i64], site = "f/%3"} : (A) -> R`: every axis summed away but `keep` (explicit axes, by index) and the prefix unless
    `keep_prefix`: a cotangent brought back to the shape of an operand it broadcast from."""

    name = "psk_core.sum_to"

    keep = attr_def(ArrayAttr)
    keep_prefix = opt_attr_def(UnitAttr)

    def __init__(
        self, operand: SSAValue | Operation, keep: Sequence[int], keep_prefix: bool,
        result_type: TensorAttr, *, site: str, name: str | None = None,
    ):
        super().__init__(operand, result_type, site=site, name=name, keep=_ints(keep),
                         keep_prefix=UnitAttr() if keep_prefix else None)

    @property
    def kept(self) -> list[int]:
        return _int_list(self.keep)

    def verify_(self) -> None:
        super().verify_()
        inferred = shapes.sum_to(self.operand.type.shape, self.kept, self.keep_prefix is not None)
        if not shapes.conforms(inferred, self.result.type.shape):
            raise VerifyException(f"summing to {inferred} does not give "
                                  f"{type_text(self.result.type)}")


@core_op
class SpreadOp(CoreOp):
    """`%r = psk_core.spread %d, %x {places = [0 : i64], site = "f/%3"} : (A, L) -> L`: the operand broadcast to the shape of `like`, its explicit axis k onto like's axis
    `places[k]` and its prefix onto like's; with `mean`, divide by how many elements each
    operand element spreads over. The adjoint of sum and mean (like is their operand)."""

    name = "psk_core.spread"

    operand = operand_def(TensorAttr)
    like = operand_def(TensorAttr)
    result = result_def(TensorAttr)
    places = attr_def(ArrayAttr)
    mean = opt_attr_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue | Operation, like: SSAValue | Operation, places: Sequence[int],
        *, mean: bool = False, site: str, name: str | None = None,
    ):
        super().__init__(
            operands=[operand, like], result_types=[_value_type(like)],
            attributes=site_attrs(site, name, places=_ints(places),
                                   mean=UnitAttr() if mean else None),
        )

    @property
    def place_list(self) -> list[int]:
        return _int_list(self.places)

    def verify_(self) -> None:
        super().verify_()
        if self.result.type != self.like.type:
            raise VerifyException("the result's type is not that of `like`")
        shapes.check_spread(self.operand.type.shape, self.result.type.shape, self.place_list)


@core_op
class ContractOp(TwoTensorOp):
    """`%r = psk_core.contract %a, %b {lhs_axes = [0 : i64], rhs_axes = [0 : i64], site = "f/%3"} : (A, B) -> R`: a general contraction (the cotangents of `dot`), the lhs's explicit axes `lhs_axes`
    with the rhs's `rhs_axes`, and the two prefixes when `prefix` is set."""

    name = "psk_core.contract"

    lhs_axes = attr_def(ArrayAttr)
    rhs_axes = attr_def(ArrayAttr)
    prefix = opt_attr_def(UnitAttr)

    def __init__(
        self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, lhs_axes: Sequence[int],
        rhs_axes: Sequence[int], prefix: bool, *, site: str, name: str | None = None,
        result_type: TensorAttr | None = None,
    ):
        if result_type is None:
            result_type = _infer(site, lambda: TensorAttr.from_shape(shapes.contract_axes(
                _value_type(lhs).shape, _value_type(rhs).shape, list(lhs_axes),  # type: ignore[attr-defined]
                list(rhs_axes), prefix)))
        super().__init__(lhs, rhs, result_type, site=site, name=name, lhs_axes=_ints(lhs_axes),
                         rhs_axes=_ints(rhs_axes), prefix=UnitAttr() if prefix else None)

    @property
    def axes(self) -> tuple[list[int], list[int], bool]:
        return _int_list(self.lhs_axes), _int_list(self.rhs_axes), self.prefix is not None

    def verify_(self) -> None:
        super().verify_()
        lhs, rhs, prefix = self.axes
        inferred = shapes.contract_axes(self.lhs.type.shape, self.rhs.type.shape, lhs, rhs,
                                        prefix)
        if not shapes.conforms(inferred, self.result.type.shape):
            raise VerifyException(f"the contraction makes {inferred}, not "
                                  f"{type_text(self.result.type)}")


@core_op
class ZerosLikeOp(CoreOp):
    """`%z = psk_core.zeros_like %x {site = "f.vjp/%2"} : T`: zeros of the operand's type and shape, a tensor, a tuple or a parameter tree."""

    name = "psk_core.zeros_like"

    operand = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None):
        super().__init__(operands=[operand], result_types=[_value_type(operand)],
                         attributes=site_attrs(site, name))

    def verify_(self) -> None:
        super().verify_()
        if self.result.type != self.operand.type:
            raise VerifyException("the result's type is not the operand's")


@core_op
class TreeOp(CoreOp):
    """`%g = psk_core.tree %dw, %db {site = "Linear.apply.vjp/%9"} : (!psk_core.tensor<In, Out>, !psk_core.tensor<Out>) -> !psk_core.params<Linear{In, Out}>`: a parameter tree from its
    fields, in its module's declaration order (a tree's cotangent)."""

    name = "psk_core.tree"

    fields = var_operand_def()
    result = result_def(ParamsAttr)

    traits = traits_def(Pure())

    def __init__(
        self, fields: Sequence[SSAValue | Operation], result_type: ParamsAttr, *, site: str,
        name: str | None = None,
    ):
        super().__init__(operands=[list(fields)], result_types=[result_type],
                         attributes=site_attrs(site, name))

    def verify_(self) -> None:
        super().verify_()
        params = self.result.type
        decl = lookup_module(self, params.module_name)
        entries = decl.entries
        if len(entries) != len(self.fields):
            raise VerifyException(f"{type_text(params)} has {len(entries)} fields, given "
                                  f"{len(self.fields)}")
        for entry, value in zip(entries, self.fields):
            expected = field_type(params, entry.field.data, decl)
            if not type_conforms(value.type, expected):
                raise VerifyException(f"field `{entry.field.data}` is {type_text(expected)}, "
                                      f"given {type_text(value.type)}")
