"""The types of PSK-Core: tensors ℝ[axes] (`TensorAttr`) and parameter trees
(`ParamsAttr`), and the type algebra on them (substitution, `...`, binding at a call).
"""

from __future__ import annotations
from collections.abc import Iterable, Mapping, Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, IntegerType, StringAttr, TupleType
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from presk import shapes
from presk.dialects.common import (AxisAttr, parse_axis, parse_name, parse_size, print_name,
    print_size, size_attr, size_value)
from presk.shapes import Axis, ShapeError, Size, TensorType


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
        # an attribute is immutable: built once (the interpreters read it per operation);
        # kept beside the parameters, not as one (xDSL's definitions take no cached_property)
        shape = self.__dict__.get("_shape")
        if shape is None:
            shape = TensorType(tuple(a.axis for a in self.axes), bool(self.prefix.data))
            self.__dict__["_shape"] = shape
        return shape

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
                parser.Delimiter.NONE, lambda: parse_axis(parser)
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
                print_size(printer, count)
                printer.print_string("}(")
            print_name(printer, self.module_name)
            if self.dims.data:
                with printer.in_braces():
                    printer.print_list(self.dim_sizes, lambda s: print_size(printer, s))
            printer.print_string(")" * len(self.stack))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            module, dims, stack = _parse_params_body(parser)
        params = ParamsAttr.get(module, dims, stack)
        return (params.module, params.dims, params.stack)


def _parse_params_body(parser: AttrParser) -> tuple[str, list[Size], list[Size]]:
    """`stack{n}(body)` or `Module` or `Module{sizes}`; a module may be called `stack`."""
    name = parse_name(parser, "a module name or `stack{n}(…)`")
    sizes: list[Size] = []
    if parser.parse_optional_punctuation("{") is not None:
        sizes = parser.parse_comma_separated_list(
            parser.Delimiter.NONE, lambda: parse_size(parser)
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
