"""PSK-Kernel's kernels: `kernel` (a loop nest over buffers), `for` with its `yield`,
`load` and `store`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import (ArrayAttr, FunctionType, IndexType, IntAttr, IntegerAttr,
    StringAttr, SymbolRefAttr, i64)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import (attr_def, operand_def, opt_attr_def, region_def, result_def,
    traits_def, var_operand_def, var_result_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (HasParent, IsTerminator, IsolatedFromAbove, NoTerminator, Pure,
    SymbolOpInterface, SymbolTable)
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import print_op_attrs
from presk.summation import partials_for

from .base import (KernelBaseOp, RangeOp, _BufferFunction, kernel_op, parse_attrs_and_types,
    print_attrs_and_types)
from .scalar import (AddOp, CastOp, ConstantOp, DivOp, FmaOp, MathOp, MaxOp, MinOp, MulOp,
    NegOp, SubOp)
from .types import BufferType, LayoutAttr, _is_scalar_float, type_name


@kernel_op
class KernelOp(_BufferFunction):
    """`psk_kernel.kernel @k0(%0: !psk_kernel.buffer<…>, %1: …) attributes {layout = …,
    outputs = 1 : i64, title = "pow 2"} { … }`: a loop nest, shared by every launch."""

    name = "psk_kernel.kernel"

    layout = attr_def(LayoutAttr)
    title = attr_def(StringAttr)
    parts = opt_attr_def(ArrayAttr[SymbolRefAttr])
    """Set by psk-kernel-split: kernels over contiguous ranges of this one's outermost
    loop, which together compute what it computes; native code runs them on threads."""

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
        for part in self.parts or ():
            found = SymbolTable.lookup_symbol(self, part.root_reference.data)
            if not isinstance(found, KernelOp) or found.arg_types != self.arg_types:
                raise VerifyException(f"part {part} is not a kernel over this one's buffers")


@kernel_op
class ForOp(RangeOp):
    """`%s = psk_kernel.for %i = 0 to 4 iter(%a = %init) -> (f32) { … psk_kernel.yield %n
    : f32 }`: a loop over [lower, upper) step 1; with loop-carried scalars it runs in
    order, without them its iterations are independent.

    `… attributes {partials = 64}`: a sum in the blocked order of presk/summation.py. It
    carries one scalar from +0, its body yields `add %a, %term` (the term independent of
    %a); iteration i adds its term to partial (i − lower) mod partials, and the partials
    are then added pairwise (p_j + p_{j+h}, h = partials/2 … 1). `partials` is
    `partials_for(trip)`."""

    name = "psk_kernel.for"

    inits = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")
    partials = opt_attr_def(IntegerAttr)

    def __init__(self, lower: int, upper: int, inits: Sequence[SSAValue | Operation] = (),
                 body: Block | None = None, partials: int | None = None):
        types = [SSAValue.get(v).type for v in inits]
        body = body or Block(arg_types=[IndexType(), *types])
        attributes: dict[str, Attribute] = {"lower": IntAttr(lower), "upper": IntAttr(upper)}
        if partials is not None:
            attributes["partials"] = IntegerAttr(partials, i64)
        super().__init__(
            operands=[list(inits)], result_types=[types], attributes=attributes,
            regions=[Region(body)],
        )

    @property
    def width(self) -> int | None:
        """A blocked sum's number of partials (None: the loop runs in order)."""
        return None if self.partials is None else self.partials.value.data

    @property
    def term(self) -> SSAValue | None:
        """A blocked sum's term: the operand its yield adds to the carried partial."""
        last = self.body.block.last_op
        if not isinstance(last, YieldOp) or len(last.values) != 1:
            return None
        add = last.values[0].owner
        if isinstance(add, AddOp) and add.operands[0] is self.carried[0]:
            return add.operands[1]
        return None

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
        self._verify_range("loop")
        if self.partials is not None:
            self._verify_blocked()

    def _verify_blocked(self) -> None:
        if len(self.inits) != 1:
            raise VerifyException("a blocked sum carries one scalar")
        init = self.inits[0].owner
        if not isinstance(init, ConstantOp) or init.number != 0.0 or \
                math.copysign(1.0, init.number) < 0:
            raise VerifyException("a blocked sum starts from the constant +0")
        if self.term is None or len(list(self.carried[0].uses)) != 1:
            raise VerifyException("a blocked sum's body yields `add` of the carried partial "
                                  "and a term that does not read it")
        want = partials_for(self.trip)
        if self.width != want:
            raise VerifyException(f"a blocked sum of {self.trip} terms has {want} partials, "
                                  f"not {self.width}")

    def print(self, printer: Printer) -> None:
        self._print_range(printer, self.induction)
        if self.inits:
            printer.print_string(" iter(")
            printer.print_list(zip(self.carried, self.inits), lambda p: (
                printer.print_ssa_value(p[0]), printer.print_string(" = "),
                printer.print_ssa_value(p[1])))
            printer.print_string(") -> (")
            printer.print_list([v.type for v in self.inits], printer.print_attribute)
            printer.print_string(")")
        print_op_attrs(printer, self.attributes, reserved=("lower", "upper"), keyword=True)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> ForOp:
        index, bounds = cls._parse_range(parser)
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
                        attributes=bounds | attrs,
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


def _verify_access(buffer: SSAValue, indices: Sequence[SSAValue], value: Attribute,
                   what: str) -> None:
    """A load's or store's buffer and indices, and its value, which is in the buffer's
    compute type (`what` the buffer does with it)."""
    t = buffer.type
    if not isinstance(t, BufferType):
        raise VerifyException(f"{type_name(t)} is not a buffer")
    if len(indices) != t.rank:
        raise VerifyException(f"{t.listing()} takes {t.rank} indices, given {len(indices)}")
    for i in indices:
        if not isinstance(i.type, IndexType):
            raise VerifyException(f"an index is an index, not {type_name(i.type)}")
    if value != t.compute:
        raise VerifyException(f"a {type_name(t.element)} {what} {type_name(t.compute)}, not "
                              f"{type_name(value)}")


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
        _verify_access(self.buffer, self.indices, self.result.type, "element loads as")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_indices(printer, self.buffer, self.indices)
        print_attrs_and_types(printer, self, self.buffer.type, self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> LoadOp:
        buffer, indices = _parse_indexed(parser)
        pos = parser.pos
        attrs, (buffer_type, result) = parse_attrs_and_types(parser, 2)
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
        _verify_access(self.buffer, self.indices, self.value.type, "buffer stores")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.value)
        printer.print_string(", ")
        _print_indices(printer, self.buffer, self.indices)
        print_attrs_and_types(printer, self, self.buffer.type)

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


KERNEL_BODY_OPS: tuple[type[Operation], ...] = (
    ForOp, YieldOp, LoadOp, StoreOp, AddOp, SubOp, MulOp, DivOp, MinOp, MaxOp, NegOp,
    FmaOp, MathOp, CastOp, ConstantOp,
)
