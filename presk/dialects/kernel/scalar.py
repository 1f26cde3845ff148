"""PSK-Kernel's scalar ops, the element-wise arithmetic of a kernel body: `add`, `sub`,
`mul`, `div`, `min`, `max`, `neg`, `fma` (a·b + c rounded once: only where a realization
fuses a contraction's site), `math` (a function of the one math table), `cast` between
f32 and f64, and `constant`.
"""

from __future__ import annotations

from abc import ABC
from typing import ClassVar

from xdsl.dialects.builtin import BFloat16Type, FloatAttr, StringAttr, f64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (AnyAttr, VarConstraint, attr_def, operand_def, result_def,
    traits_def, var_operand_def)
from xdsl.traits import Pure, SameOperandsAndResultType
from xdsl.utils.exceptions import VerifyException

from presk import ops
from presk.dialects.common import NamedOp, named_ops

from .base import KernelBaseOp, kernel_op
from .types import _is_scalar_float, type_name


class _ScalarOp(KernelBaseOp, ABC):
    """Scalar arithmetic: `%r = psk_kernel.add %a, %b : f32`; every operand and the result
    have the one type `T` (IRDL checks it and the syntax infers the operands' types from
    it), f32 or f64 (bf16 has no arithmetic: it computes in f32)."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    result = result_def(T)

    traits = traits_def(Pure(), SameOperandsAndResultType())

    def verify_(self) -> None:
        t = self.result.type
        if not _is_scalar_float(t):
            raise VerifyException(f"arithmetic is in f32 or f64, not {type_name(t)}"
                                  + (" (bf16 computes in f32)" if isinstance(t, BFloat16Type)
                                     else ""))


class BinaryOp(_ScalarOp, ABC):
    lhs = operand_def(_ScalarOp.T)
    rhs = operand_def(_ScalarOp.T)

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    SYMBOL: ClassVar[str] = ""
    """The C operator, for the four that have one."""

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])


ARITHMETIC: dict[str, type[BinaryOp]] = named_ops(BinaryOp, kernel_op, __name__, [
    NamedOp("AddOp", "psk_kernel.add", "`%r = psk_kernel.add %a, %b : f32`: a + b, IEEE.",
            {"SYMBOL": "+"}),
    NamedOp("SubOp", "psk_kernel.sub", "`%r = psk_kernel.sub %a, %b : f32`: a − b, IEEE.",
            {"SYMBOL": "-"}),
    NamedOp("MulOp", "psk_kernel.mul",
            "`%r = psk_kernel.mul %a, %b : f64`: a · b, IEEE (never fused into an FMA).",
            {"SYMBOL": "*"}),
    NamedOp("DivOp", "psk_kernel.div", "`%r = psk_kernel.div %a, %b : f64`: a / b, IEEE.",
            {"SYMBOL": "/"}),
    NamedOp("MinOp", "psk_kernel.min", "`%r = psk_kernel.min %a, %b : f32`: the smaller "
            "operand; NaN when either is NaN (numpy's minimum, LLVM's minimum)."),
    NamedOp("MaxOp", "psk_kernel.max", "`%r = psk_kernel.max %a, %b : f32`: the larger "
            "operand; NaN when either is NaN (numpy's maximum, LLVM's maximum)."),
])
"""The binary scalar ops, which differ in their name (and C symbol) only."""
AddOp, SubOp, MulOp, DivOp, MinOp, MaxOp = ARITHMETIC.values()


@kernel_op
class FmaOp(_ScalarOp):
    """`%r = psk_kernel.fma %a, %b, %c : f32`: a·b + c with ONE rounding (IEEE's
    fusedMultiplyAdd: LLVM's `llvm.fma`, C's `fma`/`fmaf`, the kernel interpreter's exact
    emulation). A kernel has it only where the realization fuses a contraction's site
    (`"fma"`, docs/artifacts.md); `mul` + `add` are never fused otherwise."""

    name = "psk_kernel.fma"

    lhs = operand_def(_ScalarOp.T)
    rhs = operand_def(_ScalarOp.T)
    addend = operand_def(_ScalarOp.T)

    assembly_format = "$lhs `,` $rhs `,` $addend attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 addend: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs, addend], result_types=[SSAValue.get(lhs).type])


@kernel_op
class NegOp(_ScalarOp):
    """`%r = psk_kernel.neg %a : f32`: −a (the sign bit flipped)."""

    name = "psk_kernel.neg"

    operand = operand_def(_ScalarOp.T)

    assembly_format = "$operand attr-dict `:` type($result)"

    def __init__(self, operand: SSAValue | Operation):
        super().__init__(operands=[operand], result_types=[SSAValue.get(operand).type])


MATH_FUNCTIONS = ops.kernel_math()
"""The functions of the math table, name: arity — the table's library rows and its exact
rows without a scalar op of their own (presk/ops; evaluated by
presk/analysis/kernel_math.py)."""


@kernel_op
class MathOp(_ScalarOp):
    """`%r = psk_kernel.math "erf" %a : f32`: a function of the math table, in the
    operand's type. `sqrt` is IEEE (correctly rounded); the others are the table's."""

    name = "psk_kernel.math"

    fn = attr_def(StringAttr)
    args = var_operand_def(_ScalarOp.T)

    assembly_format = "$fn $args attr-dict `:` type($result)"

    def __init__(self, fn: str, *args: SSAValue | Operation):
        super().__init__(operands=[list(args)], result_types=[SSAValue.get(args[0]).type],
                         attributes={"fn": StringAttr(fn)})

    def verify_(self) -> None:
        super().verify_()
        fn = self.fn.data
        if fn not in MATH_FUNCTIONS:
            raise VerifyException(f"`{fn}` is not a function of the math table "
                                  f"({', '.join(MATH_FUNCTIONS)})")
        if len(self.args) != MATH_FUNCTIONS[fn]:
            raise VerifyException(f"`{fn}` takes {MATH_FUNCTIONS[fn]} operands, given "
                                  f"{len(self.args)}")


@kernel_op
class CastOp(KernelBaseOp):
    """`%r = psk_kernel.cast %a : f32 -> f64`: between f32 and f64, exact when it widens,
    rounded to nearest even when it narrows."""

    name = "psk_kernel.cast"

    operand = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = "$operand attr-dict `:` type($operand) `->` type($result)"

    def __init__(self, operand: SSAValue | Operation, to: Attribute):
        super().__init__(operands=[operand], result_types=[to])

    def verify_(self) -> None:
        a, b = self.operand.type, self.result.type
        if not (_is_scalar_float(a) and _is_scalar_float(b)):
            raise VerifyException(f"a cast is between f32 and f64, not {type_name(a)} -> "
                                  f"{type_name(b)}")


@kernel_op
class ConstantOp(KernelBaseOp):
    """`%c = psk_kernel.constant {value = 1.4142135623730951 : f64} : f32`: a number (held
    as an f64) rounded to nearest even into the result type."""

    name = "psk_kernel.constant"

    value = attr_def(FloatAttr)
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, value: float, t: Attribute):
        super().__init__(result_types=[t], attributes={"value": FloatAttr(float(value), f64)})

    @property
    def number(self) -> float:
        return float(self.value.value.data)

    def verify_(self) -> None:
        if not _is_scalar_float(self.result.type):
            raise VerifyException(f"a constant is f32 or f64, not {type_name(self.result.type)}")
