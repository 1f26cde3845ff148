"""What the three Presk dialects share: names, sizes and axes in the text, raw UTF-8
strings, attribute dictionaries, and ops that carry a `site` and print the generic syntax.

Strings print as raw UTF-8 (`"γ"`), not xDSL's byte escapes: xDSL 0.75 reads an escaped
non-ASCII string back as a `BytesAttr`, which would break the round trip of names like
θ and γ. That is why the ops of these dialects print their own attribute dictionaries
(sorted by name, so that the text does not depend on how an op was built), and why
xDSL's `assembly_format` (whose `attr-dict` escapes) serves none of the ops that carry
names or sites.

Every verifier error starts with the site of the op it is about (`site_of`, one per
dialect): the thread a user follows from an error back to the program.
"""

from __future__ import annotations

import re
from abc import ABC
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar, NamedTuple, TypeVar

from xdsl.dialects.builtin import (ArrayAttr, DictionaryAttr, FunctionType, IntAttr, ModuleOp,
    IntegerAttr, NoneAttr, StringAttr, SymbolRefAttr, UnitAttr)
from xdsl.dialects.utils import parse_func_op_like
from xdsl.ir import (Attribute, BlockArgument, Operation, ParametrizedAttribute, Region,
    SSAValue)
from xdsl.irdl import IRDLOperation, attr_def, irdl_attr_definition, irdl_op_definition, opt_attr_def
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from presk import ops
from presk.shapes import Axis, ShapeError, Size

# --------------------------------------------------------------------------------------
# Names and sizes in the textual form
# --------------------------------------------------------------------------------------

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
# What the MLIR lexer accepts between quotes without an escape.
_RAW_STRING = re.compile(r'[^"\\\n\v\f]*')


def print_name(printer: Printer, name: str) -> None:
    """An ASCII identifier bare, anything else (θ, γ) quoted as raw UTF-8."""
    if _BARE_NAME.fullmatch(name):
        printer.print_string(name)
    else:
        print_string(printer, name)


def print_string(printer: Printer, text: str) -> None:
    if _RAW_STRING.fullmatch(text):
        printer.print_string(f'"{text}"')
    else:
        printer.print_string_literal(text)


def parse_optional_name(parser: AttrParser) -> str | None:
    name = parser.parse_optional_identifier()
    return name if name is not None else parser.parse_optional_str_literal()


def parse_name(parser: AttrParser, what: str) -> str:
    return parser.expect(lambda: parse_optional_name(parser), f"Expected {what}")


def size_attr(size: Size) -> IntAttr | StringAttr:
    """The attribute of an axis size: a literal or a dim symbol."""
    return IntAttr(size) if isinstance(size, int) else StringAttr(size)


def size_value(attr: Attribute) -> Size:
    """The size an attribute stands for (IntAttr, IntegerAttr or StringAttr)."""
    if isinstance(attr, IntAttr):
        return attr.data
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    raise VerifyException(f"{attr} is not a size")


def print_size(printer: Printer, size: Size) -> None:
    if isinstance(size, int):
        printer.print_string(str(size))
    else:
        print_name(printer, size)


def parse_size(parser: AttrParser) -> Size:
    value = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if value is not None:
        return value
    return parse_name(parser, "a size: an integer or a dim symbol")


# --------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------




@irdl_attr_definition
class AxisAttr(ParametrizedAttribute):
    """One axis of a tensor type: an optional name and a size. `#psk_core.axis<model: D>`"""

    name = "psk_core.axis"

    label: StringAttr | NoneAttr
    size: IntAttr | StringAttr

    @classmethod
    def from_axis(cls, axis: Axis) -> AxisAttr:
        label = StringAttr(axis.name) if axis.name is not None else NoneAttr()
        return cls(label, size_attr(axis.size))

    @property
    def axis(self) -> Axis:
        label = self.label.data if isinstance(self.label, StringAttr) else None
        return Axis(label, size_value(self.size))

    def verify(self) -> None:
        if isinstance(self.size, IntAttr) and self.size.data < 0:
            raise VerifyException(f"axis size {self.size.data} is negative")
        if isinstance(self.label, StringAttr) and not self.label.data:
            raise VerifyException("an axis name cannot be empty")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            self.print_axis(printer)

    def print_axis(self, printer: Printer) -> None:
        if isinstance(self.label, StringAttr):
            print_name(printer, self.label.data)
            printer.print_string(": ")
        print_size(printer, size_value(self.size))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            axis = parse_axis(parser)
        return (axis.label, axis.size)


class ConcreteAxes:
    """What a type over concrete axes answers (a Realize tensor, a kernel buffer): its
    `axes` parameter, an array of `AxisAttr` with integer sizes, as `Axis`es and as a
    count."""

    @property
    def axis_list(self) -> tuple[Axis, ...]:
        return tuple(a.axis for a in self.axes.data)  # type: ignore[attr-defined]

    @property
    def rank(self) -> int:
        return len(self.axes.data)  # type: ignore[attr-defined]


def parse_axis(parser: AttrParser) -> AxisAttr:
    """`size` or `name: size`; a bare identifier alone is a dim symbol."""
    value = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if value is not None:
        return AxisAttr(NoneAttr(), IntAttr(value))
    name = parse_name(parser, "an axis: `...`, a size, or `name: size`")
    if parser.parse_optional_punctuation(":") is None:
        return AxisAttr(NoneAttr(), StringAttr(name))
    return AxisAttr(StringAttr(name), size_attr(parse_size(parser)))


# --------------------------------------------------------------------------------------

def print_attr_value(printer: Printer, attr: Attribute) -> None:
    if isinstance(attr, StringAttr):
        print_string(printer, attr.data)
    elif isinstance(attr, ArrayAttr):
        with printer.in_square_brackets():
            printer.print_list(attr.data, lambda a: print_attr_value(printer, a))
    elif isinstance(attr, DictionaryAttr):
        print_attr_dict(printer, attr.data)
    else:
        printer.print_attribute(attr)


def print_attr_dict(printer: Printer, attrs: Mapping[str, Attribute]) -> None:
    def entry(item: tuple[str, Attribute]) -> None:
        printer.print_identifier_or_string_literal(item[0])
        if not isinstance(item[1], UnitAttr):
            printer.print_string(" = ")
            print_attr_value(printer, item[1])

    with printer.in_braces():
        printer.print_list(attrs.items(), entry)


def print_op_attrs(
    printer: Printer, attrs: Mapping[str, Attribute], reserved: Iterable[str] = (),
    keyword: bool = False,
) -> None:
    """The op's attributes, sorted by name so that the text does not depend on how the
    op was built, and without the ones its syntax already shows."""
    shown = {k: attrs[k] for k in sorted(attrs) if k not in reserved}
    if shown:
        printer.print_string(" attributes " if keyword else " ")
        print_attr_dict(printer, shown)




def site_attrs(site: str | None, name: str | None = None,
               **more: Attribute | None) -> dict[str, Attribute]:
    """The attributes of an op being built: its `site` and source `name` when given, and
    the others that are not None."""
    attrs: dict[str, Attribute] = {} if site is None else {"site": StringAttr(site)}
    if name is not None:
        attrs["name"] = StringAttr(name)
    attrs.update({k: v for k, v in more.items() if v is not None})
    return attrs

# --------------------------------------------------------------------------------------
# Sites in verifier errors
# --------------------------------------------------------------------------------------

_OpT = TypeVar("_OpT", bound=IRDLOperation)
SiteOf = Callable[[Operation], str]


def site_of(op: Operation) -> str:
    """The site an error about `op` names: its `site`, else its symbol's name."""
    for key in ("site", "sym_name"):
        value = op.attributes.get(key)
        if isinstance(value, StringAttr):
            return value.data
    return "(no site)"


def _with_site(op: Operation, err: Exception, where: SiteOf) -> str:
    """`<site>: <op>: <what is wrong>`, once (an error from a nested check has it)."""
    prefix = f"{where(op)}: {op.name}: "
    text = str(err)
    return text if text.startswith(prefix) else prefix + text


def op_definition(where: SiteOf) -> Callable[[type[_OpT]], type[_OpT]]:
    """`irdl_op_definition`, with every error of the op's own verifier prefixed by the
    site `where` names (each dialect's decorator: `core_op`, `realize_op`, `kernel_op`)."""

    def define(cls: type[_OpT]) -> type[_OpT]:
        cls = irdl_op_definition(cls)
        verify = cls.verify_

        def verify_(self: Operation) -> None:
            try:
                verify(self)
            except (VerifyException, ShapeError) as err:
                raise VerifyException(_with_site(self, err, where)) from err

        cls.verify_ = verify_  # type: ignore[method-assign]
        return cls

    return define


class NamedOp(NamedTuple):
    """An op class that differs from its base in its name (and class constants) only:
    `NamedOp("SumOp", "psk_core.sum", "Σ over the axis: `psk_core.sum %x …`.")`."""

    class_name: str
    name: str
    doc: str
    constants: Mapping[str, object] = {}


def named_ops(base: type[_OpT], define: Callable[[type[_OpT]], type[_OpT]], module: str,
              rows: Iterable[NamedOp]) -> dict[str, type[_OpT]]:
    """One subclass of `base` per row, defined by `define` (the dialect's decorator) as
    if it were written out in `module`; by class name. What xDSL would write as a class
    a name, where only the name differs."""
    classes: dict[str, type[_OpT]] = {}
    for row in rows:
        body = {"name": row.name, "__doc__": row.doc, "__module__": module,
                "__qualname__": row.class_name, **row.constants,
                "__annotations__": {k: ClassVar[type(v)] for k, v in row.constants.items()}}
        classes[row.class_name] = define(type(row.class_name, (base,), body))
    return classes


def function_ops(dialect: str, unary: type[_OpT], binary: type[_OpT],
                 define: Callable[[type[_OpT]], type[_OpT]], module: str) -> dict[str, type[_OpT]]:
    """One op class per element-wise function of the table (presk/ops) that has ops, by
    the function's name: `<dialect>.<name>`, a subclass of `unary` or `binary` by its
    arity, named `row.op_class` (`GeluSlopeOp`), defined by `define` in `module`. Its
    `FUNCTION` is the row's name."""
    classes: dict[str, type[_OpT]] = {}
    for f in ops.rows(core=True):
        operands = "%a" if f.arity == 1 else "%a, %b"
        doc = f"{f.doc[0].upper()}{f.doc[1:]}: `%r = {dialect}.{f.name} {operands} … : T`."
        row = NamedOp(f.op_class, f"{dialect}.{f.name}", doc, {"FUNCTION": f.name})
        base = unary if f.arity == 1 else binary
        classes[f.name] = named_ops(base, define, module, [row])[f.op_class]
    return classes


class SiteErrorsOp(IRDLOperation, ABC):
    """xDSL's structural checks (operand types, traits, a terminator's place) run before
    `verify_` and name no site: give them one. Errors `verify_` raised already have it,
    and `emit_error` has attached the annotated IR to them as a note."""

    @classmethod
    def site_of(cls, op: Operation) -> str:
        return site_of(op)

    def verify(self, verify_nested_ops: bool = True) -> None:
        try:
            super().verify(verify_nested_ops)
        except VerifyException as err:
            if getattr(err, "__notes__", None) or str(err).startswith(self.site_of(self) + ":"):
                raise
            self.emit_error(str(err), VerifyException(_with_site(self, err, self.site_of)))


# --------------------------------------------------------------------------------------
# The generic syntax of an op with a site
# --------------------------------------------------------------------------------------

_SITE = re.compile(r".+/%\d+")


class SiteOp(SiteErrorsOp, ABC):
    """An op of a function body, with its `site` ("RMSNorm.apply/%10") and, for a named
    let, its source `name` ("ms"). Textual form:

    `%r = dialect.op %a, %b {attrs} : (A, B) -> R`, or `: T` when the one operand and
    the result have the same type, or `: R` when there is no operand. A call-like op
    prints its callee first: `dialect.call @f(%a, %b) {…} : (A, B) -> R`.
    """

    site = attr_def(StringAttr)
    source_name = opt_attr_def(StringAttr, attr_name="name")

    HAS_CALLEE: ClassVar[bool] = False
    BARE_WITHOUT_OPERANDS: ClassVar[bool] = False
    """An op with neither operands nor results is written with nothing after its `:`."""

    def verify_(self) -> None:
        if self.results and not _SITE.fullmatch(self.site.data):
            raise VerifyException(f"site `{self.site.data}` is not of the form <function>/%<n>")

    def print(self, printer: Printer) -> None:
        if self.HAS_CALLEE:
            printer.print_string(" ")
            callee = self.attributes["callee"]
            assert isinstance(callee, SymbolRefAttr)
            printer.print_symbol_name(callee.root_reference)
            with printer.in_parens():
                printer.print_list(self.operands, printer.print_operand)
        elif self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        print_op_attrs(printer, self.attributes, reserved=("callee",))
        printer.print_string(" : ")
        self._print_signature(printer)

    def _print_signature(self, printer: Printer) -> None:
        operand_types = [o.type for o in self.operands]
        if not self.results:
            printer.print_list(operand_types, printer.print_attribute)
            return
        result = self.results[0].type
        if not operand_types or operand_types == [result]:
            printer.print_attribute(result)
            return
        with printer.in_parens():
            printer.print_list(operand_types, printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(result)

    @classmethod
    def parse(cls, parser: Parser) -> SiteOp:
        attrs: dict[str, Attribute] = {}
        if cls.HAS_CALLEE:
            attrs["callee"] = SymbolRefAttr(parser.parse_symbol_name())
            operands = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_unresolved_operand
            )
        else:
            operands = parser.parse_optional_undelimited_comma_separated_list(
                parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
            ) or []
        attrs |= parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        operand_types, result_types = cls._parse_signature(parser, operands)
        values = parser.resolve_operands(operands, operand_types, pos)
        return cls.create(operands=values, result_types=result_types, attributes=attrs)

    @classmethod
    def _parse_signature(
        cls, parser: Parser, operands: Sequence[UnresolvedOperand]
    ) -> tuple[list[Attribute], list[Attribute]]:
        has_result = bool(cls.get_irdl_definition().results)
        if not has_result:
            if not operands and cls.BARE_WITHOUT_OPERANDS:
                return [], []
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            return types, []
        inputs = parser.parse_optional_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        if inputs is not None:
            parser.parse_punctuation("->")
            return inputs, cls._parse_results(parser)
        single = parser.parse_type()
        return [single] * len(operands), [single]

    @classmethod
    def _parse_results(cls, parser: Parser) -> list[Attribute]:
        """The result types after `->`: one type (a dialect with several results widens it)."""
        return [parser.parse_type()]


class OneOperandOp(SiteOp, ABC):
    """A site op built from one operand and its result type: `site`, `name` and the
    keyword attributes that are not None (`axis=…`) are its attributes."""

    def __init__(self, operand: SSAValue | Operation, result_type: Attribute, *, site: str,
                 name: str | None = None, **attrs: Attribute | None):
        super().__init__(operands=[operand], result_types=[result_type],
                         attributes=site_attrs(site, name, **attrs))


class TwoOperandOp(SiteOp, ABC):
    """A site op built from two operands and its result type, like `OneOperandOp`."""

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 result_type: Attribute, *, site: str, name: str | None = None,
                 **attrs: Attribute | None):
        super().__init__(operands=[lhs, rhs], result_types=[result_type],
                         attributes=site_attrs(site, name, **attrs))


# --------------------------------------------------------------------------------------
# Function-like ops (the instances of Core, Realize and Kernel)
# --------------------------------------------------------------------------------------


FUNC_RESERVED = ("sym_name", "function_type")
"""The attributes a function-like op spells in its signature, not in `attributes {…}`."""


class NamedArguments:
    """What a function-like op whose block arguments are its arguments, named by its
    `arg_names`, answers (Core's and Realize's `func`)."""

    @property
    def args(self) -> tuple[BlockArgument, ...]:
        return self.body.block.args  # type: ignore[attr-defined]

    @property
    def arg_name_list(self) -> tuple[str, ...]:
        return tuple(n.data for n in self.arg_names)  # type: ignore[attr-defined]


def print_func_tail(printer: Printer, op: IRDLOperation) -> None:
    """What follows a function-like op's signature: its other attributes, then its body."""
    print_op_attrs(printer, op.attributes, reserved=FUNC_RESERVED, keyword=True)
    printer.print_string(" ")
    printer.print_region(op.body, print_entry_block_args=False, print_empty_block=False)


def parse_func_like(parser: Parser) -> tuple[dict[str, Attribute], list[Attribute], Region]:
    """A function-like op's `@name(args) -> results attributes {…} {body}`: its attributes
    (name and type among them), its argument types and its body."""
    name, inputs, outputs, region, extra, _, _ = parse_func_op_like(
        parser, reserved_attr_names=FUNC_RESERVED
    )
    attrs = {
        "sym_name": StringAttr(name),
        "function_type": FunctionType.from_lists(inputs, outputs),
    } | (extra.data if extra is not None else {})
    return attrs, inputs, region


# --------------------------------------------------------------------------------------
# Modules
# --------------------------------------------------------------------------------------


def replace_module_body(module: ModuleOp, new: ModuleOp) -> None:
    """Give `module` the ops of `new` in place of its own: what a pass does that builds
    its result as a fresh module (recording an entry, lowering it to kernels). `module`'s
    own attributes stay."""
    for old in list(module.ops):
        old.detach()
        old.erase()
    for op in list(new.ops):
        op.detach()
        module.body.block.add_op(op)


# --------------------------------------------------------------------------------------
# Verifying what a conversion built
# --------------------------------------------------------------------------------------

_VERIFYING: ContextVar[bool] = ContextVar("presk_verifying", default=True)


def verify_built(module: ModuleOp) -> None:
    """`module.verify()` — what every conversion does to the module it built — unless the
    caller is inside `unverified()`."""
    if _VERIFYING.get():
        module.verify()


@contextmanager
def unverified() -> Iterator[None]:
    """The conversions inside skip `verify_built`: for a caller that records one program
    many times under realizations that differ only in types, after one verified recording
    (the solver's candidates: a third of a candidate's recording was its verification),
    and that never runs what it recorded unverified. Like MLIR's
    `PassManager::enableVerifier(false)`."""
    token = _VERIFYING.set(False)
    try:
        yield
    finally:
        _VERIFYING.reset(token)
