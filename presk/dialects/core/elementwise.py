"""PSK-Core's element-wise ops: one tensor in (`UnaryOp`: the result has its type), or
two that broadcast (`BinaryOp`). One class per function; their semantics are the table
of element-wise functions.
"""

from __future__ import annotations

from abc import ABC

from xdsl.dialects.builtin import FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, attr_def, operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from presk import shapes

from .base import CoreOp, _infer, _site_attrs, _value_type, core_op
from .types import TensorAttr, type_conforms, type_text


# Element-wise operations
# --------------------------------------------------------------------------------------


class UnaryOp(CoreOp, ABC):
    """An element-wise function of one tensor: the result has the operand's type."""

    operand = operand_def(TensorAttr)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None):
        self._init_unary(operand, _site_attrs(site, name))

    def _init_unary(self, operand: SSAValue | Operation, attrs: dict[str, Attribute]) -> None:
        IRDLOperation.__init__(
            self, operands=[operand], result_types=[_value_type(operand)], attributes=attrs
        )

    def verify_(self) -> None:
        super().verify_()
        if self.result.type != self.operand.type:
            raise VerifyException(
                f"the result {type_text(self.result.type)} is not the "
                f"operand's type {type_text(self.operand.type)}"
            )


@core_op
class NegOp(UnaryOp):
    name = "psk_core.neg"


@core_op
class SqrtOp(UnaryOp):
    name = "psk_core.sqrt"


@core_op
class ExpOp(UnaryOp):
    name = "psk_core.exp"


@core_op
class LogOp(UnaryOp):
    name = "psk_core.log"


@core_op
class TanhOp(UnaryOp):
    name = "psk_core.tanh"


@core_op
class SigmoidOp(UnaryOp):
    name = "psk_core.sigmoid"


@core_op
class ReluOp(UnaryOp):
    name = "psk_core.relu"


@core_op
class GeluOp(UnaryOp):
    name = "psk_core.gelu"


@core_op
class SoftplusOp(UnaryOp):
    name = "psk_core.softplus"


@core_op
class AbsOp(UnaryOp):
    name = "psk_core.abs"


@core_op
class SinOp(UnaryOp):
    name = "psk_core.sin"


@core_op
class CosOp(UnaryOp):
    name = "psk_core.cos"


class BinaryOp(CoreOp, ABC):
    """An element-wise op of two tensors that broadcast against each other."""

    lhs = operand_def(TensorAttr)
    rhs = operand_def(TensorAttr)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())

    def __init__(
        self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, *, site: str,
        name: str | None = None, result_type: TensorAttr | None = None,
    ):
        if result_type is None:
            result_type = _infer(site, lambda: self.infer(_value_type(lhs), _value_type(rhs)))
        super().__init__(
            operands=[lhs, rhs], result_types=[result_type], attributes=_site_attrs(site, name)
        )

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
class AddOp(BinaryOp):
    name = "psk_core.add"


@core_op
class SubOp(BinaryOp):
    name = "psk_core.sub"


@core_op
class MulOp(BinaryOp):
    name = "psk_core.mul"


@core_op
class DivOp(BinaryOp):
    name = "psk_core.div"


@core_op
class MinimumOp(BinaryOp):
    """The element-wise minimum; `psk_core.min` is the reduction."""

    name = "psk_core.minimum"


@core_op
class MaximumOp(BinaryOp):
    """The element-wise maximum; `psk_core.max` is the reduction."""

    name = "psk_core.maximum"


@core_op
class PowOp(BinaryOp):
    """`lhs ^ rhs` with a real exponent."""

    name = "psk_core.pow"


@core_op
class PowIOp(UnaryOp):
    """`x ^ n` for a natural `n`: `psk_core.powi %x {n = 2 : i64, …}`."""

    name = "psk_core.powi"

    n = attr_def(IntegerAttr)

    def __init__(
        self, operand: SSAValue | Operation, n: int, *, site: str, name: str | None = None
    ):
        self._init_unary(operand, _site_attrs(site, name, n=IntegerAttr(n, i64)))

    def verify_(self) -> None:
        super().verify_()
        if self.n.value.data < 0:
            raise VerifyException(f"the exponent {self.n.value.data} is not a natural")


@core_op
class ErfOp(UnaryOp):
    """The error function: gelu's derivative is written with it."""

    name = "psk_core.erf"


@core_op
class GeluSlopeOp(UnaryOp):
    """gelu's derivative, Φ(x) + x·φ(x), with Φ(x) = (1 + erf(x/√2))/2 the normal
    distribution and φ(x) = exp(−x²/2)/√(2π) its density: one operation, one rounding."""

    name = "psk_core.gelu_slope"


@core_op
class ErfSlopeOp(UnaryOp):
    """erf's derivative, 2/√π·exp(−x²), as one operation: exact where the constant 2/√π
    would be rounded to an f64."""

    name = "psk_core.erf_slope"


@core_op
class HeavisideOp(UnaryOp):
    """1 where the operand is positive, 0 where it is negative, `at_zero` at 0: the
    derivatives of relu, abs, minimum and maximum, with their documented subgradients."""

    name = "psk_core.heaviside"

    at_zero = attr_def(FloatAttr)

    def __init__(
        self, operand: SSAValue | Operation, at_zero: float, *, site: str,
        name: str | None = None,
    ):
        self._init_unary(operand, _site_attrs(site, name, at_zero=FloatAttr(at_zero, f64)))

    @property
    def at_zero_value(self) -> float:
        return self.at_zero.value.data
