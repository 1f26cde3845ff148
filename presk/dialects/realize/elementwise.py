"""PSK-Realize's element-wise ops: one tensor in (`UnaryOp`), or two whose axes map
onto the result's (`BinaryOp`, `lhs_map`/`rhs_map`). One class per function of
the table of element-wise functions (presk/ops), generated from its rows (`FUNCTION_OPS`);
`powi` and `heaviside` carry an attribute and are written here.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import DenseArrayBase, FloatAttr, IntegerAttr, f64, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import attr_def
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import function_ops

from .base import ComputeOp, OneTensorOp, TwoTensorOp, _check_map, _i64s, _ints, realize_op
from .types import RTensorType, _ttype, rtype_text


# ---- element-wise ----


class UnaryOp(OneTensorOp, ABC):
    """An element-wise function: the result has the operand's type."""

    ELEMENTWISE: ClassVar[bool] = True

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None,
                 result_type: RTensorType | None = None, **attrs: Attribute | None):
        super().__init__(operand, result_type or _ttype(operand), site=site, name=name, **attrs)

    def verify_(self) -> None:
        super().verify_()
        if self.operand.type.sizes != self.result.type.sizes:
            raise VerifyException(f"the result {rtype_text(self.result.type)} is not the "
                                  f"operand's shape {rtype_text(self.operand.type)}")


@realize_op
class HeavisideOp(UnaryOp):
    """`%r = psk_realize.heaviside %a {at_zero = 5.000000e-01 : f64, site = "f/%3"} : T`: 1 where positive, 0 where negative, `at_zero` at 0."""

    name = "psk_realize.heaviside"
    at_zero = attr_def(FloatAttr)

    def __init__(self, operand: SSAValue | Operation, at_zero: float, *, site: str,
                 name: str | None = None):
        super().__init__(operand, site=site, name=name, at_zero=FloatAttr(at_zero, f64))

    @property
    def at_zero_value(self) -> float:
        return self.at_zero.value.data


@realize_op
class PowIOp(UnaryOp):
    """`%r = psk_realize.powi %a {n = 2 : i64, site = "loss/%6"} : T`: `x ^ n`, n a natural."""

    name = "psk_realize.powi"
    n = attr_def(IntegerAttr)

    @property
    def exponent(self) -> int:
        return self.n.value.data

    def __init__(self, operand: SSAValue | Operation, n: int, *, site: str,
                 name: str | None = None):
        super().__init__(operand, site=site, name=name, n=IntegerAttr(n, i64))


class BinaryOp(TwoTensorOp, ABC):
    """Element-wise on two operands placed on the result's axes by `lhs_map`/`rhs_map`."""

    lhs_map = attr_def(DenseArrayBase)
    rhs_map = attr_def(DenseArrayBase)

    ELEMENTWISE: ClassVar[bool] = True

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 lhs_map: Sequence[int], rhs_map: Sequence[int], result_type: RTensorType,
                 *, site: str, name: str | None = None):
        super().__init__(lhs, rhs, result_type, site=site, name=name, lhs_map=_i64s(lhs_map),
                         rhs_map=_i64s(rhs_map))

    @property
    def maps(self) -> tuple[list[int], list[int]]:
        return _ints(self.lhs_map), _ints(self.rhs_map)

    def verify_(self) -> None:
        super().verify_()
        result = self.result.type
        covered: set[int] = set()
        for side, value, places in (("lhs", self.lhs, _ints(self.lhs_map)),
                                    ("rhs", self.rhs, _ints(self.rhs_map))):
            _check_map(side, value.type, places, result)
            covered.update(places)
        if missing := sorted(set(range(result.rank)) - covered):
            raise VerifyException(f"result axes {missing} of {rtype_text(result)} come from "
                                  "neither operand")


FUNCTION_OPS: dict[str, type[ComputeOp]] = function_ops("psk_realize", UnaryOp, BinaryOp,
                                                        realize_op, __name__)
"""The op class of each element-wise function of the table, by the function's name."""
globals().update({cls.__name__: cls for cls in FUNCTION_OPS.values()})
