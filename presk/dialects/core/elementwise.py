"""PSK-Core's element-wise ops: one tensor in (`UnaryOp`: the result has its type), or
two that broadcast (`BinaryOp`). One class per function of the table of element-wise
functions (presk/ops), generated from its rows (`FUNCTION_OPS`: `NegOp`, `GeluSlopeOp`,
…); `powi` and `heaviside` carry an attribute and are written here.
"""

from __future__ import annotations

from abc import ABC

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import attr_def
from xdsl.utils.exceptions import VerifyException

from presk import shapes
from presk.dialects.common import function_ops

from .base import CoreOp, OneTensorOp, TwoTensorOp, _infer, _value_type, core_op
from .types import TensorAttr, type_conforms, type_text


# Element-wise operations
# --------------------------------------------------------------------------------------


class UnaryOp(OneTensorOp, ABC):
    """An element-wise function of one tensor: the result has the operand's type."""

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None,
                 **attrs: Attribute | None):
        super().__init__(operand, _value_type(operand), site=site, name=name, **attrs)

    def verify_(self) -> None:
        super().verify_()
        if self.result.type != self.operand.type:
            raise VerifyException(
                f"the result {type_text(self.result.type)} is not the "
                f"operand's type {type_text(self.operand.type)}"
            )


class BinaryOp(TwoTensorOp, ABC):
    """An element-wise op of two tensors that broadcast against each other."""

    def __init__(
        self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, *, site: str,
        name: str | None = None, result_type: TensorAttr | None = None,
    ):
        if result_type is None:
            result_type = _infer(site, lambda: self.infer(_value_type(lhs), _value_type(rhs)))
        super().__init__(lhs, rhs, result_type, site=site, name=name)

    @classmethod
    def infer(cls, lhs: Attribute, rhs: Attribute) -> TensorAttr:
        assert isinstance(lhs, TensorAttr) and isinstance(rhs, TensorAttr)
        return TensorAttr.from_shape(shapes.broadcast(lhs.shape, rhs.shape))

    def verify_(self) -> None:
        super().verify_()
        inferred = self.infer(self.lhs.type, self.rhs.type)
        if not type_conforms(inferred, self.result.type):
            raise VerifyException(
                f"the operands make {type_text(inferred)}, "
                f"not {type_text(self.result.type)}"
            )


@core_op
class PowIOp(UnaryOp):
    """`%r = psk_core.powi %x {n = 2 : i64, site = "loss/%6"} : T`: `x ^ n` for a natural `n`."""

    name = "psk_core.powi"

    n = attr_def(IntegerAttr)

    def __init__(
        self, operand: SSAValue | Operation, n: int, *, site: str, name: str | None = None
    ):
        super().__init__(operand, site=site, name=name, n=IntegerAttr(n, i64))

    def verify_(self) -> None:
        super().verify_()
        if self.n.value.data < 0:
            raise VerifyException(f"the exponent {self.n.value.data} is not a natural")


@core_op
class HeavisideOp(UnaryOp):
    """`%r = psk_core.heaviside %x {at_zero = 5.000000e-01 : f64, site = "f/%3"} : T`: 1 where
    the operand is positive, 0 where it is negative, `at_zero` at 0 (the derivatives of
    relu, abs, minimum and maximum, with their documented subgradients)."""

    name = "psk_core.heaviside"

    at_zero = attr_def(FloatAttr)

    def __init__(
        self, operand: SSAValue | Operation, at_zero: float, *, site: str,
        name: str | None = None,
    ):
        super().__init__(operand, site=site, name=name, at_zero=FloatAttr(at_zero, f64))

    @property
    def at_zero_value(self) -> float:
        return self.at_zero.value.data


FUNCTION_OPS: dict[str, type[CoreOp]] = function_ops("psk_core", UnaryOp, BinaryOp, core_op,
                                                     __name__)
"""The op class of each element-wise function of the table, by the function's name."""
globals().update({cls.__name__: cls for cls in FUNCTION_OPS.values()})
