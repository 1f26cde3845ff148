"""PSK-Core (`psk_core`): the program after elaboration, in A-normal form.

One typed operation per SSA value. The element type is ℝ, an abstract real: a tensor
type carries axes (an optional name and a size, a literal or a dim symbol), optionally
after `...`, a polymorphic prefix. Functions are polymorphic in their module's dims,
parameters are trees read by `field`, and a stacked tree is consumed by `fold`.

Every op in a function body carries its `site` ("RMSNorm.apply/%10") and, for a named
let, its source `name` ("ms"); every verifier error starts with the site. Shapes are
checked with the shared algebra of `presk.shapes`, the one the frontend uses.

Strings print as raw UTF-8 (`"γ"`), not xDSL's byte escapes: xDSL 0.75 reads an escaped
non-ASCII string back as a `BytesAttr`, which would break the round trip of names like
θ and γ. That is why the ops here print their own attribute dictionaries.
"""

from __future__ import annotations

import re
from abc import ABC
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ClassVar, TypeVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float64Type,
    FloatAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NoneAttr,
    StringAttr,
    SymbolRefAttr,
    TupleType,
    UnitAttr,
    f64,
    i64,
)
from xdsl.dialects.utils import parse_func_op_like
from xdsl.ir import (
    Attribute,
    Block,
    BlockArgument,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    attr_def,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    CallableOpInterface,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    Pure,
    ReturnLike,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from presk import shapes
from presk.shapes import Axis, ShapeError, Size, TensorType

# --------------------------------------------------------------------------------------
# Names and sizes in the textual form
# --------------------------------------------------------------------------------------

_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
# What the MLIR lexer accepts between quotes without an escape.
_RAW_STRING = re.compile(r'[^"\\\n\v\f]*')


def _print_name(printer: Printer, name: str) -> None:
    """An ASCII identifier bare, anything else (θ, γ) quoted as raw UTF-8."""
    if _BARE_NAME.fullmatch(name):
        printer.print_string(name)
    else:
        _print_string(printer, name)


def _print_string(printer: Printer, text: str) -> None:
    if _RAW_STRING.fullmatch(text):
        printer.print_string(f'"{text}"')
    else:
        printer.print_string_literal(text)


def _parse_optional_name(parser: AttrParser) -> str | None:
    name = parser.parse_optional_identifier()
    return name if name is not None else parser.parse_optional_str_literal()


def _parse_name(parser: AttrParser, what: str) -> str:
    return parser.expect(lambda: _parse_optional_name(parser), f"Expected {what}")


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


def _print_size(printer: Printer, size: Size) -> None:
    if isinstance(size, int):
        printer.print_string(str(size))
    else:
        _print_name(printer, size)


def _parse_size(parser: AttrParser) -> Size:
    value = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if value is not None:
        return value
    return _parse_name(parser, "a size: an integer or a dim symbol")


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
            _print_name(printer, self.label.data)
            printer.print_string(": ")
        _print_size(printer, size_value(self.size))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            axis = _parse_axis(parser)
        return (axis.label, axis.size)


def _parse_axis(parser: AttrParser) -> AxisAttr:
    """`size` or `name: size`; a bare identifier alone is a dim symbol."""
    value = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
    if value is not None:
        return AxisAttr(NoneAttr(), IntAttr(value))
    name = _parse_name(parser, "an axis: `...`, a size, or `name: size`")
    if parser.parse_optional_punctuation(":") is None:
        return AxisAttr(NoneAttr(), StringAttr(name))
    return AxisAttr(StringAttr(name), size_attr(_parse_size(parser)))


@irdl_attr_definition
class TensorAttr(ParametrizedAttribute, TypeAttribute):
    """ℝ[axes]: `!psk_core.tensor<..., model: D, 4>`; the scalar is `!psk_core.tensor<>`."""

    name = "psk_core.tensor"

    axes: ArrayAttr[AxisAttr]
    prefix: IntAttr
    """1 when the type starts with `...`, the polymorphic prefix."""

    @classmethod
    def from_shape(cls, shape: TensorType) -> TensorAttr:
        return cls(
            ArrayAttr(AxisAttr.from_axis(a) for a in shape.axes), IntAttr(int(shape.prefix))
        )

    @classmethod
    def get(cls, *axes: Axis | tuple[str | None, Size] | Size, prefix: bool = False) -> TensorAttr:
        """`TensorAttr.get(("model", "D"), 4, prefix=True)` is ℝ[..., model: D, 4]."""
        return cls.from_shape(TensorType(tuple(_as_axis(a) for a in axes), prefix))

    @classmethod
    def scalar(cls) -> TensorAttr:
        return cls.from_shape(shapes.SCALAR)

    @property
    def shape(self) -> TensorType:
        return TensorType(tuple(a.axis for a in self.axes), bool(self.prefix.data))

    def verify(self) -> None:
        if self.prefix.data not in (0, 1):
            raise VerifyException(f"the prefix flag of {self} is {self.prefix.data}, not 0 or 1")
        names = self.shape.names()
        if len(names) != len(set(names)):
            raise VerifyException(f"an axis name repeats in {self.shape}")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            if self.prefix.data:
                printer.print_string("..." + (", " if self.axes.data else ""))
            printer.print_list(self.axes.data, lambda a: a.print_axis(printer))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        if parser.parse_optional_punctuation(">") is not None:
            return (ArrayAttr(()), IntAttr(0))
        prefix = parser.parse_optional_punctuation("...") is not None
        axes: list[AxisAttr] = []
        if not prefix or parser.parse_optional_punctuation(",") is not None:
            axes = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, lambda: _parse_axis(parser)
            )
        end = parser.pos
        parser.parse_punctuation(">", " to close a tensor type (`...` comes first)")
        names = [a.label.data for a in axes if isinstance(a.label, StringAttr)]
        if len(names) != len(set(names)):
            # A parse error rather than the verifier's exception: it points at the text.
            parser.raise_error("an axis name repeats in the tensor type", end, end + 1)
        return (ArrayAttr(axes), IntAttr(int(prefix)))


def _as_axis(axis: Axis | tuple[str | None, Size] | Size) -> Axis:
    if isinstance(axis, Axis):
        return axis
    if isinstance(axis, tuple):
        return Axis(axis[0], axis[1])
    return Axis(None, axis)


@irdl_attr_definition
class ParamsAttr(ParametrizedAttribute, TypeAttribute):
    """The parameter tree of a module instance, optionally stacked.

    `!psk_core.params<Linear{In, Out}>`, `!psk_core.params<Block>`,
    `!psk_core.params<stack{3}(Block)>`. `stack` lists the counts outermost first.
    """

    name = "psk_core.params"

    module: StringAttr
    dims: ArrayAttr[IntAttr | StringAttr]
    stack: ArrayAttr[IntAttr | StringAttr]

    @classmethod
    def get(cls, module: str, dims: Sequence[Size] = (), stack: Sequence[Size] = ()) -> ParamsAttr:
        return cls(
            StringAttr(module),
            ArrayAttr(size_attr(s) for s in dims),
            ArrayAttr(size_attr(s) for s in stack),
        )

    @property
    def module_name(self) -> str:
        return self.module.data

    @property
    def dim_sizes(self) -> tuple[Size, ...]:
        return tuple(size_value(s) for s in self.dims)

    @property
    def stack_counts(self) -> tuple[Size, ...]:
        return tuple(size_value(s) for s in self.stack)

    def unstacked(self) -> ParamsAttr:
        """One element of a stacked tree: the outermost count dropped."""
        return ParamsAttr.get(self.module_name, self.dim_sizes, self.stack_counts[1:])

    def substitute(self, env: Mapping[str, Size]) -> ParamsAttr:
        def sub(s: Size) -> Size:
            return env.get(s, s) if isinstance(s, str) else s

        return ParamsAttr.get(
            self.module_name,
            [sub(s) for s in self.dim_sizes],
            [sub(s) for s in self.stack_counts],
        )

    def verify(self) -> None:
        if not self.module.data:
            raise VerifyException("a params type needs a module name")
        for count in self.stack_counts:
            if isinstance(count, int) and count < 0:
                raise VerifyException(f"stack count {count} is negative")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            for count in self.stack_counts:
                printer.print_string("stack{")
                _print_size(printer, count)
                printer.print_string("}(")
            _print_name(printer, self.module_name)
            if self.dims.data:
                with printer.in_braces():
                    printer.print_list(self.dim_sizes, lambda s: _print_size(printer, s))
            printer.print_string(")" * len(self.stack))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            module, dims, stack = _parse_params_body(parser)
        params = ParamsAttr.get(module, dims, stack)
        return (params.module, params.dims, params.stack)


def _parse_params_body(parser: AttrParser) -> tuple[str, list[Size], list[Size]]:
    """`stack{n}(body)` or `Module` or `Module{sizes}`; a module may be called `stack`."""
    name = _parse_name(parser, "a module name or `stack{n}(…)`")
    sizes: list[Size] = []
    if parser.parse_optional_punctuation("{") is not None:
        sizes = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, lambda: _parse_size(parser)
        )
        parser.parse_punctuation("}")
    if name == "stack" and len(sizes) == 1 and parser.parse_optional_punctuation("("):
        module, dims, stack = _parse_params_body(parser)
        parser.parse_punctuation(")")
        return module, dims, [sizes[0], *stack]
    return name, sizes, []


# --------------------------------------------------------------------------------------
# The type algebra on attributes
# --------------------------------------------------------------------------------------


def type_text(t: Attribute) -> str:
    """A type in the listing's notation: ℝ[..., model: D], params Linear{In, Out}, f64."""
    if isinstance(t, TensorAttr):
        return str(t.shape)
    if isinstance(t, ParamsAttr):
        return "params " + _params_text(t)
    if isinstance(t, TupleType):
        return "(" + ", ".join(type_text(e) for e in t.types) + ")"
    if isinstance(t, IntegerType):
        return "nat"
    return str(t)


def _params_text(t: ParamsAttr) -> str:
    text = t.module_name
    if t.dims.data:
        text += "{" + ", ".join(str(s) for s in t.dim_sizes) + "}"
    for count in reversed(t.stack_counts):
        text = f"stack{{{count}}}({text})"
    return text


def substitute_type(t: Attribute, env: Mapping[str, Size]) -> Attribute:
    """Replace dim symbols by what `env` binds them to, through tuples and params."""
    if isinstance(t, TensorAttr):
        return TensorAttr.from_shape(t.shape.substitute(env))
    if isinstance(t, ParamsAttr):
        return t.substitute(env)
    if isinstance(t, TupleType):
        return TupleType([substitute_type(e, env) for e in t.types])
    return t


def apply_prefix(t: Attribute, binding: TensorType | None) -> Attribute:
    """Replace the `...` of a callee's type by what it binds to at a call."""
    if isinstance(t, TupleType):
        return TupleType([apply_prefix(e, binding) for e in t.types])
    if not isinstance(t, TensorAttr) or not t.shape.prefix:
        return t
    if binding is None:
        raise ShapeError(f"the `...` of {t.shape} is bound by no argument")
    return TensorAttr.from_shape(t.shape.with_prefix(binding))


def type_symbols(t: Attribute) -> set[str]:
    """The dim symbols a type mentions."""
    if isinstance(t, TensorAttr):
        return {a.size for a in t.shape.axes if isinstance(a.size, str)}
    if isinstance(t, ParamsAttr):
        return {s for s in t.dim_sizes + t.stack_counts if isinstance(s, str)}
    if isinstance(t, TupleType):
        return set().union(*(type_symbols(e) for e in t.types))
    return set()


def type_conforms(actual: Attribute, declared: Attribute) -> bool:
    """A value of type `actual` may stand where `declared` is promised (see shapes.conforms)."""
    if isinstance(actual, TensorAttr) and isinstance(declared, TensorAttr):
        return shapes.conforms(actual.shape, declared.shape)
    if isinstance(actual, TupleType) and isinstance(declared, TupleType):
        return len(actual.types) == len(declared.types) and all(
            type_conforms(a, d) for a, d in zip(actual.types, declared.types)
        )
    return actual == declared


class Binder:
    """Matches a callee's parameter types against argument types, at given dims.

    `env` maps the callee's dim symbols to the caller's sizes; `prefix` is what the
    callee's `...` stands for, the same for every argument that has one.
    """

    def __init__(self, symbols: Iterable[str], env: Mapping[str, Size]):
        self.symbols = frozenset(symbols)
        self.env: dict[str, Size] = dict(env)
        self.prefix: TensorType | None = None

    def bind(self, param: Attribute, arg: Attribute) -> None:
        if isinstance(param, TensorAttr) and isinstance(arg, TensorAttr):
            binding = shapes.bind(param.shape, arg.shape, self.symbols, self.env)
            if binding is not None:
                self._bind_prefix(binding)
        elif isinstance(param, ParamsAttr) and isinstance(arg, ParamsAttr):
            self._bind_params(param, arg)
        elif isinstance(param, TupleType) and isinstance(arg, TupleType):
            if len(param.types) != len(arg.types):
                raise ShapeError(f"{type_text(arg)} does not fit {type_text(param)}")
            for p, a in zip(param.types, arg.types):
                self.bind(p, a)
        elif param != arg:
            raise ShapeError(f"{type_text(arg)} does not fit {type_text(param)}")

    def result(self, t: Attribute) -> Attribute:
        """The callee's type `t` seen from the caller."""
        return apply_prefix(substitute_type(t, self.env), self.prefix)

    def _bind_size(self, p: Size, x: Size, param: ParamsAttr, arg: ParamsAttr) -> None:
        bound = self.env.setdefault(p, x) if isinstance(p, str) and p in self.symbols else p
        if bound != x:
            at = f" with {p} = {bound}" if bound != p else ""
            raise ShapeError(f"{type_text(arg)} does not fit {type_text(param)}{at}")

    def _bind_params(self, param: ParamsAttr, arg: ParamsAttr) -> None:
        same_form = (
            param.module_name == arg.module_name
            and len(param.dims) == len(arg.dims)
            and len(param.stack) == len(arg.stack)
        )
        if not same_form:
            raise ShapeError(f"{type_text(arg)} does not fit {type_text(param)}")
        for p, x in zip(param.dim_sizes + param.stack_counts, arg.dim_sizes + arg.stack_counts):
            self._bind_size(p, x, param, arg)

    def _bind_prefix(self, binding: TensorType) -> None:
        if self.prefix is None:
            self.prefix = binding
        elif not (shapes.conforms(binding, self.prefix) or shapes.conforms(self.prefix, binding)):
            raise ShapeError(f"`...` stands for {self.prefix} and for {binding} at once")


# --------------------------------------------------------------------------------------
# Printing and parsing the pieces every op shares
# --------------------------------------------------------------------------------------


def _print_attr_value(printer: Printer, attr: Attribute) -> None:
    if isinstance(attr, StringAttr):
        _print_string(printer, attr.data)
    elif isinstance(attr, ArrayAttr):
        with printer.in_square_brackets():
            printer.print_list(attr.data, lambda a: _print_attr_value(printer, a))
    elif isinstance(attr, DictionaryAttr):
        _print_attr_dict(printer, attr.data)
    else:
        printer.print_attribute(attr)


def _print_attr_dict(printer: Printer, attrs: Mapping[str, Attribute]) -> None:
    def entry(item: tuple[str, Attribute]) -> None:
        printer.print_identifier_or_string_literal(item[0])
        if not isinstance(item[1], UnitAttr):
            printer.print_string(" = ")
            _print_attr_value(printer, item[1])

    with printer.in_braces():
        printer.print_list(attrs.items(), entry)


def _print_op_attrs(
    printer: Printer, attrs: Mapping[str, Attribute], reserved: Iterable[str] = (),
    keyword: bool = False,
) -> None:
    """The op's attributes, sorted by name so that the text does not depend on how the
    op was built, and without the ones its syntax already shows."""
    shown = {k: attrs[k] for k in sorted(attrs) if k not in reserved}
    if shown:
        printer.print_string(" attributes " if keyword else " ")
        _print_attr_dict(printer, shown)


def _site_attrs(site: str, name: str | None, **more: Attribute | None) -> dict[str, Attribute]:
    attrs: dict[str, Attribute] = {"site": StringAttr(site)}
    if name is not None:
        attrs["name"] = StringAttr(name)
    attrs.update({k: v for k, v in more.items() if v is not None})
    return attrs


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


_OpT = TypeVar("_OpT", bound=IRDLOperation)


def site_of(op: Operation) -> str:
    """The site an error about `op` names: its `site`, or what identifies a declaration."""
    site = op.attributes.get("site")
    if isinstance(site, StringAttr):
        return site.data
    sym = op.attributes.get("sym_name")
    if isinstance(sym, StringAttr):
        return sym.data
    field = op.attributes.get("field")
    module = op.parent_op()
    if isinstance(field, StringAttr) and isinstance(module, ModuleDeclOp):
        return f"{module.sym_name.data}.{field.data}"
    return "(no site)"


def site_message(op: Operation, err: Exception) -> str:
    """`<site>: <op>: <what is wrong>`, the form of every psk_core verifier error."""
    return f"{site_of(op)}: {op.name}: {err}"


def core_op(cls: type[_OpT]) -> type[_OpT]:
    """`irdl_op_definition`, with every verifier error (IRDL's own too) prefixed by the
    op's site: the thread a user follows from an error back to the program."""
    cls = irdl_op_definition(cls)
    verify = cls.verify_

    def verify_(self: Operation) -> None:
        try:
            verify(self)
        except (VerifyException, ShapeError) as err:
            raise VerifyException(site_message(self, err)) from err

    cls.verify_ = verify_  # type: ignore[method-assign]
    return cls


_SITE = re.compile(r".+/%\d+")


class CoreOp(IRDLOperation, ABC):
    """An op of a function body. Textual form:

    `%r = psk_core.op %a, %b {attrs} : (A, B) -> R`, or `: T` when the one operand and
    the result have the same type, or `: R` when there is no operand. A call-like op
    prints its callee first: `psk_core.call @f(%a, %b) {…} : (A, B) -> R`.
    """

    site = attr_def(StringAttr)
    source_name = opt_attr_def(StringAttr, attr_name="name")

    HAS_CALLEE: ClassVar[bool] = False

    def verify(self, verify_nested_ops: bool = True) -> None:
        # xDSL's structural checks (a terminator's place, erased operands) run before
        # verify_ and name no site; give them one. Errors verify_ raised already have it,
        # and emit_error has attached the annotated IR to them as a note.
        try:
            super().verify(verify_nested_ops)
        except VerifyException as err:
            if getattr(err, "__notes__", None):
                raise
            self.emit_error(str(err), VerifyException(site_message(self, err)))

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
        _print_op_attrs(printer, self.attributes, reserved=("callee",))
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
    def parse(cls, parser: Parser) -> CoreOp:
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
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            return types, []
        inputs = parser.parse_optional_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        if inputs is not None:
            parser.parse_punctuation("->")
            return inputs, [parser.parse_type()]
        single = parser.parse_type()
        return [single] * len(operands), [single]


# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# Reductions, softmax, contraction, broadcast
# --------------------------------------------------------------------------------------


class ReduceOp(CoreOp, ABC):
    """A reduction over the axis named `axis`, or over every axis when it is absent."""

    operand = operand_def(TensorAttr)
    result = result_def(TensorAttr)
    axis = opt_attr_def(StringAttr)

    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue | Operation, axis: str | None = None, *, site: str,
        name: str | None = None,
    ):
        result = _infer(site, lambda: self.infer(_value_type(operand), axis))
        axis_attr = StringAttr(axis) if axis is not None else None
        super().__init__(
            operands=[operand], result_types=[result],
            attributes=_site_attrs(site, name, axis=axis_attr),
        )

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


@core_op
class SumOp(ReduceOp):
    name = "psk_core.sum"


@core_op
class MeanOp(ReduceOp):
    name = "psk_core.mean"


@core_op
class MaxOp(ReduceOp):
    name = "psk_core.max"


@core_op
class MinOp(ReduceOp):
    name = "psk_core.min"


@core_op
class LogSumExpOp(ReduceOp):
    name = "psk_core.logsumexp"


@core_op
class SoftmaxOp(UnaryOp):
    """Softmax along the axis named `axis`; the result has the operand's type."""

    name = "psk_core.softmax"

    axis = attr_def(StringAttr)

    def __init__(
        self, operand: SSAValue | Operation, axis: str, *, site: str, name: str | None = None
    ):
        self._init_unary(operand, _site_attrs(site, name, axis=StringAttr(axis)))

    def verify_(self) -> None:
        super().verify_()
        shapes.reduce(self.operand.type.shape, self.axis.data)


@core_op
class DotOp(BinaryOp):
    """`lhs · rhs`: the last axis of `lhs` contracts with the first of `rhs`."""

    name = "psk_core.dot"

    @classmethod
    def infer(cls, lhs: Attribute, rhs: Attribute) -> TensorAttr:
        assert isinstance(lhs, TensorAttr) and isinstance(rhs, TensorAttr)
        return TensorAttr.from_shape(shapes.contract(lhs.shape, rhs.shape))


@core_op
class BroadcastOp(CoreOp):
    """Broadcast or align a value to the result type, which it must broadcast to."""

    name = "psk_core.broadcast"

    operand = operand_def(TensorAttr)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue | Operation, result_type: TensorAttr, *, site: str,
        name: str | None = None,
    ):
        super().__init__(
            operands=[operand], result_types=[result_type], attributes=_site_attrs(site, name)
        )

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
    """`real(eps)`: a hyperparameter (an f64, or a nat) as ℝ[]."""

    name = "psk_core.real"

    operand = operand_def(Float64Type | IntegerType)
    result = result_def(TensorAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None):
        super().__init__(
            operands=[operand], result_types=[TensorAttr.scalar()],
            attributes=_site_attrs(site, name),
        )

    def verify_(self) -> None:
        super().verify_()
        if not self.result.type.shape.is_scalar:
            raise VerifyException(f"the result {type_text(self.result.type)} is not ℝ[]")


@core_op
class ConstantOp(CoreOp):
    """A literal: an f64 (a hyperparameter's value), a nat (as i64, its value integral),
    or ℝ[]."""

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
            attributes=_site_attrs(site, name, value=FloatAttr(value, f64)),
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
    """Pack values into a tuple."""

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
            attributes=_site_attrs(site, name),
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
    """Unpack element `index` of a tuple (`batch.0`)."""

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
            attributes=_site_attrs(site, name, index=IntegerAttr(index, i64)),
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
# Parameter trees: module declarations and field reads
# --------------------------------------------------------------------------------------


class FieldDeclOp(IRDLOperation, ABC):
    """An entry of a module declaration: `psk_core.param "w" : !psk_core.tensor<In, Out>`."""

    field = attr_def(StringAttr)
    decl_type = attr_def(TypeAttribute, attr_name="type")

    traits = lazy_traits_def(lambda: (HasParent(ModuleDeclOp),))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_string(printer, self.field.data)
        _print_op_attrs(printer, self.attributes, reserved=("field", "type"))
        printer.print_string(" : ")
        printer.print_attribute(self.decl_type)

    @classmethod
    def parse(cls, parser: Parser) -> FieldDeclOp:
        field = parser.parse_str_literal("a field name")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        attrs |= {"field": StringAttr(field), "type": parser.parse_type()}
        return cls.create(attributes=attrs)


@core_op
class ParamDeclOp(FieldDeclOp):
    """A parameter tensor of a module, in the module's dims; `init` names its initializer."""

    name = "psk_core.param"

    init = opt_attr_def(StringAttr)

    def __init__(self, field: str, decl_type: TensorAttr, init: str | None = None):
        attrs: dict[str, Attribute] = {"field": StringAttr(field), "type": decl_type}
        if init is not None:
            attrs["init"] = StringAttr(init)
        super().__init__(attributes=attrs)

    def verify_(self) -> None:
        if not isinstance(self.decl_type, TensorAttr) or self.decl_type.shape.prefix:
            raise VerifyException(
                f"a parameter is a tensor without `...`, not {type_text(self.decl_type)}"
            )


@core_op
class UseDeclOp(FieldDeclOp):
    """A sub-module instance (`use proj : Linear{D, D}`), possibly stacked."""

    name = "psk_core.use"

    def __init__(self, field: str, decl_type: ParamsAttr):
        super().__init__(attributes={"field": StringAttr(field), "type": decl_type})

    def verify_(self) -> None:
        if not isinstance(self.decl_type, ParamsAttr):
            raise VerifyException(f"a use holds a params type, not {type_text(self.decl_type)}")


@core_op
class ModuleDeclOp(IRDLOperation):
    """A module's parameter tree, so that field reads can be checked:

    psk_core.module @Linear attributes {dims = ["In", "Out"]} {
      psk_core.param "w" {init = "xavier_uniform"} : !psk_core.tensor<In, Out>
    }
    """

    name = "psk_core.module"

    sym_name = attr_def(StringAttr)
    dims = opt_attr_def(ArrayAttr[StringAttr])
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), NoTerminator(), IsolatedFromAbove())

    def __init__(
        self, name: str, dims: Sequence[str] = (), entries: Sequence[FieldDeclOp] = ()
    ):
        attrs: dict[str, Attribute] = {"sym_name": StringAttr(name)}
        if (dims_attr := _names_attr(dims)) is not None:
            attrs["dims"] = dims_attr
        super().__init__(attributes=attrs, regions=[Region(Block(entries))])

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.data for d in self.dims) if self.dims is not None else ()

    @property
    def entries(self) -> list[FieldDeclOp]:
        return [op for op in self.body.block.ops if isinstance(op, FieldDeclOp)]

    def entry(self, field: str) -> FieldDeclOp | None:
        return next((e for e in self.entries if e.field.data == field), None)

    def verify_(self) -> None:
        dims = self.dim_names
        if len(set(dims)) != len(dims):
            raise VerifyException(f"a dim repeats in {list(dims)}")
        fields = [e.field.data for e in self.entries]
        if len(set(fields)) != len(fields):
            raise VerifyException(f"a field repeats in {fields}")
        for e in self.entries:
            if stray := type_symbols(e.decl_type) - set(dims):
                raise VerifyException(
                    f"field `{e.field.data}` uses {sorted(stray)}, not dims of the module"
                )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name)
        _print_op_attrs(printer, self.attributes, reserved=("sym_name",), keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser) -> ModuleDeclOp:
        name = parser.parse_symbol_name()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        region = parser.parse_region()
        if not region.blocks:
            region.add_block(Block())
        attributes = {"sym_name": name} | (attrs.data if attrs is not None else {})
        return cls.create(attributes=attributes, regions=[region])


def lookup_module(op: Operation, module: str) -> ModuleDeclOp:
    """The declaration of `module` in the symbol table around `op`."""
    found = _lookup(op, module)
    if not isinstance(found, ModuleDeclOp):
        raise VerifyException(f"no psk_core.module @{module} is declared")
    return found


def lookup_function(op: Operation, callee: str) -> FuncOp:
    found = _lookup(op, callee)
    if not isinstance(found, FuncOp):
        raise VerifyException(f"no psk_core.func @{callee} is defined")
    return found


def _lookup(op: Operation, name: str) -> Operation | None:
    try:
        return SymbolTable.lookup_symbol(op, name)
    except ValueError as err:  # no symbol table above `op`: it is not in a module yet
        raise VerifyException(f"@{name} cannot be looked up outside a module") from err


def field_type(params: ParamsAttr, field: str, decl: ModuleDeclOp) -> Attribute:
    """The type of `params.field`: the declared type at the instance's dims. A stacked
    tree's tensors gain its counts as leading axes; its sub-trees stay stacked."""
    if len(decl.dim_names) != len(params.dims):
        raise VerifyException(
            f"{type_text(params)} gives {len(params.dims)} dims to module "
            f"{decl.sym_name.data}, which has {len(decl.dim_names)}"
        )
    entry = decl.entry(field)
    if entry is None:
        raise VerifyException(f"module {decl.sym_name.data} has no field `{field}`")
    declared = substitute_type(entry.decl_type, dict(zip(decl.dim_names, params.dim_sizes)))
    stack = params.stack_counts
    if isinstance(declared, ParamsAttr):
        return ParamsAttr.get(
            declared.module_name, declared.dim_sizes, stack + declared.stack_counts
        )
    assert isinstance(declared, TensorAttr)
    shape = declared.shape
    return TensorAttr.from_shape(TensorType(tuple(Axis(None, n) for n in stack) + shape.axes))


@core_op
class FieldOp(CoreOp):
    """Read a field of a parameter tree: `θ.w`."""

    name = "psk_core.field"

    operand = operand_def(ParamsAttr)
    field = attr_def(StringAttr)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue | Operation, field: str, *, site: str, name: str | None = None,
        result_type: Attribute | None = None, decl: ModuleDeclOp | None = None,
    ):
        """Give the result type, or the module's declaration to infer it from."""
        if result_type is None:
            assert decl is not None, "FieldOp needs result_type or decl"
            params = _value_type(operand)
            assert isinstance(params, ParamsAttr)
            result_type = _infer(site, lambda: field_type(params, field, decl))
        super().__init__(
            operands=[operand], result_types=[result_type],
            attributes=_site_attrs(site, name, field=StringAttr(field)),
        )

    def verify_(self) -> None:
        super().verify_()
        params = self.operand.type
        expected = field_type(params, self.field.data, lookup_module(self, params.module_name))
        if not type_conforms(expected, self.result.type):
            raise VerifyException(
                f"field `{self.field.data}` of {type_text(params)} is "
                f"{type_text(expected)}, not {type_text(self.result.type)}"
            )


# --------------------------------------------------------------------------------------
# Functions, calls, folds
# --------------------------------------------------------------------------------------


class _FuncCallable(CallableOpInterface):
    @classmethod
    def get_callable_region(cls, op: Operation) -> Region:
        assert isinstance(op, FuncOp)
        return op.body

    @classmethod
    def get_argument_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.inputs.data

    @classmethod
    def get_result_types(cls, op: Operation) -> tuple[Attribute, ...]:
        assert isinstance(op, FuncOp)
        return op.function_type.outputs.data


@core_op
class FuncOp(IRDLOperation):
    """A function, polymorphic in `dims`; its block arguments are its arguments.

    psk_core.func @Linear.apply(%0 : !psk_core.params<Linear{In, Out}>, %1 : …) -> …
        attributes {arg_names = ["θ", "x"], dims = ["In", "Out"]} { … }
    """

    name = "psk_core.func"

    sym_name = attr_def(StringAttr)
    function_type = attr_def(FunctionType)
    arg_names = attr_def(ArrayAttr[StringAttr])
    dims = opt_attr_def(ArrayAttr[StringAttr])
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), _FuncCallable())

    def __init__(
        self, name: str, args: Sequence[tuple[str, Attribute]], result_type: Attribute,
        dims: Sequence[str] = (),
    ):
        """`args` pairs each argument's source name with its type."""
        arg_types = [t for _, t in args]
        attrs: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(arg_types, [result_type]),
            "arg_names": ArrayAttr(StringAttr(n) for n, _ in args),
        }
        if (dims_attr := _names_attr(dims)) is not None:
            attrs["dims"] = dims_attr
        super().__init__(attributes=attrs, regions=[Region(Block(arg_types=arg_types))])

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.data for d in self.dims) if self.dims is not None else ()

    @property
    def arg_name_list(self) -> tuple[str, ...]:
        return tuple(n.data for n in self.arg_names)

    @property
    def args(self) -> tuple[BlockArgument, ...]:
        return self.body.block.args

    @property
    def result_type(self) -> Attribute:
        return self.function_type.outputs.data[0]

    def verify_(self) -> None:
        inputs = self.function_type.inputs.data
        if tuple(a.type for a in self.args) != inputs:
            raise VerifyException("the block arguments' types are not the function's inputs")
        if len(self.function_type.outputs) != 1:
            raise VerifyException("a function returns exactly one value")
        names = self.arg_name_list
        if len(names) != len(inputs) or len(set(names)) != len(names):
            raise VerifyException(f"arg_names {list(names)} do not name {len(inputs)} arguments")
        dims = self.dim_names
        if len(set(dims)) != len(dims):
            raise VerifyException(f"a dim repeats in {list(dims)}")
        for t in (*inputs, self.result_type):
            if stray := type_symbols(t) - set(dims):
                raise VerifyException(
                    f"{type_text(t)} uses {sorted(stray)}, which are not among the dims "
                    f"{list(dims)}"
                )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name)
        with printer.in_parens():
            printer.print_list(self.args, printer.print_block_argument)
        printer.print_string(" -> ")
        printer.print_attribute(self.result_type)
        _print_op_attrs(
            printer, self.attributes, reserved=("sym_name", "function_type"), keyword=True
        )
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        name, inputs, outputs, region, extra, _, _ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type")
        )
        attrs = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(inputs, outputs),
        } | (extra.data if extra is not None else {})
        return cls.create(attributes=attrs, regions=[region])


@core_op
class ReturnOp(CoreOp):
    """`psk_core.return %v {site = "f/return"} : T`"""

    name = "psk_core.return"

    value = operand_def()

    traits = traits_def(IsTerminator(), ReturnLike(), HasParent(FuncOp))

    def __init__(self, value: SSAValue | Operation, *, site: str):
        super().__init__(operands=[value], attributes={"site": StringAttr(site)})

    def verify_(self) -> None:
        super().verify_()
        func = self.parent_op()
        assert isinstance(func, FuncOp)
        if not type_conforms(self.value.type, func.result_type):
            raise VerifyException(
                f"{type_text(self.value.type)} does not conform to the result "
                f"{type_text(func.result_type)} of {func.sym_name.data}"
            )


def _callee_binder(callee: FuncOp, dims: Mapping[str, Size]) -> Binder:
    if set(dims) != set(callee.dim_names):
        raise VerifyException(
            f"@{callee.sym_name.data} takes dims {list(callee.dim_names)}, given {sorted(dims)}"
        )
    return Binder(callee.dim_names, dims)


def _bind_args(
    binder: Binder, callee: FuncOp, params: Sequence[Attribute], args: Sequence[Attribute]
) -> None:
    if len(params) != len(args):
        raise VerifyException(
            f"@{callee.sym_name.data} takes {len(params)} arguments, given {len(args)}"
        )
    names = callee.arg_name_list
    for i, (p, a) in enumerate(zip(params, args)):
        try:
            binder.bind(p, a)
        except ShapeError as err:
            raise VerifyException(
                f"argument `{names[i]}` of @{callee.sym_name.data}: {err}"
            ) from err


def call_result_type(
    callee: FuncOp, arg_types: Sequence[Attribute], dims: Mapping[str, Size]
) -> Attribute:
    """The type a call of `callee` at `dims` returns: the callee's result at those dims,
    its `...` replaced by what the arguments bind it to."""
    binder = _callee_binder(callee, dims)
    _bind_args(binder, callee, callee.function_type.inputs.data, arg_types)
    return binder.result(callee.result_type)


def fold_result_type(
    callee: FuncOp, stacked: Attribute, acc: Attribute, dims: Mapping[str, Size]
) -> Attribute:
    """Check a fold of `callee` over a stacked tree and return the accumulator's type."""
    if not isinstance(stacked, ParamsAttr) or not stacked.stack.data:
        raise VerifyException(f"a fold runs over a stacked params type, not {type_text(stacked)}")
    binder = _callee_binder(callee, dims)
    _bind_args(binder, callee, callee.function_type.inputs.data, [stacked.unstacked(), acc])
    result = binder.result(callee.result_type)
    if not type_conforms(result, acc):
        raise VerifyException(
            f"@{callee.sym_name.data} returns {type_text(result)}, not the accumulator's "
            f"type {type_text(acc)}"
        )
    return acc


class _CallLike(CoreOp, ABC):
    callee = attr_def(SymbolRefAttr)
    dims = opt_attr_def(DictionaryAttr)

    HAS_CALLEE: ClassVar[bool] = True

    @property
    def callee_name(self) -> str:
        return self.callee.root_reference.data

    @property
    def dim_env(self) -> dict[str, Size]:
        """The callee's dims at this call, in the order the attribute lists them."""
        return {k: size_value(v) for k, v in self.dims.data.items()} if self.dims else {}


def _callee_name(callee: FuncOp | str) -> str:
    return callee.sym_name.data if isinstance(callee, FuncOp) else callee


def _ordered_dims(callee: FuncOp | str, dims: Mapping[str, Size]) -> dict[str, Size]:
    """The dims in the callee's order, which is the order the listing shows them in."""
    if not isinstance(callee, FuncOp):
        return dict(dims)
    order = {d: i for i, d in enumerate(callee.dim_names)}
    return dict(sorted(dims.items(), key=lambda kv: order.get(kv[0], len(order))))


@core_op
class CallOp(_CallLike):
    """`call RMSNorm.apply{D = 4}(norm, x, %3)`"""

    name = "psk_core.call"

    arguments = var_operand_def()
    result = result_def()

    def __init__(
        self, callee: FuncOp | str, args: Sequence[SSAValue | Operation], *, site: str,
        name: str | None = None, dims: Mapping[str, Size] | None = None,
        result_type: Attribute | None = None,
    ):
        """Give the callee's FuncOp to infer the result, or its name and `result_type`."""
        dims = _ordered_dims(callee, dims or {})
        if result_type is None:
            assert isinstance(callee, FuncOp), "CallOp needs the callee FuncOp or result_type"
            types = [_value_type(a) for a in args]
            result_type = _infer(site, lambda: call_result_type(callee, types, dims))
        super().__init__(
            operands=[list(args)], result_types=[result_type],
            attributes=_site_attrs(
                site, name, callee=SymbolRefAttr(_callee_name(callee)), dims=_dims_attr(dims)
            ),
        )

    def verify_(self) -> None:
        super().verify_()
        callee = lookup_function(self, self.callee_name)
        expected = call_result_type(callee, [a.type for a in self.arguments], self.dim_env)
        if not type_conforms(expected, self.result.type):
            raise VerifyException(
                f"@{self.callee_name} returns {type_text(expected)} here, "
                f"not {type_text(self.result.type)}"
            )


@core_op
class FoldOp(_CallLike):
    """`fold 3 Block.apply(stacked blocks; acc x)`: the callee takes one element of the
    stacked tree and the accumulator, and returns the next accumulator."""

    name = "psk_core.fold"

    stacked = operand_def(ParamsAttr)
    acc = operand_def()
    count = attr_def(IntegerAttr | StringAttr)
    result = result_def()

    def __init__(
        self, callee: FuncOp | str, stacked: SSAValue | Operation, acc: SSAValue | Operation,
        *, site: str, name: str | None = None, dims: Mapping[str, Size] | None = None,
    ):
        params = _value_type(stacked)
        assert isinstance(params, ParamsAttr) and params.stack.data, "fold needs a stacked tree"
        count = params.stack_counts[0]
        dims = _ordered_dims(callee, dims or {})
        if isinstance(callee, FuncOp):
            _infer(site, lambda: fold_result_type(callee, params, _value_type(acc), dims))
        super().__init__(
            operands=[stacked, acc], result_types=[_value_type(acc)],
            attributes=_site_attrs(
                site, name, callee=SymbolRefAttr(_callee_name(callee)), dims=_dims_attr(dims),
                count=IntegerAttr(count, i64) if isinstance(count, int) else StringAttr(count),
            ),
        )

    @property
    def count_value(self) -> Size:
        return size_value(self.count)

    def verify_(self) -> None:
        super().verify_()
        stacked = self.stacked.type
        if not stacked.stack.data:
            raise VerifyException(
                f"a fold runs over a stacked params type, not {type_text(stacked)}"
            )
        if stacked.stack_counts[0] != self.count_value:
            raise VerifyException(
                f"count {self.count_value} is not the stack count of {type_text(stacked)}"
            )
        callee = lookup_function(self, self.callee_name)
        fold_result_type(callee, stacked, self.acc.type, self.dim_env)
        if self.result.type != self.acc.type:
            raise VerifyException(
                f"the result {type_text(self.result.type)} is not the "
                f"accumulator's type {type_text(self.acc.type)}"
            )


# --------------------------------------------------------------------------------------
# What reverse-mode differentiation needs (presk/transforms/differentiate.py makes these)
# --------------------------------------------------------------------------------------


def _ints(values: Sequence[int]) -> ArrayAttr[IntegerAttr]:
    return ArrayAttr(IntegerAttr(v, i64) for v in values)


def _int_list(attr: ArrayAttr) -> list[int]:
    return [a.value.data for a in attr.data]


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


@core_op
class SumToOp(CoreOp):
    """Sum away every axis but `keep` (explicit axes, by index) and the prefix unless
    `keep_prefix`: a cotangent brought back to the shape of an operand it broadcast from."""

    name = "psk_core.sum_to"

    operand = operand_def(TensorAttr)
    result = result_def(TensorAttr)
    keep = attr_def(ArrayAttr)
    keep_prefix = opt_attr_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(
        self, operand: SSAValue | Operation, keep: Sequence[int], keep_prefix: bool,
        result_type: TensorAttr, *, site: str, name: str | None = None,
    ):
        super().__init__(
            operands=[operand], result_types=[result_type],
            attributes=_site_attrs(site, name, keep=_ints(keep),
                                   keep_prefix=UnitAttr() if keep_prefix else None),
        )

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
    """Broadcast the operand to the shape of `like`, its explicit axis k onto like's axis
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
            attributes=_site_attrs(site, name, places=_ints(places),
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
class ContractOp(CoreOp):
    """A general contraction (the cotangents of `dot`): the lhs's explicit axes `lhs_axes`
    with the rhs's `rhs_axes`, and the two prefixes when `prefix` is set."""

    name = "psk_core.contract"

    lhs = operand_def(TensorAttr)
    rhs = operand_def(TensorAttr)
    result = result_def(TensorAttr)
    lhs_axes = attr_def(ArrayAttr)
    rhs_axes = attr_def(ArrayAttr)
    prefix = opt_attr_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(
        self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, lhs_axes: Sequence[int],
        rhs_axes: Sequence[int], prefix: bool, *, site: str, name: str | None = None,
        result_type: TensorAttr | None = None,
    ):
        if result_type is None:
            result_type = _infer(site, lambda: TensorAttr.from_shape(shapes.contract_axes(
                _value_type(lhs).shape, _value_type(rhs).shape, list(lhs_axes),  # type: ignore[attr-defined]
                list(rhs_axes), prefix)))
        super().__init__(
            operands=[lhs, rhs], result_types=[result_type],
            attributes=_site_attrs(site, name, lhs_axes=_ints(lhs_axes), rhs_axes=_ints(rhs_axes),
                                   prefix=UnitAttr() if prefix else None),
        )

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
    """Zeros of the operand's type and shape: a tensor, a tuple or a parameter tree."""

    name = "psk_core.zeros_like"

    operand = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None):
        super().__init__(operands=[operand], result_types=[_value_type(operand)],
                         attributes=_site_attrs(site, name))

    def verify_(self) -> None:
        super().verify_()
        if self.result.type != self.operand.type:
            raise VerifyException("the result's type is not the operand's")


@core_op
class TreeOp(CoreOp):
    """Build a parameter tree from its fields, in its module's declaration order: a
    tree's cotangent."""

    name = "psk_core.tree"

    fields = var_operand_def()
    result = result_def(ParamsAttr)

    traits = traits_def(Pure())

    def __init__(
        self, fields: Sequence[SSAValue | Operation], result_type: ParamsAttr, *, site: str,
        name: str | None = None,
    ):
        super().__init__(operands=[list(fields)], result_types=[result_type],
                         attributes=_site_attrs(site, name))

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


def _count_of(stacked: Attribute) -> int:
    if not isinstance(stacked, ParamsAttr) or not stacked.stack.data:
        raise VerifyException(f"a fold runs over a stacked params type, not {type_text(stacked)}")
    count = stacked.stack_counts[0]
    if not isinstance(count, int):
        raise VerifyException(f"differentiating a fold needs its count, not `{count}`")
    return count


@core_op
class FoldScanOp(_CallLike):
    """A fold that keeps every accumulator: the tuple (x₀, x₁, …, xₙ), x₀ the initial one
    and xₙ the fold's result. What a fold's reverse sweep reads."""

    name = "psk_core.fold_scan"

    stacked = operand_def(ParamsAttr)
    acc = operand_def()
    result = result_def(TupleType)

    def __init__(
        self, callee: FuncOp | str, stacked: SSAValue | Operation, acc: SSAValue | Operation,
        *, site: str, name: str | None = None, dims: Mapping[str, Size] | None = None,
    ):
        count = _count_of(_value_type(stacked))
        super().__init__(
            operands=[stacked, acc], result_types=[TupleType([_value_type(acc)] * (count + 1))],
            attributes=_site_attrs(site, name, callee=SymbolRefAttr(_callee_name(callee)),
                                   dims=_dims_attr(_ordered_dims(callee, dims or {}))),
        )

    def verify_(self) -> None:
        super().verify_()
        count = _count_of(self.stacked.type)
        callee = lookup_function(self, self.callee_name)
        fold_result_type(callee, self.stacked.type, self.acc.type, self.dim_env)
        if list(self.result.type.types) != [self.acc.type] * (count + 1):
            raise VerifyException(f"a scan of {count} steps holds {count + 1} accumulators")


@core_op
class FoldVjpOp(_CallLike):
    """The reverse of a fold: from the last step to the first, the step's vjp (the callee,
    taking (θᵢ, xᵢ, dy) and returning (dθᵢ, dx)) on the accumulators a scan kept. Its result
    is (dθ stacked, dx₀)."""

    name = "psk_core.fold_vjp"

    stacked = operand_def(ParamsAttr)
    carries = operand_def(TupleType)
    cotangent = operand_def()
    result = result_def(TupleType)

    def __init__(
        self, callee: FuncOp | str, stacked: SSAValue | Operation, carries: SSAValue | Operation,
        cotangent: SSAValue | Operation, *, site: str, name: str | None = None,
        dims: Mapping[str, Size] | None = None,
    ):
        acc = _value_type(carries).types.data[0]  # type: ignore[attr-defined]
        super().__init__(
            operands=[stacked, carries, cotangent],
            result_types=[TupleType([_value_type(stacked), acc])],
            attributes=_site_attrs(site, name, callee=SymbolRefAttr(_callee_name(callee)),
                                   dims=_dims_attr(_ordered_dims(callee, dims or {}))),
        )

    def verify_(self) -> None:
        super().verify_()
        count = _count_of(self.stacked.type)
        if len(self.carries.type.types) != count + 1:
            raise VerifyException(f"a fold of {count} steps keeps {count + 1} accumulators")
        lookup_function(self, self.callee_name)


@core_op
class FoldFwdOp(_CallLike):
    """A fold whose steps run the step's forward sweep (the callee, a `.fwd`, returning
    (xᵢ₊₁, residuals…)): its result is the tuple of every step's result, the last one's
    first element the fold's. What a stored fold's reverse sweep reads."""

    name = "psk_core.fold_fwd"

    stacked = operand_def(ParamsAttr)
    acc = operand_def()
    result = result_def(TupleType)

    def __init__(
        self, callee: FuncOp, stacked: SSAValue | Operation, acc: SSAValue | Operation,
        *, site: str, name: str | None = None, dims: Mapping[str, Size] | None = None,
    ):
        count = _count_of(_value_type(stacked))
        step = callee.function_type.outputs.data[0]
        super().__init__(
            operands=[stacked, acc], result_types=[TupleType([step] * count)],
            attributes=_site_attrs(site, name, callee=SymbolRefAttr(_callee_name(callee)),
                                   dims=_dims_attr(_ordered_dims(callee, dims or {}))),
        )

    def verify_(self) -> None:
        super().verify_()
        count = _count_of(self.stacked.type)
        if len(self.result.type.types) != count:
            raise VerifyException(f"a fold of {count} steps has {count} step results")
        lookup_function(self, self.callee_name)


@core_op
class FoldBwdOp(_CallLike):
    """The reverse of a `fold_fwd`: from the last step to the first, the step's reverse
    sweep (the callee, a `.bwd`, taking (its fwd's result, dy) and returning (dθᵢ, dx)).
    Its result is (dθ stacked, dx₀)."""

    name = "psk_core.fold_bwd"

    stacked = operand_def(ParamsAttr)
    steps = operand_def(TupleType)
    cotangent = operand_def()
    result = result_def(TupleType)

    def __init__(
        self, callee: FuncOp | str, stacked: SSAValue | Operation, steps: SSAValue | Operation,
        cotangent: SSAValue | Operation, *, site: str, name: str | None = None,
        dims: Mapping[str, Size] | None = None,
    ):
        super().__init__(
            operands=[stacked, steps, cotangent],
            result_types=[TupleType([_value_type(stacked), _value_type(cotangent)])],
            attributes=_site_attrs(site, name, callee=SymbolRefAttr(_callee_name(callee)),
                                   dims=_dims_attr(_ordered_dims(callee, dims or {}))),
        )

    def verify_(self) -> None:
        super().verify_()
        count = _count_of(self.stacked.type)
        if len(self.steps.type.types) != count:
            raise VerifyException(f"a fold of {count} steps has {count} step results")
        lookup_function(self, self.callee_name)


@core_op
class GradOp(_CallLike):
    """`grad(f)(args)`: f's gradient in its first argument; with `value`, the pair
    (f(args), gradient). psk-differentiate replaces it by a call of `f.value_vjp`."""

    name = "psk_core.grad"

    arguments = var_operand_def()
    value = opt_attr_def(UnitAttr)
    result = result_def()

    def __init__(
        self, callee: FuncOp | str, args: Sequence[SSAValue | Operation], value: bool,
        result_type: Attribute, *, site: str, name: str | None = None,
        dims: Mapping[str, Size] | None = None,
    ):
        super().__init__(
            operands=[list(args)], result_types=[result_type],
            attributes=_site_attrs(site, name, callee=SymbolRefAttr(_callee_name(callee)),
                                   dims=_dims_attr(_ordered_dims(callee, dims or {})),
                                   value=UnitAttr() if value else None),
        )

    def verify_(self) -> None:
        super().verify_()
        callee = lookup_function(self, self.callee_name)
        result = call_result_type(callee, [a.type for a in self.arguments], self.dim_env)
        if not type_conforms(result, TensorAttr.scalar()):
            raise VerifyException(f"@{self.callee_name} returns {type_text(result)}, not ℝ[]")
        wrt = self.arguments[0].type
        expected = TupleType([TensorAttr.scalar(), wrt]) if self.value else wrt
        if self.result.type != expected:
            raise VerifyException(f"the gradient is {type_text(expected)}, not "
                                  f"{type_text(self.result.type)}")


Core = Dialect(
    "psk_core",
    [
        NegOp, SqrtOp, ExpOp, LogOp, TanhOp, SigmoidOp, ReluOp, GeluOp, SoftplusOp, AbsOp,
        SinOp, CosOp,
        AddOp, SubOp, MulOp, DivOp, MinimumOp, MaximumOp, PowOp, PowIOp,
        SumOp, MeanOp, MaxOp, MinOp, LogSumExpOp, SoftmaxOp,
        DotOp, BroadcastOp, RealOp, ConstantOp, TupleOp, GetOp,
        ModuleDeclOp, ParamDeclOp, UseDeclOp, FieldOp,
        FuncOp, ReturnOp, CallOp, FoldOp,
        ErfOp, GeluSlopeOp, ErfSlopeOp, HeavisideOp, SumToOp, SpreadOp, ContractOp, ZerosLikeOp, TreeOp, FoldScanOp,
        FoldVjpOp, FoldFwdOp, FoldBwdOp, GradOp,
    ],
    [AxisAttr, TensorAttr, ParamsAttr],
)
