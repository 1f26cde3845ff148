"""What every PSK-Core op shares: its site in errors (`core_op`), the op base
(`CoreOp`), and the helpers its builders use.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Mapping, Sequence

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import operand_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import (OneOperandOp, SiteOp, TwoOperandOp, op_definition,
    site_of as common_site_of)
from presk.shapes import ShapeError, Size

from .types import TensorAttr


def _dims_attr(dims: Mapping[str, Size]) -> DictionaryAttr | None:
    if not dims:
        return None
    return DictionaryAttr(
        {k: IntegerAttr(v, i64) if isinstance(v, int) else StringAttr(v) for k, v in dims.items()}
    )


def _names_attr(names: Sequence[str]) -> ArrayAttr[StringAttr] | None:
    return ArrayAttr(StringAttr(n) for n in names) if names else None


def _value_type(value: SSAValue | Operation) -> Attribute:
    return SSAValue.get(value).type


def _infer(site: str, compute: Callable[[], Attribute]) -> Attribute:
    """Run a type inference for a builder, naming the site when the types do not fit."""
    try:
        return compute()
    except (ShapeError, VerifyException) as err:
        raise VerifyException(f"{site}: {err}") from err


def _ints(values: Sequence[int]) -> ArrayAttr[IntegerAttr]:
    return ArrayAttr(IntegerAttr(v, i64) for v in values)


def _int_list(attr: ArrayAttr) -> list[int]:
    return [a.value.data for a in attr.data]


# --------------------------------------------------------------------------------------
# Sites in errors, and the op base
# --------------------------------------------------------------------------------------


def site_of(op: Operation) -> str:
    """The site an error about `op` names: its `site`, or what identifies a declaration
    (a function's or module's symbol, `Module.field` for an entry of a module)."""
    if "site" in op.attributes or "sym_name" in op.attributes:
        return common_site_of(op)
    field = op.attributes.get("field")
    module = op.parent_op()
    if isinstance(field, StringAttr) and module is not None and module.name == "psk_core.module":
        return f"{common_site_of(module)}.{field.data}"
    return "(no site)"


def site_message(op: Operation, err: Exception) -> str:
    """`<site>: <op>: <what is wrong>`, the form of every psk_core verifier error."""
    return f"{site_of(op)}: {op.name}: {err}"


core_op = op_definition(site_of)
"""`irdl_op_definition`, with every verifier error (IRDL's own too) prefixed by the op's
site: the thread a user follows from an error back to the program."""


class CoreOp(SiteOp, ABC):
    """An op of a function body, in the generic syntax of `presk.dialects.common.SiteOp`:
    `%r = psk_core.op %a, %b {attrs} : (A, B) -> R`, `: T` when the one operand and the
    result have the same type, `: R` when there is no operand."""

    @classmethod
    def site_of(cls, op: Operation) -> str:
        return site_of(op)


class OneTensorOp(CoreOp, OneOperandOp, ABC):
    """A pure op from one tensor (`operand`) to one (`result`): the element-wise
    functions of one operand, reductions, softmax, broadcast, sum_to."""

    operand = operand_def(TensorAttr)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())


class TwoTensorOp(CoreOp, TwoOperandOp, ABC):
    """A pure op from two tensors (`lhs`, `rhs`) to one (`result`): the element-wise
    functions of two operands, dot and contract."""

    lhs = operand_def(TensorAttr)
    rhs = operand_def(TensorAttr)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())
