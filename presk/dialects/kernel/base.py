"""What every PSK-Kernel op shares: its site in errors (`kernel_op`, `KernelBaseOp`),
and what a kernel and a host share (`_BufferFunction`).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence
from typing import TypeVar

from xdsl.dialects.builtin import FunctionType, IntAttr, IntegerAttr, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation
from xdsl.irdl import IRDLOperation, attr_def, region_def
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import (SiteErrorsOp, op_definition, parse_func_like, print_func_tail,
    print_op_attrs)

from .types import BufferType


# --------------------------------------------------------------------------------------
# Sites in errors
# --------------------------------------------------------------------------------------

_OpT = TypeVar("_OpT", bound=IRDLOperation)


def site_of(op: Operation) -> str:
    """The site an error about `op` names: its `site`, or the kernel or host holding it."""
    current: Operation | None = op
    while current is not None:
        site = current.attributes.get("site")
        if isinstance(site, StringAttr):
            return site.data
        sym = current.attributes.get("sym_name")
        if isinstance(sym, StringAttr) and isinstance(current, _BufferFunction):
            return sym.data
        current = current.parent_op()
    return "(no site)"


kernel_op = op_definition(site_of)
"""`irdl_op_definition`, with every verifier error prefixed by the op's site."""


class KernelBaseOp(SiteErrorsOp, ABC):
    """IRDL's own structural errors (operand types, traits) also name the site."""

    @classmethod
    def site_of(cls, op: Operation) -> str:
        return site_of(op)


class RangeOp(KernelBaseOp, ABC):
    """A loop over [lower, upper) step 1, written `%i = lower to upper` (a `for` in a
    kernel, a `fold` in a host)."""

    lower = attr_def(IntAttr)
    upper = attr_def(IntAttr)

    def _verify_range(self, what: str) -> None:
        if self.upper.data < self.lower.data:
            raise VerifyException(f"the {what}'s bounds {self.lower.data}..{self.upper.data} "
                                  "decrease")

    def _print_range(self, printer: Printer, index: BlockArgument) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(index)
        printer.print_string(f" = {self.lower.data} to {self.upper.data}")

    @staticmethod
    def _parse_range(parser: Parser) -> tuple[Parser.UnresolvedArgument, dict[str, Attribute]]:
        """`%i = lower to upper`: the index and the bounds' attributes."""
        index = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lower = parser.parse_integer(allow_boolean=False)
        parser.parse_keyword("to")
        upper = parser.parse_integer(allow_boolean=False)
        return index, {"lower": IntAttr(lower), "upper": IntAttr(upper)}


def _enclosing(op: Operation, kind: type[_OpT]) -> _OpT | None:
    current = op.parent_op()
    while current is not None and not isinstance(current, kind):
        current = current.parent_op()
    return current


# --------------------------------------------------------------------------------------
# What a kernel and a host share
# --------------------------------------------------------------------------------------


def print_attrs_and_types(printer: Printer, op: Operation, *types: Attribute,
                          reserved: Sequence[str] = ()) -> None:
    """An op's ` {attrs} : A -> B` tail: its attributes but the `reserved` ones (sorted,
    raw UTF-8), then its types joined by ` -> `."""
    print_op_attrs(printer, op.attributes, reserved)
    printer.print_string(" : ")
    printer.print_list(types, printer.print_attribute, " -> ")


def parse_attrs_and_types(parser: Parser, count: int) -> tuple[dict[str, Attribute],
                                                                 list[Attribute]]:
    """What `print_attrs_and_types` prints: the attributes, `:` and `count` types."""
    attrs = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    types = [parser.parse_type()]
    while len(types) < count:
        parser.parse_punctuation("->")
        types.append(parser.parse_type())
    return attrs, types


def _print_signature_args(printer: Printer, args: Sequence[BlockArgument]) -> None:
    with printer.in_parens():
        printer.print_list(args, printer.print_block_argument)


class _BufferFunction(KernelBaseOp, ABC):
    """What a kernel and a host share: a symbol over buffer arguments, the last `outputs`
    of which it writes."""

    sym_name = attr_def(StringAttr)
    function_type = attr_def(FunctionType)
    outputs = attr_def(IntegerAttr)
    body = region_def("single_block")

    @property
    def args(self) -> tuple[BlockArgument, ...]:
        return self.body.block.args

    @property
    def output_count(self) -> int:
        return self.outputs.value.data

    @property
    def input_args(self) -> tuple[BlockArgument, ...]:
        return self.args[: len(self.args) - self.output_count]

    @property
    def output_args(self) -> tuple[BlockArgument, ...]:
        return self.args[len(self.args) - self.output_count:]

    @property
    def arg_types(self) -> tuple[Attribute, ...]:
        return self.function_type.inputs.data

    def _verify_signature(self) -> None:
        types = self.arg_types
        if tuple(a.type for a in self.args) != types:
            raise VerifyException("the block arguments' types are not the function's inputs")
        if self.function_type.outputs.data:
            raise VerifyException("a kernel or host returns nothing: it writes its outputs")
        if not 1 <= self.output_count <= len(types):
            raise VerifyException(f"{self.output_count} outputs of {len(types)} arguments")
        for t in types:
            if not isinstance(t, BufferType):
                raise VerifyException(f"an argument is a buffer, not {t}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name)
        _print_signature_args(printer, self.args)
        print_func_tail(printer, self)

    @classmethod
    def parse(cls, parser: Parser):
        attrs, inputs, region = parse_func_like(parser)
        if not region.blocks:
            region.add_block(Block(arg_types=inputs))
        return cls.create(attributes=attrs, regions=[region])
