"""PSK-Kernel (`psk_kernel`): loop nests over buffers, and the host that launches them.

Two kinds of function live side by side in a module:

* `psk_kernel.kernel @k3(%0, %1, %2, %3)` — a loop nest over buffers, its inputs first,
  then its `outputs` (the last N arguments). Its body is `for` loops (bounds literal,
  loop-carried scalars for accumulators), `load`, `store`, scalar arithmetic (`add`, `sub`,
  `mul`, `div`, `min`, `max`, `neg`), `math` (a function of the one math table:
  presk/analysis/kernel_math.py), `cast` between f32 and f64, and `constant`. Scalars are
  f32 or f64: bf16 is a storage type only, a bf16 buffer loads as f32 and a store to it
  rounds to nearest even. A `for` without loop-carried values is parallel (its iterations
  write disjoint elements and read nothing another writes); one with them runs in order.
  The `layout` attribute (`#psk_kernel.layout<default>`, or for a contraction
  `#psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">`) is a directive to
  the native backend: the nest in the body is the reference order of every arithmetic
  operation, and a layout may only change which elements run together, never the order
  of the operations that compute one element (a contraction sums k ascending). So every
  layout computes the same bits.

* `psk_kernel.host @RMSNorm.apply_2(...)` — a recorded Presk function instance over
  buffers, its inputs first, then its `outputs`, destination-passing. Its ops: `mark` and
  `release` of the arena, `alloc` (from the arena), `convert` (a whole buffer into
  another element type, rounding to nearest even), `fill` (a constant), `copy`, `at` (one
  element of a stacked buffer: a view), `launch @kN(buffers)` under the site of the value
  it computes, `call @host(buffers)`, and `fold` (a loop over a fold's iterations, the
  accumulator alternating between two scratch buffers).

Every verifier error starts with the site: a host op's `site`, else the name of the
kernel or host function that holds the op.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Iterator, Sequence
from typing import ClassVar, TypeVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IndexType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
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
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    Pure,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from presk.dialects.core import AxisAttr, _parse_axis, _print_op_attrs
from presk.shapes import Axis

FLOAT_TYPES = (Float64Type, Float32Type, BFloat16Type)
"""The element types a buffer holds."""


def type_name(t: Attribute) -> str:
    """`f64`, `f32`, `bf16`, `index`, or the type's text."""
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, IndexType):
        return "index"
    return str(t)


def compute_type(element: Attribute) -> Attribute:
    """The scalar type a buffer of `element` loads as and stores from: bf16 computes in f32."""
    return Float32Type() if isinstance(element, BFloat16Type) else element


def fits(a: Attribute, b: Attribute) -> bool:
    """Two buffer types one kernel or host may take for the other: the same element type
    and sizes (axis names are for the listing only)."""
    return (isinstance(a, BufferType) and isinstance(b, BufferType)
            and a.element == b.element and a.shape == b.shape)


def _is_scalar_float(t: Attribute) -> bool:
    return isinstance(t, (Float64Type, Float32Type))


# --------------------------------------------------------------------------------------
# Types and attributes
# --------------------------------------------------------------------------------------


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """A buffer of a concrete shape: `!psk_kernel.buffer<f32, batch: 4, model: 4>`, a
    scalar `!psk_kernel.buffer<f64>`. The axes keep their names for the listing; a buffer
    is laid out row-major, its last axis contiguous."""

    name = "psk_kernel.buffer"

    element: Float64Type | Float32Type | BFloat16Type
    axes: ArrayAttr[AxisAttr]

    @classmethod
    def get(cls, element: Attribute, *axes: Axis | tuple[str | None, int] | int) -> BufferType:
        """`BufferType.get(f32, ("batch", 4), 4)` is f32[batch: 4, 4]."""
        attrs = []
        for a in axes:
            if isinstance(a, int):
                a = Axis(None, a)
            elif isinstance(a, tuple):
                a = Axis(a[0], a[1])
            attrs.append(AxisAttr.from_axis(a))
        return cls(element, ArrayAttr(attrs))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.size.data for a in self.axes if isinstance(a.size, IntAttr))

    @property
    def axis_list(self) -> tuple[Axis, ...]:
        return tuple(a.axis for a in self.axes)

    @property
    def rank(self) -> int:
        return len(self.axes.data)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def compute(self) -> Attribute:
        return compute_type(self.element)

    @property
    def bytes(self) -> int:
        return self.size * (2 if isinstance(self.element, BFloat16Type)
                            else 4 if isinstance(self.element, Float32Type) else 8)

    def with_element(self, element: Attribute) -> BufferType:
        return BufferType(element, self.axes)

    def dropping_first(self) -> BufferType:
        """One element of a stacked buffer: its first axis dropped."""
        return BufferType(self.element, ArrayAttr(self.axes.data[1:]))

    def listing(self) -> str:
        """`f32[batch: 4, model: 4]`, the reference's notation."""
        return f"{type_name(self.element)}[" + ", ".join(str(a) for a in self.axis_list) + "]"

    def verify(self) -> None:
        for a in self.axes:
            if not isinstance(a.size, IntAttr):
                raise VerifyException(f"a buffer's sizes are literals, not `{a.axis.size}`")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.element)
            for a in self.axes:
                printer.print_string(", ")
                a.print_axis(printer)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            pos = parser.pos
            element = parser.parse_type()
            if not isinstance(element, FLOAT_TYPES):
                parser.raise_error(f"a buffer holds f64, f32 or bf16, not {element}", pos,
                                   parser.pos)
            axes = []
            while parser.parse_optional_punctuation(",") is not None:
                axes.append(_parse_axis(parser))
        return (element, ArrayAttr(axes))


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """How the native backend runs a nest. `#psk_kernel.layout<default>`: as written,
    lanes 1, no split. `#psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">`:
    a contraction's register tile of I×J outputs, J in vector lanes, tiles visited in
    `order`, each output's sum still k ascending. `split = [a, n]` (optional) divides loop
    `a` among `n` workers; "none" is no split."""

    name = "psk_kernel.layout"

    kind: StringAttr
    tile: ArrayAttr[IntAttr]
    lanes: IntAttr
    order: StringAttr
    split: ArrayAttr[IntAttr]

    KINDS: ClassVar[tuple[str, ...]] = ("default", "tiled")

    @classmethod
    def default(cls) -> LayoutAttr:
        return cls(StringAttr("default"), ArrayAttr(()), IntAttr(1), StringAttr(""),
                   ArrayAttr(()))

    @classmethod
    def tiled(cls, tile: Sequence[int], lanes: int, order: str = "IJ",
              split: Sequence[int] = ()) -> LayoutAttr:
        return cls(StringAttr("tiled"), ArrayAttr(IntAttr(t) for t in tile), IntAttr(lanes),
                   StringAttr(order), ArrayAttr(IntAttr(s) for s in split))

    @property
    def is_default(self) -> bool:
        return self.kind.data == "default"

    def text(self) -> str:
        """The listing's words: `default` or `tiled, tile [4, 4], lanes 4, order IJ`."""
        if self.is_default:
            out = "default"
        else:
            tile = ", ".join(str(t.data) for t in self.tile)
            out = f"tiled, tile [{tile}], lanes {self.lanes.data}, order {self.order.data}"
        if self.split.data:
            out += ", split (" + ", ".join(str(s.data) for s in self.split) + ")"
        return out

    def verify(self) -> None:
        if self.kind.data not in self.KINDS:
            raise VerifyException(f"layout kind `{self.kind.data}` is not one of {list(self.KINDS)}")
        if self.lanes.data < 1:
            raise VerifyException(f"a layout has 1 or more lanes, not {self.lanes.data}")
        if self.kind.data == "tiled":
            if len(self.tile) != 2 or any(t.data < 1 for t in self.tile):
                raise VerifyException("a tiled layout has a tile of two positive sizes")
            if self.order.data not in ("IJ", "JI"):
                raise VerifyException(f"a tiled layout's order is IJ or JI, not "
                                      f"`{self.order.data}`")
        if self.split.data and (len(self.split) != 2 or self.split.data[1].data < 1):
            raise VerifyException("a split is [loop, workers]")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.kind.data)
            if self.kind.data == "tiled":
                printer.print_string(", tile = [" + ", ".join(str(t.data) for t in self.tile)
                                     + f"], lanes = {self.lanes.data}, order = "
                                     f'"{self.order.data}"')
            elif self.lanes.data != 1:
                printer.print_string(f", lanes = {self.lanes.data}")
            if self.split.data:
                printer.print_string(", split = [" + ", ".join(str(s.data) for s in self.split)
                                     + "]")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            kind = parser.parse_identifier()
            tile: list[int] = []
            lanes, order, split = 1, "", []
            while parser.parse_optional_punctuation(",") is not None:
                key = parser.parse_identifier()
                parser.parse_punctuation("=")
                if key in ("tile", "split"):
                    values = parser.parse_comma_separated_list(
                        parser.Delimiter.SQUARE, lambda: parser.parse_integer(False, False))
                    (tile if key == "tile" else split).extend(values)
                elif key == "lanes":
                    lanes = parser.parse_integer(False, False)
                elif key == "order":
                    order = parser.parse_str_literal()
                else:
                    parser.raise_error(f"unknown layout key `{key}` (tile, lanes, order, split)")
        return (StringAttr(kind), ArrayAttr(IntAttr(t) for t in tile), IntAttr(lanes),
                StringAttr(order), ArrayAttr(IntAttr(s) for s in split))


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
        if isinstance(sym, StringAttr) and isinstance(current, (KernelOp, HostOp)):
            return sym.data
        current = current.parent_op()
    return "(no site)"


def kernel_op(cls: type[_OpT]) -> type[_OpT]:
    """`irdl_op_definition`, with every verifier error prefixed by the op's site."""
    cls = irdl_op_definition(cls)
    verify = cls.verify_

    def verify_(self: Operation) -> None:
        try:
            verify(self)
        except VerifyException as err:
            text = str(err)
            prefix = f"{site_of(self)}: {self.name}: "
            raise VerifyException(text if text.startswith(prefix) else prefix + text) from err

    cls.verify_ = verify_  # type: ignore[method-assign]
    return cls


class KernelBaseOp(IRDLOperation, ABC):
    """IRDL's own structural errors (operand types, traits) also name the site."""

    def verify(self, verify_nested_ops: bool = True) -> None:
        try:
            super().verify(verify_nested_ops)
        except VerifyException as err:
            if getattr(err, "__notes__", None) or str(err).startswith(site_of(self) + ":"):
                raise
            self.emit_error(str(err), VerifyException(f"{site_of(self)}: {self.name}: {err}"))


def _enclosing(op: Operation, kind: type[_OpT]) -> _OpT | None:
    current = op.parent_op()
    while current is not None and not isinstance(current, kind):
        current = current.parent_op()
    return current


# --------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------


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
        _print_op_attrs(printer, self.attributes, reserved=("sym_name", "function_type"),
                        keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)

    @classmethod
    def parse(cls, parser: Parser):
        name, inputs, outputs, region, extra, _, _ = parse_func_op_like(
            parser, reserved_attr_names=("sym_name", "function_type")
        )
        attrs = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(inputs, outputs),
        } | (extra.data if extra is not None else {})
        if not region.blocks:
            region.add_block(Block(arg_types=inputs))
        return cls.create(attributes=attrs, regions=[region])


@kernel_op
class KernelOp(_BufferFunction):
    """`psk_kernel.kernel @k0(%0: !psk_kernel.buffer<…>, %1: …) attributes {layout = …,
    outputs = 1 : i64, title = "pow 2"} { … }`: a loop nest, shared by every launch."""

    name = "psk_kernel.kernel"

    layout = attr_def(LayoutAttr)
    title = attr_def(StringAttr)

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(self, name: str, arg_types: Sequence[BufferType], outputs: int, title: str,
                 layout: LayoutAttr | None = None, body: Block | None = None):
        body = body or Block(arg_types=arg_types)
        super().__init__(
            attributes={
                "sym_name": StringAttr(name),
                "function_type": FunctionType.from_lists(list(arg_types), []),
                "outputs": IntegerAttr(outputs, i64),
                "title": StringAttr(title),
                "layout": layout or LayoutAttr.default(),
            },
            regions=[Region(body)],
        )

    def verify_(self) -> None:
        self._verify_signature()
        outputs = set(self.output_args)
        written: set[SSAValue] = set()
        for op in self.body.walk():
            if op is self:
                continue
            if not isinstance(op, KERNEL_BODY_OPS):
                raise VerifyException(f"{op.name} cannot stand in a kernel")
            if isinstance(op, StoreOp):
                if op.buffer not in outputs:
                    raise VerifyException("a kernel stores only to its outputs")
                written.add(op.buffer)
            if isinstance(op, LoadOp) and op.buffer in outputs:
                raise VerifyException("a kernel reads only its inputs")
        if missing := [i for i, a in enumerate(self.args) if a in outputs and a not in written]:
            raise VerifyException(f"output %{missing[0]} is never stored")
        if self.layout.kind.data == "tiled" and \
                not self.title.data.startswith(("dot", "contract")):
            raise VerifyException("only a contraction is tiled")


@kernel_op
class ForOp(KernelBaseOp):
    """`%s = psk_kernel.for %i = 0 to 4 iter(%a = %init) -> (f32) { … psk_kernel.yield %n
    : f32 }`: a loop over [lower, upper) step 1; with loop-carried scalars it runs in
    order, without them its iterations are independent."""

    name = "psk_kernel.for"

    lower = attr_def(IntAttr)
    upper = attr_def(IntAttr)
    inits = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    def __init__(self, lower: int, upper: int, inits: Sequence[SSAValue | Operation] = (),
                 body: Block | None = None):
        types = [SSAValue.get(v).type for v in inits]
        body = body or Block(arg_types=[IndexType(), *types])
        super().__init__(
            operands=[list(inits)], result_types=[types],
            attributes={"lower": IntAttr(lower), "upper": IntAttr(upper)},
            regions=[Region(body)],
        )

    @property
    def induction(self) -> BlockArgument:
        return self.body.block.args[0]

    @property
    def carried(self) -> tuple[BlockArgument, ...]:
        return self.body.block.args[1:]

    @property
    def trip(self) -> int:
        return max(self.upper.data - self.lower.data, 0)

    def verify_(self) -> None:
        args = self.body.block.args
        if not args or not isinstance(args[0].type, IndexType):
            raise VerifyException("the body's first argument is the index")
        types = [v.type for v in self.inits]
        if [a.type for a in args[1:]] != types or [r.type for r in self.res] != types:
            raise VerifyException("the loop-carried values, the body's arguments after the "
                                  "index and the results have one list of types")
        for t in types:
            if not _is_scalar_float(t):
                raise VerifyException(f"a loop carries f32 or f64 scalars, not {type_name(t)}")
        last = self.body.block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("the body ends with psk_kernel.yield")
        if [v.type for v in last.values] != types:
            raise VerifyException("the yield gives the loop-carried values' types")
        if self.upper.data < self.lower.data:
            raise VerifyException(f"the loop's bounds {self.lower.data}..{self.upper.data} "
                                  "decrease")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.induction)
        printer.print_string(f" = {self.lower.data} to {self.upper.data}")
        if self.inits:
            printer.print_string(" iter(")
            printer.print_list(zip(self.carried, self.inits), lambda p: (
                printer.print_ssa_value(p[0]), printer.print_string(" = "),
                printer.print_ssa_value(p[1])))
            printer.print_string(") -> (")
            printer.print_list([v.type for v in self.inits], printer.print_attribute)
            printer.print_string(")")
        _print_op_attrs(printer, self.attributes, reserved=("lower", "upper"), keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        index = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lower = parser.parse_integer(allow_boolean=False)
        parser.parse_keyword("to")
        upper = parser.parse_integer(allow_boolean=False)
        carried, operands, types = [], [], []
        if parser.parse_optional_keyword("iter") is not None:
            def one():
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                return arg, parser.parse_unresolved_operand()
            pairs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, one)
            parser.parse_punctuation("->")
            pos = parser.pos
            types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
            carried = [a for a, _ in pairs]
            operands = parser.resolve_operands([o for _, o in pairs], types, pos)
        extra = parser.parse_optional_attr_dict_with_keyword()
        attrs = extra.data if extra is not None else {}
        block_args = [index.resolve(IndexType())] + [a.resolve(t) for a, t in zip(carried, types)]
        region = parser.parse_region(block_args)
        op = cls.create(operands=operands, result_types=types,
                        attributes={"lower": IntAttr(lower), "upper": IntAttr(upper)} | attrs,
                        regions=[region])
        return op


@kernel_op
class YieldOp(KernelBaseOp):
    """`psk_kernel.yield %a, %b : f32, f32`: a loop body's next loop-carried values."""

    name = "psk_kernel.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator(), HasParent(ForOp))

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])

    def print(self, printer: Printer) -> None:
        if self.values:
            printer.print_string(" ")
            printer.print_list(self.values, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in self.values], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser) -> YieldOp:
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand) or []
        types = []
        if operands:
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
        return cls.create(operands=parser.resolve_operands(operands, types, parser.pos))


def _print_indices(printer: Printer, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
    printer.print_operand(buffer)
    with printer.in_square_brackets():
        printer.print_list(indices, printer.print_operand)


def _parse_indexed(parser: Parser):
    buffer = parser.parse_unresolved_operand()
    indices = parser.parse_comma_separated_list(parser.Delimiter.SQUARE,
                                                parser.parse_unresolved_operand)
    return buffer, indices


def _verify_indices(buffer: SSAValue, indices: Sequence[SSAValue]) -> BufferType:
    t = buffer.type
    if not isinstance(t, BufferType):
        raise VerifyException(f"{type_name(t)} is not a buffer")
    if len(indices) != t.rank:
        raise VerifyException(f"{t.listing()} takes {t.rank} indices, given {len(indices)}")
    for i in indices:
        if not isinstance(i.type, IndexType):
            raise VerifyException(f"an index is an index, not {type_name(i.type)}")
    return t


@kernel_op
class LoadOp(KernelBaseOp):
    """`%v = psk_kernel.load %0[%i, %j] : !psk_kernel.buffer<bf16, 4, 4> -> f32`: one
    element, in its buffer's compute type (a bf16 element widens to f32, exactly)."""

    name = "psk_kernel.load"

    buffer = operand_def(BufferType)
    indices = var_operand_def(IndexType)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, buffer: SSAValue, indices: Sequence[SSAValue]):
        t = buffer.type
        assert isinstance(t, BufferType)
        super().__init__(operands=[buffer, list(indices)], result_types=[t.compute])

    def verify_(self) -> None:
        t = _verify_indices(self.buffer, self.indices)
        if self.result.type != t.compute:
            raise VerifyException(f"a {type_name(t.element)} element loads as "
                                  f"{type_name(t.compute)}, not {type_name(self.result.type)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_indices(printer, self.buffer, self.indices)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        buffer, indices = _parse_indexed(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        buffer_type = parser.parse_type()
        parser.parse_punctuation("->")
        result = parser.parse_type()
        buf = parser.resolve_operand(buffer, buffer_type)
        idx = parser.resolve_operands(indices, [IndexType()] * len(indices), pos)
        return cls.create(operands=[buf, *idx], result_types=[result], attributes=attrs)


@kernel_op
class StoreOp(KernelBaseOp):
    """`psk_kernel.store %v, %3[%i, %j] : !psk_kernel.buffer<bf16, 4, 4>`: the value, in
    the buffer's compute type, rounded to nearest even into a bf16 buffer."""

    name = "psk_kernel.store"

    value = operand_def()
    buffer = operand_def(BufferType)
    indices = var_operand_def(IndexType)

    def __init__(self, value: SSAValue | Operation, buffer: SSAValue,
                 indices: Sequence[SSAValue]):
        super().__init__(operands=[value, buffer, list(indices)])

    def verify_(self) -> None:
        t = _verify_indices(self.buffer, self.indices)
        if self.value.type != t.compute:
            raise VerifyException(f"a {type_name(t.element)} buffer stores "
                                  f"{type_name(t.compute)}, not {type_name(self.value.type)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        _print_indices(printer, self.buffer, self.indices)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.buffer.type)

    @classmethod
    def parse(cls, parser: Parser) -> StoreOp:
        value = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        buffer, indices = _parse_indexed(parser)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        buffer_type = parser.parse_type()
        if not isinstance(buffer_type, BufferType):
            parser.raise_error("a store's type is a buffer", pos, parser.pos)
        buf = parser.resolve_operand(buffer, buffer_type)
        val = parser.resolve_operand(value, buffer_type.compute)
        idx = parser.resolve_operands(indices, [IndexType()] * len(indices), pos)
        return cls.create(operands=[val, buf, *idx], attributes=attrs)


class _ScalarOp(KernelBaseOp, ABC):
    """Scalar arithmetic: `%r = psk_kernel.add %a, %b : f32`; every operand and the result
    have the one type, f32 or f64 (bf16 has no arithmetic: it computes in f32)."""

    result = result_def()

    traits = traits_def(Pure())

    def verify_(self) -> None:
        t = self.result.type
        if not _is_scalar_float(t):
            raise VerifyException(f"arithmetic is in f32 or f64, not {type_name(t)}"
                                  + (" (bf16 computes in f32)" if isinstance(t, BFloat16Type)
                                     else ""))
        for o in self.operands:
            if o.type != t:
                raise VerifyException(f"an operand is {type_name(o.type)}, the result "
                                      f"{type_name(t)}")

    def print(self, printer: Printer) -> None:
        if self.operands:
            printer.print_string(" ")
            printer.print_list(self.operands, printer.print_operand)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser):
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand) or []
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        t = parser.parse_type()
        values = parser.resolve_operands(operands, [t] * len(operands), pos)
        return cls.create(operands=values, result_types=[t], attributes=attrs)


class BinaryOp(_ScalarOp, ABC):
    lhs = operand_def()
    rhs = operand_def()

    SYMBOL: ClassVar[str] = ""

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])


@kernel_op
class AddOp(BinaryOp):
    name = "psk_kernel.add"
    SYMBOL: ClassVar[str] = "+"


@kernel_op
class SubOp(BinaryOp):
    name = "psk_kernel.sub"
    SYMBOL: ClassVar[str] = "-"


@kernel_op
class MulOp(BinaryOp):
    name = "psk_kernel.mul"
    SYMBOL: ClassVar[str] = "*"


@kernel_op
class DivOp(BinaryOp):
    name = "psk_kernel.div"
    SYMBOL: ClassVar[str] = "/"


@kernel_op
class MinOp(BinaryOp):
    """The smaller operand; NaN when either is NaN (numpy's minimum, LLVM's minimum)."""

    name = "psk_kernel.min"


@kernel_op
class MaxOp(BinaryOp):
    """The larger operand; NaN when either is NaN (numpy's maximum, LLVM's maximum)."""

    name = "psk_kernel.max"


@kernel_op
class NegOp(_ScalarOp):
    name = "psk_kernel.neg"

    operand = operand_def()

    def __init__(self, operand: SSAValue | Operation):
        super().__init__(operands=[operand], result_types=[SSAValue.get(operand).type])


MATH_FUNCTIONS = {
    # name: arity
    "exp": 1, "log": 1, "tanh": 1, "erf": 1, "sqrt": 1, "sin": 1, "cos": 1, "abs": 1,
    "log1p": 1, "softplus": 1, "pow": 2, "heaviside": 2,
}
"""The functions of the math table (presk/analysis/kernel_math.py)."""


@kernel_op
class MathOp(_ScalarOp):
    """`%r = psk_kernel.math "erf" %a : f32`: a function of the math table, in the
    operand's type. `sqrt` is IEEE (correctly rounded); the others are the table's."""

    name = "psk_kernel.math"

    fn = attr_def(StringAttr)
    args = var_operand_def()

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

    def print(self, printer: Printer) -> None:
        printer.print_string(f' "{self.fn.data}" ')
        printer.print_list(self.args, printer.print_operand)
        _print_op_attrs(printer, self.attributes, reserved=("fn",))
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> MathOp:
        fn = parser.parse_str_literal()
        op = super().parse(parser)
        op.attributes["fn"] = StringAttr(fn)
        return op


@kernel_op
class CastOp(KernelBaseOp):
    """`%r = psk_kernel.cast %a : f32 -> f64`: between f32 and f64, exact when it widens,
    rounded to nearest even when it narrows."""

    name = "psk_kernel.cast"

    operand = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, to: Attribute):
        super().__init__(operands=[operand], result_types=[to])

    def verify_(self) -> None:
        a, b = self.operand.type, self.result.type
        if not (_is_scalar_float(a) and _is_scalar_float(b)):
            raise VerifyException(f"a cast is between f32 and f64, not {type_name(a)} -> "
                                  f"{type_name(b)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operand)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.operand.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> CastOp:
        operand = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        a = parser.parse_type()
        parser.parse_punctuation("->")
        b = parser.parse_type()
        return cls.create(operands=[parser.resolve_operand(operand, a)], result_types=[b],
                          attributes=attrs)


@kernel_op
class ConstantOp(KernelBaseOp):
    """`%c = psk_kernel.constant {value = 1.4142135623730951 : f64} : f32`: a number (held
    as an f64) rounded to nearest even into the result type."""

    name = "psk_kernel.constant"

    value = attr_def(FloatAttr)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, value: float, t: Attribute):
        super().__init__(result_types=[t], attributes={"value": FloatAttr(float(value), f64)})

    @property
    def number(self) -> float:
        return float(self.value.value.data)

    def verify_(self) -> None:
        if not _is_scalar_float(self.result.type):
            raise VerifyException(f"a constant is f32 or f64, not {type_name(self.result.type)}")

    def print(self, printer: Printer) -> None:
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        return cls.create(result_types=[parser.parse_type()], attributes=attrs)


KERNEL_BODY_OPS: tuple[type[Operation], ...] = (
    ForOp, YieldOp, LoadOp, StoreOp, AddOp, SubOp, MulOp, DivOp, MinOp, MaxOp, NegOp,
    MathOp, CastOp, ConstantOp,
)


# --------------------------------------------------------------------------------------
# The host
# --------------------------------------------------------------------------------------


@kernel_op
class HostOp(_BufferFunction):
    """`psk_kernel.host @RMSNorm.apply_2(%0: …, %1: …, %2: …) attributes {function =
    "RMSNorm.apply", outputs = 1 : i64} { … }`: one recorded instance of a Presk function,
    writing its result into its last `outputs` arguments."""

    name = "psk_kernel.host"

    function = attr_def(StringAttr)
    arg_names = opt_attr_def(ArrayAttr[StringAttr])
    entry = opt_attr_def(UnitAttr)
    """On the host of the entry the module was recorded for."""

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    def __init__(self, name: str, function: str, arg_types: Sequence[BufferType], outputs: int,
                 arg_names: Sequence[str] | None = None):
        attrs: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(list(arg_types), []),
            "outputs": IntegerAttr(outputs, i64),
            "function": StringAttr(function),
        }
        if arg_names is not None:
            attrs["arg_names"] = ArrayAttr(StringAttr(n) for n in arg_names)
        super().__init__(attributes=attrs, regions=[Region(Block(arg_types=arg_types))])

    @property
    def arg_name_list(self) -> tuple[str, ...]:
        if self.arg_names is None:
            return tuple(f"a{i}" for i in range(len(self.args)))
        return tuple(n.data for n in self.arg_names)

    def verify_(self) -> None:
        self._verify_signature()
        if self.arg_names is not None and len(self.arg_names) != len(self.args):
            raise VerifyException(f"arg_names names {len(self.arg_names)} of "
                                  f"{len(self.args)} arguments")
        for op in self.body.walk():
            if op is not self and isinstance(op, KERNEL_BODY_OPS):
                raise VerifyException(f"{op.name} stands in a kernel, not in the host")


class HostBodyOp(KernelBaseOp, ABC):
    """An op of a host body; `site` names the value it makes."""

    site = opt_attr_def(StringAttr)

    def verify_(self) -> None:
        if _enclosing(self, HostOp) is None:
            raise VerifyException("a host op stands in a psk_kernel.host")


def _site_attrs(site: str | None, **more: Attribute | None) -> dict[str, Attribute]:
    attrs: dict[str, Attribute] = {} if site is None else {"site": StringAttr(site)}
    attrs.update({k: v for k, v in more.items() if v is not None})
    return attrs


@kernel_op
class MarkOp(HostBodyOp):
    """`%m = psk_kernel.mark`: the arena's top, to release back to."""

    name = "psk_kernel.mark"

    result = result_def(IndexType)

    def __init__(self):
        super().__init__(result_types=[IndexType()])

    def print(self, printer: Printer) -> None:
        _print_op_attrs(printer, self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> MarkOp:
        return cls.create(result_types=[IndexType()], attributes=parser.parse_optional_attr_dict())


@kernel_op
class ReleaseOp(HostBodyOp):
    """`psk_kernel.release %m`: free what was allocated since the mark."""

    name = "psk_kernel.release"

    mark = operand_def(IndexType)

    def __init__(self, mark: SSAValue | Operation):
        super().__init__(operands=[mark])

    def verify_(self) -> None:
        super().verify_()
        if not isinstance(self.mark.owner, MarkOp):
            raise VerifyException("a release takes a mark")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.mark)
        _print_op_attrs(printer, self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> ReleaseOp:
        mark = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        return cls.create(operands=[parser.resolve_operand(mark, IndexType())], attributes=attrs)


@kernel_op
class AllocOp(HostBodyOp):
    """`%b = psk_kernel.alloc {site = "RMSNorm.apply/%3"} : !psk_kernel.buffer<f32, 4, 4>`:
    a buffer from the arena, its contents undefined until written."""

    name = "psk_kernel.alloc"

    result = result_def(BufferType)
    source_name = opt_attr_def(StringAttr, attr_name="name")

    def __init__(self, t: BufferType, site: str | None = None, name: str | None = None):
        super().__init__(result_types=[t], attributes=_site_attrs(
            site, name=StringAttr(name) if name else None))

    def print(self, printer: Printer) -> None:
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> AllocOp:
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        return cls.create(result_types=[parser.parse_type()], attributes=attrs)


class _SourceToDest(HostBodyOp, ABC):
    """`psk_kernel.op %src to %dst {…} : !src_type -> !dst_type`"""

    source = operand_def(BufferType)
    dest = operand_def(BufferType)

    def __init__(self, source: SSAValue | Operation, dest: SSAValue | Operation,
                 site: str | None = None):
        super().__init__(operands=[source, dest], attributes=_site_attrs(site))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(" to ")
        printer.print_operand(self.dest)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.dest.type)

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        dest = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        a = parser.parse_type()
        parser.parse_punctuation("->")
        b = parser.parse_type()
        return cls.create(operands=[parser.resolve_operand(source, a),
                                    parser.resolve_operand(dest, b)], attributes=attrs)


@kernel_op
class ConvertOp(_SourceToDest):
    """`psk_kernel.convert %x to %x_f32 {site = …} : !…<f64, 4, 4> -> !…<f32, 4, 4>`: every
    element into another type, rounded to nearest even (exact when it widens)."""

    name = "psk_kernel.convert"

    def verify_(self) -> None:
        super().verify_()
        a, b = self.source.type, self.dest.type
        assert isinstance(a, BufferType) and isinstance(b, BufferType)
        if a.shape != b.shape:
            raise VerifyException(f"a conversion keeps the shape: {a.listing()} -> "
                                  f"{b.listing()}")
        if a.element == b.element:
            raise VerifyException(f"a conversion changes the element type: {a.listing()} -> "
                                  f"{b.listing()}")


@kernel_op
class CopyOp(_SourceToDest):
    """`psk_kernel.copy %a to %b : … -> …`: every element, of one type and shape."""

    name = "psk_kernel.copy"

    def verify_(self) -> None:
        super().verify_()
        a, b = self.source.type, self.dest.type
        assert isinstance(a, BufferType) and isinstance(b, BufferType)
        if a.shape != b.shape or a.element != b.element:
            raise VerifyException(f"a copy keeps type and shape: {a.listing()} -> "
                                  f"{b.listing()}")


@kernel_op
class FillOp(HostBodyOp):
    """`psk_kernel.fill %b {site = …, value = 1.000000e-06 : f64} : !…`: every element the
    constant, rounded to nearest even into the buffer's type."""

    name = "psk_kernel.fill"

    dest = operand_def(BufferType)
    value = attr_def(FloatAttr)

    def __init__(self, dest: SSAValue | Operation, value: float, site: str | None = None):
        super().__init__(operands=[dest], attributes=_site_attrs(
            site, value=FloatAttr(float(value), f64)))

    @property
    def number(self) -> float:
        return float(self.value.value.data)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.dest)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.dest.type)

    @classmethod
    def parse(cls, parser: Parser) -> FillOp:
        dest = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        return cls.create(operands=[parser.resolve_operand(dest, t)], attributes=attrs)


@kernel_op
class AtOp(HostBodyOp):
    """`%w1 = psk_kernel.at %w[%l] : !…<f32, 3, 4, 4> -> !…<f32, 4, 4>` or `%w[0]`: one
    element of a stacked buffer along its first axis, as a view (no copy)."""

    name = "psk_kernel.at"

    source = operand_def(BufferType)
    dynamic = var_operand_def(IndexType)
    index = opt_attr_def(IntAttr)
    result = result_def(BufferType)

    def __init__(self, source: SSAValue | Operation, index: int | SSAValue):
        t = SSAValue.get(source).type
        assert isinstance(t, BufferType)
        if isinstance(index, int):
            super().__init__(operands=[source, []], result_types=[t.dropping_first()],
                             attributes={"index": IntAttr(index)})
        else:
            super().__init__(operands=[source, [index]], result_types=[t.dropping_first()])

    def verify_(self) -> None:
        super().verify_()
        t = self.source.type
        assert isinstance(t, BufferType)
        if t.rank == 0 or self.result.type != t.dropping_first():
            raise VerifyException(f"one element of {t.listing()} is not "
                                  f"{self.result.type.listing()}")  # type: ignore[attr-defined]
        if (self.index is None) == (not self.dynamic):
            raise VerifyException("an `at` takes one index, a literal or a value")
        if self.index is not None and not 0 <= self.index.data < t.shape[0]:
            raise VerifyException(f"index {self.index.data} is outside {t.listing()}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        with printer.in_square_brackets():
            if self.dynamic:
                printer.print_operand(self.dynamic[0])
            else:
                printer.print_string(str(self.index.data))  # type: ignore[union-attr]
        _print_op_attrs(printer, self.attributes, reserved=("index",))
        printer.print_string(" : ")
        printer.print_attribute(self.source.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> AtOp:
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        literal = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
        dynamic = None if literal is not None else parser.parse_unresolved_operand()
        parser.parse_punctuation("]")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        a = parser.parse_type()
        parser.parse_punctuation("->")
        b = parser.parse_type()
        operands = [parser.resolve_operand(source, a)]
        if dynamic is not None:
            operands.append(parser.resolve_operand(dynamic, IndexType()))
        else:
            attrs["index"] = IntAttr(literal)
        return cls.create(operands=operands, result_types=[b], attributes=attrs)


class _CallLike(HostBodyOp, ABC):
    """`psk_kernel.launch @k0(%a, %b) {site = …} : (!…, !…)`"""

    callee = attr_def(SymbolRefAttr)
    arguments = var_operand_def(BufferType)

    TARGET: ClassVar[type[Operation]]

    @property
    def callee_name(self) -> str:
        return self.callee.root_reference.data

    def target(self) -> _BufferFunction:
        try:
            found = SymbolTable.lookup_symbol(self, self.callee_name)
        except ValueError as err:
            raise VerifyException(f"@{self.callee_name} cannot be looked up outside a "
                                  "module") from err
        if not isinstance(found, self.TARGET):
            raise VerifyException(f"no {self.TARGET.name} @{self.callee_name}")
        return found  # type: ignore[return-value]

    def verify_(self) -> None:
        super().verify_()
        target = self.target()
        given = tuple(a.type for a in self.arguments)
        if len(given) != len(target.arg_types) or not all(
                fits(g, w) for g, w in zip(given, target.arg_types)):
            for i, (g, want) in enumerate(zip(given, target.arg_types)):
                if not fits(g, want):
                    raise VerifyException(
                        f"argument {i} of @{self.callee_name} is "
                        f"{want.listing()}, given {g.listing()}")  # type: ignore[attr-defined]
            raise VerifyException(f"@{self.callee_name} takes {len(target.arg_types)} "
                                  f"buffers, given {len(given)}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.callee_name)
        with printer.in_parens():
            printer.print_list(self.arguments, printer.print_operand)
        _print_op_attrs(printer, self.attributes, reserved=("callee",))
        printer.print_string(" : ")
        with printer.in_parens():
            printer.print_list([a.type for a in self.arguments], printer.print_attribute)

    @classmethod
    def parse(cls, parser: Parser):
        callee = parser.parse_symbol_name()
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN,
                                                     parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        types = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        values = parser.resolve_operands(operands, types, pos)
        return cls.create(operands=values, attributes={"callee": SymbolRefAttr(callee)} | attrs)


@kernel_op
class LaunchOp(_CallLike):
    """`psk_kernel.launch @k3(%x, %t7, %g, %out) {fused, site = "RMSNorm.apply/%10", sites =
    ["RMSNorm.apply/%8", "RMSNorm.apply/%10"]} : (…)`: run a kernel. `site` is the value it
    stores; `sites` every operation it computes (one per launch it would take unfused);
    `fused` marks a fusion group's launch, `name` the let's source name."""

    name = "psk_kernel.launch"

    sites = opt_attr_def(ArrayAttr[StringAttr])
    fused = opt_attr_def(UnitAttr)
    source_name = opt_attr_def(StringAttr, attr_name="name")

    TARGET: ClassVar[type[Operation]] = KernelOp

    def __init__(self, kernel: str, args: Sequence[SSAValue | Operation], site: str,
                 sites: Sequence[str] = (), fused: bool = False, name: str | None = None):
        super().__init__(
            operands=[list(args)],
            attributes=_site_attrs(
                site, callee=SymbolRefAttr(kernel),
                sites=ArrayAttr(StringAttr(s) for s in sites) if sites else None,
                fused=UnitAttr() if fused else None,
                name=StringAttr(name) if name else None),
        )

    @property
    def site_list(self) -> list[str]:
        if self.sites is not None:
            return [s.data for s in self.sites]
        return [self.site.data] if self.site is not None else []

    def verify_(self) -> None:
        super().verify_()
        if self.site is None:
            raise VerifyException("a launch names the site of the value it computes")


@kernel_op
class CallOp(_CallLike):
    """`psk_kernel.call @RMSNorm.apply_2(%g, %x, %out) {site = "Block.apply/%4"} : (…)`"""

    name = "psk_kernel.call"

    TARGET: ClassVar[type[Operation]] = HostOp

    def __init__(self, host: str, args: Sequence[SSAValue | Operation], site: str | None):
        super().__init__(operands=[list(args)],
                         attributes=_site_attrs(site, callee=SymbolRefAttr(host)))


@kernel_op
class FoldOp(HostBodyOp):
    """A fold's iterations [lower, upper) as a loop:

        %r = psk_kernel.fold %l = 1 to 3, %acc = %x0, %dst in (%s0, %s1) {site = …} : !… {
          … writes iteration %l's accumulator into %dst from %acc …
        }

    Iteration l reads `%acc` (the initial value, then the previous iteration's) and writes
    `%dst`, which alternates between the two scratch buffers; the result is the last
    iteration's buffer (the initial one when there is no iteration). The body reads the
    stacked parameters with `at %w[%l]`."""

    name = "psk_kernel.fold"

    lower = attr_def(IntAttr)
    upper = attr_def(IntAttr)
    init = operand_def(BufferType)
    scratch0 = operand_def(BufferType)
    scratch1 = operand_def(BufferType)
    result = result_def(BufferType)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def __init__(self, lower: int, upper: int, init: SSAValue, scratch: tuple[SSAValue, SSAValue],
                 site: str | None = None):
        t = init.type
        super().__init__(
            operands=[init, scratch[0], scratch[1]], result_types=[t],
            attributes=_site_attrs(site, lower=IntAttr(lower), upper=IntAttr(upper)),
            regions=[Region(Block(arg_types=[IndexType(), t, t]))],
        )

    @property
    def index(self) -> BlockArgument:
        return self.body.block.args[0]

    @property
    def acc(self) -> BlockArgument:
        return self.body.block.args[1]

    @property
    def dest(self) -> BlockArgument:
        return self.body.block.args[2]

    def verify_(self) -> None:
        super().verify_()
        t = self.init.type
        types = [a.type for a in self.body.block.args]
        if types != [IndexType(), t, t]:
            raise VerifyException("the body takes the index, the accumulator and the "
                                  "destination")
        if not (self.scratch0.type == self.scratch1.type == self.result.type == t):
            raise VerifyException("the accumulator, the scratch buffers and the result have "
                                  "one type")
        if self.upper.data < self.lower.data:
            raise VerifyException(f"the fold's bounds {self.lower.data}..{self.upper.data} "
                                  "decrease")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.index)
        printer.print_string(f" = {self.lower.data} to {self.upper.data}, ")
        printer.print_ssa_value(self.acc)
        printer.print_string(" = ")
        printer.print_operand(self.init)
        printer.print_string(", ")
        printer.print_ssa_value(self.dest)
        printer.print_string(" in (")
        printer.print_operand(self.scratch0)
        printer.print_string(", ")
        printer.print_operand(self.scratch1)
        printer.print_string(")")
        _print_op_attrs(printer, self.attributes, reserved=("lower", "upper"))
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> FoldOp:
        index = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        lower = parser.parse_integer(allow_boolean=False)
        parser.parse_keyword("to")
        upper = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        acc = parser.parse_argument(expect_type=False)
        parser.parse_punctuation("=")
        init = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dest = parser.parse_argument(expect_type=False)
        parser.parse_keyword("in")
        parser.parse_punctuation("(")
        s0 = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        s1 = parser.parse_unresolved_operand()
        parser.parse_punctuation(")")
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        region = parser.parse_region([index.resolve(IndexType()), acc.resolve(t), dest.resolve(t)])
        return cls.create(
            operands=[parser.resolve_operand(init, t), parser.resolve_operand(s0, t),
                      parser.resolve_operand(s1, t)],
            result_types=[t],
            attributes={"lower": IntAttr(lower), "upper": IntAttr(upper)} | attrs,
            regions=[region])


HOST_BODY_OPS: tuple[type[Operation], ...] = (
    MarkOp, ReleaseOp, AllocOp, ConvertOp, CopyOp, FillOp, AtOp, LaunchOp, CallOp, FoldOp,
)


# --------------------------------------------------------------------------------------
# Walking a module
# --------------------------------------------------------------------------------------


def kernels(module: Operation) -> dict[str, KernelOp]:
    return {op.sym_name.data: op for op in module.walk() if isinstance(op, KernelOp)}


def hosts(module: Operation) -> dict[str, HostOp]:
    return {op.sym_name.data: op for op in module.walk() if isinstance(op, HostOp)}


def host_ops(host: HostOp) -> Iterator[Operation]:
    """Every op of a host body, folds' bodies included, in order."""
    for op in host.body.walk():
        if op is not host:
            yield op


Kernel = Dialect(
    "psk_kernel",
    [
        KernelOp, ForOp, YieldOp, LoadOp, StoreOp, AddOp, SubOp, MulOp, DivOp, MinOp, MaxOp,
        NegOp, MathOp, CastOp, ConstantOp,
        HostOp, MarkOp, ReleaseOp, AllocOp, ConvertOp, CopyOp, FillOp, AtOp, LaunchOp, CallOp,
        FoldOp,
    ],
    [BufferType, LayoutAttr],
)
