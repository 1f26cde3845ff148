"""PSK-Kernel's host: `host` (a recorded instance over buffers) and its ops (arena
marks, allocations, converts, copies, fills, views, launches, calls, folds), and the
walks of a module.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Iterator, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (ArrayAttr, FloatAttr, FunctionType, IndexType, IntAttr,
    IntegerAttr, ModuleOp, StringAttr, SymbolRefAttr, UnitAttr, f64, i64)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.irdl import (attr_def, operand_def, opt_attr_def, region_def, result_def,
    traits_def, var_operand_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import print_op_attrs, site_attrs

from .base import (KernelBaseOp, RangeOp, _BufferFunction, _enclosing, kernel_op, parse_attrs_and_types,
    print_attrs_and_types)
from .loops import KERNEL_BODY_OPS, KernelOp
from .types import BufferType, fits


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


@kernel_op
class MarkOp(HostBodyOp):
    """`%m = psk_kernel.mark`: the arena's top, to release back to."""

    name = "psk_kernel.mark"

    result = result_def(IndexType)

    def __init__(self):
        super().__init__(result_types=[IndexType()])

    def print(self, printer: Printer) -> None:
        print_op_attrs(printer, self.attributes)

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
        print_op_attrs(printer, self.attributes)

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
        super().__init__(result_types=[t], attributes=site_attrs(site, name or None))

    def print(self, printer: Printer) -> None:
        print_attrs_and_types(printer, self, self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> AllocOp:
        attrs, types = parse_attrs_and_types(parser, 1)
        return cls.create(result_types=types, attributes=attrs)


class _SourceToDest(HostBodyOp, ABC):
    """`psk_kernel.op %src to %dst {…} : !src_type -> !dst_type`"""

    source = operand_def(BufferType)
    dest = operand_def(BufferType)

    def __init__(self, source: SSAValue | Operation, dest: SSAValue | Operation,
                 site: str | None = None):
        super().__init__(operands=[source, dest], attributes=site_attrs(site))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        printer.print_string(" to ")
        printer.print_operand(self.dest)
        print_attrs_and_types(printer, self, self.source.type, self.dest.type)

    @classmethod
    def parse(cls, parser: Parser):
        source = parser.parse_unresolved_operand()
        parser.parse_keyword("to")
        dest = parser.parse_unresolved_operand()
        attrs, (a, b) = parse_attrs_and_types(parser, 2)
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
        super().__init__(operands=[dest], attributes=site_attrs(
            site, value=FloatAttr(float(value), f64)))

    @property
    def number(self) -> float:
        return float(self.value.value.data)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.dest)
        print_attrs_and_types(printer, self, self.dest.type)

    @classmethod
    def parse(cls, parser: Parser) -> FillOp:
        dest = parser.parse_unresolved_operand()
        attrs, (t,) = parse_attrs_and_types(parser, 1)
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
        print_attrs_and_types(printer, self, self.source.type, self.result.type,
                              reserved=("index",))

    @classmethod
    def parse(cls, parser: Parser) -> AtOp:
        source = parser.parse_unresolved_operand()
        parser.parse_punctuation("[")
        literal = parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
        dynamic = None if literal is not None else parser.parse_unresolved_operand()
        parser.parse_punctuation("]")
        attrs, (a, b) = parse_attrs_and_types(parser, 2)
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
        print_op_attrs(printer, self.attributes, reserved=("callee",))
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
    stores (its first output's); `sites` every operation it computes (one per launch it
    would take unfused); `fused` marks a fusion group's launch, `name` the let's source
    name; `stores` the value each output holds, where there are several."""

    name = "psk_kernel.launch"

    sites = opt_attr_def(ArrayAttr[StringAttr])
    fused = opt_attr_def(UnitAttr)
    source_name = opt_attr_def(StringAttr, attr_name="name")
    stores = opt_attr_def(ArrayAttr[StringAttr])
    """The site each output holds, where the kernel has several (psk-kernel-fuse-siblings)."""

    TARGET: ClassVar[type[Operation]] = KernelOp

    def __init__(self, kernel: str, args: Sequence[SSAValue | Operation], site: str,
                 sites: Sequence[str] = (), fused: bool = False, name: str | None = None):
        super().__init__(
            operands=[list(args)],
            attributes=site_attrs(
                site, name or None, callee=SymbolRefAttr(kernel),
                sites=ArrayAttr(StringAttr(s) for s in sites) if sites else None,
                fused=UnitAttr() if fused else None),
        )

    @property
    def site_list(self) -> list[str]:
        if self.sites is not None:
            return [s.data for s in self.sites]
        return [self.site.data] if self.site is not None else []

    @property
    def store_sites(self) -> list[str]:
        """The site of the value each output holds: `stores`, or the launch's site."""
        if self.stores is not None:
            return [s.data for s in self.stores]
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
                         attributes=site_attrs(site, callee=SymbolRefAttr(host)))


@kernel_op
class FoldOp(HostBodyOp, RangeOp):
    """`%r = psk_kernel.fold %l = 1 to 3, %acc = %x0, %dst in (%s0, %s1) {site = …} : !… { … }`: a fold's iterations [lower, upper) as a loop:

        %r = psk_kernel.fold %l = 1 to 3, %acc = %x0, %dst in (%s0, %s1) {site = …} : !… {
          … writes iteration %l's accumulator into %dst from %acc …
        }

    Iteration l reads `%acc` (the initial value, then the previous iteration's) and writes
    `%dst`, which alternates between the two scratch buffers; the result is the last
    iteration's buffer (the initial one when there is no iteration). The body reads the
    stacked parameters with `at %w[%l]`, and may write an iteration's other results into
    `at %s[%l]` of stacks made before the loop.

    `reverse` (the reverse sweep of a fold): the iterations run from upper − 1 down to
    lower. Either way the k-th iteration run (k = 0, 1, …: `step`) writes scratch k mod 2."""

    name = "psk_kernel.fold"

    init = operand_def(BufferType)
    scratch0 = operand_def(BufferType)
    scratch1 = operand_def(BufferType)
    reverse = opt_attr_def(UnitAttr)
    result = result_def(BufferType)
    body = region_def("single_block")

    traits = traits_def(NoTerminator())

    def __init__(self, lower: int, upper: int, init: SSAValue, scratch: tuple[SSAValue, SSAValue],
                 site: str | None = None, reverse: bool = False):
        t = init.type
        super().__init__(
            operands=[init, scratch[0], scratch[1]], result_types=[t],
            attributes=site_attrs(site, lower=IntAttr(lower), upper=IntAttr(upper),
                                  reverse=UnitAttr() if reverse else None),
            regions=[Region(Block(arg_types=[IndexType(), t, t]))],
        )

    def iterations(self) -> list[int]:
        """The iterations in the order they run."""
        order = range(self.lower.data, self.upper.data)
        return list(reversed(order)) if self.reverse is not None else list(order)

    def step(self, iteration: int) -> int:
        """How many iterations run before this one (its parity picks the scratch)."""
        if self.reverse is not None:
            return self.upper.data - 1 - iteration
        return iteration - self.lower.data

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
        self._verify_range("fold")

    def print(self, printer: Printer) -> None:
        self._print_range(printer, self.index)
        printer.print_string(", ")
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
        print_attrs_and_types(printer, self, self.result.type, reserved=("lower", "upper"))
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @classmethod
    def parse(cls, parser: Parser) -> FoldOp:
        index, bounds = cls._parse_range(parser)
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
        attrs, (t,) = parse_attrs_and_types(parser, 1)
        region = parser.parse_region([index.resolve(IndexType()), acc.resolve(t), dest.resolve(t)])
        return cls.create(
            operands=[parser.resolve_operand(init, t), parser.resolve_operand(s0, t),
                      parser.resolve_operand(s1, t)],
            result_types=[t],
            attributes=bounds | attrs,
            regions=[region])


HOST_BODY_OPS: tuple[type[Operation], ...] = (
    MarkOp, ReleaseOp, AllocOp, ConvertOp, CopyOp, FillOp, AtOp, LaunchOp, CallOp, FoldOp,
)


# --------------------------------------------------------------------------------------
# Walking a module
# --------------------------------------------------------------------------------------


def _symbol_ops(module: Operation) -> Iterator[Operation]:
    """Where a module's kernels and hosts stand: a ModuleOp's top-level ops (a walk would
    visit every op of every kernel's loops, which the passes that ask round after round
    paid for), any other op's walk."""
    return iter(module.body.block.ops) if isinstance(module, ModuleOp) else module.walk()


def kernels(module: Operation) -> dict[str, KernelOp]:
    return {op.sym_name.data: op for op in _symbol_ops(module) if isinstance(op, KernelOp)}


def hosts(module: Operation) -> dict[str, HostOp]:
    return {op.sym_name.data: op for op in _symbol_ops(module) if isinstance(op, HostOp)}


def host_ops(host: HostOp) -> Iterator[Operation]:
    """Every op of a host body, folds' bodies included, in order."""
    for op in host.body.walk():
        if op is not host:
            yield op


def _launch_order(module: Operation) -> list[str]:
    """The kernels in the order of their first launch in one call of the entry (the host
    marked `entry`, else the last), then in the hosts the entry does not reach."""
    by_name = hosts(module)
    order: list[str] = []
    seen: set[str] = set()

    def visit(host: HostOp) -> None:
        for op in host_ops(host):
            if isinstance(op, LaunchOp) and op.callee_name not in order:
                order.append(op.callee_name)
            elif isinstance(op, CallOp) and op.callee_name not in seen:
                seen.add(op.callee_name)
                visit(by_name[op.callee_name])

    entries = [h for h in by_name.values() if h.entry is not None]
    start = entries[0] if entries else (list(by_name.values())[-1] if by_name else None)
    for host in ([start] if start is not None else []) + list(by_name.values()):
        if host.sym_name.data not in seen:
            seen.add(host.sym_name.data)
            visit(host)
    return order


def number_kernels(module: ModuleOp) -> None:
    """Name the kernels k0, k1, … in the order of their first launch (`_launch_order`;
    a kernel nothing launches after, in module order), put them at the module's start in
    that order, and make every launch and `parts` list follow."""
    kernel_ops = [op for op in module.ops if isinstance(op, KernelOp)]
    order = _launch_order(module)
    rank = {name: i for i, name in enumerate(order)}
    for k in kernel_ops:
        rank.setdefault(k.sym_name.data, len(rank))
    rename = {old: f"k{i}" for old, i in rank.items()}
    for k in kernel_ops:
        k.sym_name = StringAttr(rename[k.sym_name.data])
        if k.parts is not None:
            k.parts = ArrayAttr(SymbolRefAttr(rename[p.root_reference.data]) for p in k.parts)
    for op in module.walk():
        if isinstance(op, LaunchOp) and op.callee_name in rename:
            op.callee = SymbolRefAttr(rename[op.callee_name])
    rest = [op for op in module.ops if not isinstance(op, KernelOp)]
    for op in list(module.ops):
        op.detach()
    module.body.block.add_ops(sorted(kernel_ops, key=lambda k: int(k.sym_name.data[1:])))
    module.body.block.add_ops(rest)
