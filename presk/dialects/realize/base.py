"""What every PSK-Realize op shares: its site in errors (`realize_op`), the op base
(`RealizeOp`, the generic syntax with several results) and the arithmetic base
(`ComputeOp`).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import BFloat16Type, DenseArrayBase, i64
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import operand_def, result_def, traits_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import OneOperandOp, SiteOp, TwoOperandOp, op_definition, site_of

from .types import RTensorType, _ttype, rtype_text


realize_op = op_definition(site_of)
"""`irdl_op_definition`, with every verifier error prefixed by the op's site."""


def _i64s(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _ints(attr: Attribute | None) -> list[int]:
    if attr is None:
        return []
    assert isinstance(attr, DenseArrayBase)
    return [int(v) for v in attr.get_values()]


# --------------------------------------------------------------------------------------
# The op base: Core's site/name and generic syntax, with several results allowed
# --------------------------------------------------------------------------------------


class RealizeOp(SiteOp, ABC):
    """An op of an instance's body; the textual form of SiteOp (`%r = op %a, %b {attrs} :
    (A, B) -> R`, `: T` when every operand has the result's type), and `-> (R1, R2)`
    for a call with several results."""

    COMPUTE: ClassVar[bool] = False
    """It computes on reals: one launch of a kernel (constants, converts, slices, calls,
    folds are not)."""
    ELEMENTWISE: ClassVar[bool] = False
    """Each result element depends on the operands' elements at its place only."""

    def _print_signature(self, printer: Printer) -> None:
        operand_types = [o.type for o in self.operands]
        results = [r.type for r in self.results]
        if not results:
            printer.print_list(operand_types, printer.print_attribute)
            return
        if len(results) == 1 and (not operand_types or
                                  (operand_types == results * len(operand_types)
                                   and not self.HAS_CALLEE)):
            printer.print_attribute(results[0])
            return
        with printer.in_parens():
            printer.print_list(operand_types, printer.print_attribute)
        printer.print_string(" -> ")
        if len(results) == 1:
            printer.print_attribute(results[0])
        else:
            with printer.in_parens():
                printer.print_list(results, printer.print_attribute)

    BARE_WITHOUT_OPERANDS: ClassVar[bool] = True

    @classmethod
    def _parse_results(cls, parser: Parser) -> list[Attribute]:
        outs = parser.parse_optional_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        return outs if outs is not None else [parser.parse_type()]


class ComputeOp(RealizeOp, ABC):
    """An arithmetic op: operands of the result's element type, never bf16."""

    COMPUTE: ClassVar[bool] = True

    def _tensor_operands(self) -> list[SSAValue]:
        return list(self.operands)

    def verify_(self) -> None:
        super().verify_()
        result = _ttype(self.results[0])
        if isinstance(result.element, BFloat16Type):
            raise VerifyException(
                "an arithmetic op in bf16: bf16 is a storage type, compute in f32 and convert")
        for i, v in enumerate(self._tensor_operands()):
            t = _ttype(v)
            if t.element != result.element:
                raise VerifyException(
                    f"operand {i} is {rtype_text(t)}, the result {rtype_text(result)}: "
                    "element types differ (a conversion is an explicit psk_realize.convert)")


class OneTensorOp(ComputeOp, OneOperandOp, ABC):
    """A pure compute op from one tensor (`operand`) to one (`result`): the element-wise
    functions of one operand, reductions, softmax, sum_to, broadcast."""

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())


def _check_map(what: str, t: RTensorType, places: Sequence[int], result: RTensorType) -> None:
    if len(places) != t.rank:
        raise VerifyException(f"{what} {rtype_text(t)} has {t.rank} axes, its map "
                              f"{list(places)} places {len(places)}")
    if list(places) != sorted(set(places)) or any(not 0 <= p < result.rank for p in places):
        raise VerifyException(f"the {what} map {list(places)} is not increasing axes of "
                              f"{rtype_text(result)}")
    for k, p in enumerate(places):
        if t.sizes[k] != result.sizes[p]:
            raise VerifyException(f"shape mismatch: axis {k} of the {what} "
                                  f"{rtype_text(t)} has size {t.sizes[k]}, the result's axis "
                                  f"{p} of {rtype_text(result)} {result.sizes[p]}")


class TwoTensorOp(ComputeOp, TwoOperandOp, ABC):
    """A pure compute op from two tensors (`lhs`, `rhs`) to one (`result`): the
    element-wise functions of two operands, dot and contract."""

    lhs = operand_def(RTensorType)
    rhs = operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())
