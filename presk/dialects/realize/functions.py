"""Instances, calls and folds in PSK-Realize, and the queries on a recorded module
(its instances, its entry, how often each runs, how many launches one call makes).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (ArrayAttr, DictionaryAttr, FunctionType, IntegerAttr,
    StringAttr, SymbolRefAttr, UnitAttr, i64)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (IRDLOperation, attr_def, opt_attr_def, region_def, result_def,
    traits_def, var_operand_def, var_result_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (HasParent, IsTerminator, IsolatedFromAbove, ReturnLike,
    SymbolOpInterface, SymbolTable)
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import (AxisAttr, NamedArguments, parse_func_like, print_func_tail,
    site_attrs)
from presk.shapes import Axis

from .base import ComputeOp, RealizeOp, realize_op
from .types import RTensorType, _ttype, fits, rtype_text


# ---- instances, calls, folds, groups ----


@realize_op
class FuncOp(NamedArguments, IRDLOperation):
    """`psk_realize.func @RMSNorm.apply_2(%0: T, %1: T) -> T attributes {arg_names = ["θ.γ", "x"], dims = {D = 4 : i64}, source = "RMSNorm.apply"} { … }`: one instance of a Core function (`source`) at `dims`, its arguments tensors."""

    name = "psk_realize.func"

    sym_name = attr_def(StringAttr)
    function_type = attr_def(FunctionType)
    source = attr_def(StringAttr)
    arg_names = attr_def(ArrayAttr[StringAttr])
    dims = opt_attr_def(DictionaryAttr)
    entry = opt_attr_def(UnitAttr)
    result_names = opt_attr_def(ArrayAttr[StringAttr])
    """Optional: the results' paths (`result`, `grad.blocks.proj.w`) on a --grad entry."""
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove())

    @classmethod
    def make(cls, name: str, source: str, args: Sequence[tuple[str, RTensorType]],
             results: Sequence[RTensorType], dims: Mapping[str, int] | None = None,
             entry: bool = False) -> FuncOp:
        arg_types = [t for _, t in args]
        attrs: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "function_type": FunctionType.from_lists(arg_types, list(results)),
            "source": StringAttr(source),
            "arg_names": ArrayAttr(StringAttr(n) for n, _ in args),
        }
        if dims:
            attrs["dims"] = DictionaryAttr({k: IntegerAttr(v, i64) for k, v in dims.items()})
        if entry:
            attrs["entry"] = UnitAttr()
        return cls.create(attributes=attrs, regions=[Region(Block(arg_types=arg_types))])

    @property
    def func_name(self) -> str:
        return self.sym_name.data

    @property
    def dim_values(self) -> dict[str, int]:
        return {k: v.value.data for k, v in self.dims.data.items()} if self.dims else {}

    @property
    def source_func(self) -> str:
        return self.source.data

    @property
    def output_types(self) -> tuple[Attribute, ...]:
        return self.function_type.outputs.data

    def verify_(self) -> None:
        inputs = self.function_type.inputs.data
        if tuple(a.type for a in self.args) != inputs:
            raise VerifyException("the block arguments' types are not the function's inputs")
        if len(self.arg_name_list) != len(inputs):
            raise VerifyException(f"arg_names {list(self.arg_name_list)} do not name "
                                  f"{len(inputs)} arguments")
        for t in (*inputs, *self.output_types):
            if not isinstance(t, RTensorType):
                raise VerifyException(f"an instance takes and returns tensors, not {t}")
        if self.result_names is not None and len(self.result_names) != len(self.output_types):
            raise VerifyException(f"result_names names {len(self.result_names)} of "
                                  f"{len(self.output_types)} results")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        with printer.in_parens():
            printer.print_list(self.args, printer.print_block_argument)
        printer.print_string(" -> ")
        outs = self.output_types
        if len(outs) == 1:
            printer.print_attribute(outs[0])
        else:
            with printer.in_parens():
                printer.print_list(outs, printer.print_attribute)
        print_func_tail(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        attrs, inputs, region = parse_func_like(parser)
        return cls.create(attributes=attrs, regions=[region])


def lookup_instance(op: Operation, name: str) -> FuncOp:
    try:
        found = SymbolTable.lookup_symbol(op, name)
    except ValueError as err:
        raise VerifyException(f"@{name} cannot be looked up outside a module") from err
    if not isinstance(found, FuncOp):
        raise VerifyException(f"no psk_realize.func @{name} is defined")
    return found


class _CallLike(RealizeOp, ABC):
    callee = attr_def(SymbolRefAttr)
    HAS_CALLEE: ClassVar[bool] = True

    @property
    def callee_name(self) -> str:
        return self.callee.root_reference.data

    def _check_args(self, expected: Sequence[Attribute], given: Sequence[Attribute]) -> None:
        if len(expected) != len(given):
            raise VerifyException(f"@{self.callee_name} takes {len(expected)} arguments, "
                                  f"given {len(given)}")
        for i, (e, g) in enumerate(zip(expected, given)):
            if not fits(g, e):
                raise VerifyException(f"argument {i} of @{self.callee_name} is {rtype_text(e)}, "
                                      f"given {rtype_text(g)}")


@realize_op
class CallOp(_CallLike):
    """`%r = psk_realize.call @RMSNorm.apply_2(%a, %b) {site = "Block.apply/%4"} : (A, B) -> R`: a call of an instance."""

    name = "psk_realize.call"

    arguments = var_operand_def(RTensorType)
    res = var_result_def(RTensorType)

    def __init__(self, callee: FuncOp | str, args: Sequence[SSAValue | Operation],
                 result_types: Sequence[Attribute], *, site: str, name: str | None = None):
        cname = callee.func_name if isinstance(callee, FuncOp) else callee
        super().__init__(operands=[list(args)], result_types=[list(result_types)],
                         attributes=site_attrs(site, name, callee=SymbolRefAttr(cname)))

    def verify_(self) -> None:
        super().verify_()
        callee = lookup_instance(self, self.callee_name)
        self._check_args(callee.function_type.inputs.data, [a.type for a in self.arguments])
        outs = callee.output_types
        if len(outs) != len(self.res) or not all(fits(r.type, o) for r, o in zip(self.res, outs)):
            raise VerifyException(f"@{self.callee_name} returns "
                                  f"{', '.join(rtype_text(o) for o in outs)}, not "
                                  f"{', '.join(rtype_text(r.type) for r in self.res)}")


@realize_op
class FoldOp(_CallLike):
    """`%r = psk_realize.fold @Block.apply(%s0, %s1, %acc) {from = 1 : i64, site = "Tower.apply/%3", to = 3 : i64} : (S0, S1, T) -> T`: iterations from..to-1 of the callee over the leading axis of the stacked operands;
    the last operand is the accumulator.

    The loop form of a fold's sweeps (what psk-differentiate's `fold_fwd` and `fold_bwd`
    record as): `acc = k` names the callee's result that is the accumulator (else its
    only one); `stacks = [i, …]` the callee's results stacked, each a result of the fold
    after the accumulator, of the iterations' count (`to`) along a new leading axis
    (iteration l's at element l; before `from` unwritten); `reverse` runs the iterations
    from to − 1 down to from (a reverse sweep)."""

    name = "psk_realize.fold"

    arguments = var_operand_def(RTensorType)
    start = attr_def(IntegerAttr, attr_name="from")
    stop = attr_def(IntegerAttr, attr_name="to")
    acc_result = opt_attr_def(IntegerAttr, attr_name="acc")
    stacks = opt_attr_def(ArrayAttr[IntegerAttr])
    reverse = opt_attr_def(UnitAttr)
    res = var_result_def(RTensorType)

    def __init__(self, callee: FuncOp | str, stacked: Sequence[SSAValue | Operation],
                 acc: SSAValue | Operation, start: int, stop: int, *, site: str,
                 name: str | None = None, acc_result: int | None = None,
                 stacks: Sequence[tuple[int, Attribute]] = (), reverse: bool = False):
        """`stacks`: (the callee's result index, its type) of each result stacked."""
        cname = callee.func_name if isinstance(callee, FuncOp) else callee
        stacked_types = [RTensorType(_ttype_of(t).element,
                                     ArrayAttr([AxisAttr.from_axis(Axis(None, stop)),
                                                *_ttype_of(t).axes.data]))
                         for _, t in stacks]
        more = {"acc": IntegerAttr(acc_result, i64) if acc_result is not None else None,
                "stacks": ArrayAttr([IntegerAttr(i, i64) for i, _ in stacks]) if stacks
                else None,
                "reverse": UnitAttr() if reverse else None}
        super().__init__(operands=[[*stacked, acc]],
                         result_types=[[_ttype(acc), *stacked_types]],
                         attributes=site_attrs(site, name, callee=SymbolRefAttr(cname),
                                           **{"from": IntegerAttr(start, i64),
                                              "to": IntegerAttr(stop, i64)}, **more))

    @property
    def result(self) -> SSAValue:
        """The accumulator after the last iteration."""
        return self.res[0]

    @property
    def stacked(self) -> list[SSAValue]:
        return list(self.arguments)[:-1]

    @property
    def acc(self) -> SSAValue:
        return self.arguments[-1]

    @property
    def acc_index(self) -> int:
        """Which of the callee's results is the accumulator."""
        return self.acc_result.value.data if self.acc_result is not None else 0

    @property
    def stack_list(self) -> list[int]:
        """The callee's results stacked, in the order of the fold's results 1, 2, …"""
        return [a.value.data for a in self.stacks.data] if self.stacks is not None else []

    @property
    def bounds(self) -> tuple[int, int]:
        return self.start.value.data, self.stop.value.data

    def verify_(self) -> None:
        super().verify_()
        start, stop = self.bounds
        if not self.arguments:
            raise VerifyException("a fold needs an accumulator")
        for s in self.stacked:
            if not s.type.rank or s.type.sizes[0] < stop:
                raise VerifyException(f"{rtype_text(s.type)} has no iterations {start}..{stop - 1}")
        if not 0 <= start < stop:
            raise VerifyException(f"iterations {start}..{stop - 1} are empty")
        callee = lookup_instance(self, self.callee_name)
        sliced = [RTensorType(s.type.element, ArrayAttr(s.type.axes.data[1:]))
                  for s in self.stacked]
        self._check_args(callee.function_type.inputs.data, [*sliced, self.acc.type])
        outs = callee.output_types
        k = self.acc_index
        if not 0 <= k < len(outs) or (self.acc_result is None and len(outs) != 1) or \
                not fits(outs[k], self.acc.type) or not fits(self.result.type, self.acc.type):
            raise VerifyException(f"@{self.callee_name} must return the accumulator's type "
                                  f"{rtype_text(self.acc.type)}")
        stacks = self.stack_list
        if len(stacks) != len(self.res) - 1 or set(stacks) | {k} != set(range(len(outs))):
            raise VerifyException(f"every result of @{self.callee_name} but the accumulator "
                                  f"is stacked, once: stacks {stacks}, {len(self.res) - 1} "
                                  "stacked results")
        for i, r in zip(stacks, list(self.res)[1:]):
            t = r.type
            if not t.rank or t.sizes[0] != stop or \
                    not fits(RTensorType(t.element, ArrayAttr(t.axes.data[1:])), outs[i]):
                raise VerifyException(f"{rtype_text(t)} is no stack of {stop} × "
                                      f"{rtype_text(outs[i])}")


def _ttype_of(t: Attribute) -> RTensorType:
    assert isinstance(t, RTensorType)
    return t


@realize_op
class ReturnOp(RealizeOp):
    """`psk_realize.return %r {site = "loss/%8"} : T`: an instance's results."""

    name = "psk_realize.return"

    values = var_operand_def(RTensorType)

    traits = traits_def(IsTerminator(), ReturnLike(), HasParent(FuncOp))

    def __init__(self, values: Sequence[SSAValue | Operation], *, site: str):
        super().__init__(operands=[list(values)], attributes={"site": StringAttr(site)})

    def verify_(self) -> None:
        super().verify_()
        func = self.parent_op()
        assert isinstance(func, FuncOp)
        outs = func.output_types
        if len(outs) != len(self.values) or \
                not all(fits(v.type, o) for v, o in zip(self.values, outs)):
            raise VerifyException(f"returns {', '.join(rtype_text(v.type) for v in self.values)}"
                                  f", the function {', '.join(rtype_text(o) for o in outs)}")


# --------------------------------------------------------------------------------------
# Walking a recorded module
# --------------------------------------------------------------------------------------


def is_compute(op: Operation) -> bool:
    """One launch: an op computing on reals, or a group (not convert, constant, slice,
    call, fold, return)."""
    return isinstance(op, RealizeOp) and op.COMPUTE


def is_elementwise(op: Operation) -> bool:
    """An element-wise compute op (unary, powi, heaviside, binary); convert is
    element-wise but no compute."""
    return isinstance(op, ComputeOp) and op.ELEMENTWISE


def is_arithmetic(op: Operation) -> bool:
    return isinstance(op, ComputeOp)


def funcs(module: Operation) -> list[FuncOp]:
    """The instances, in the module's order (callees before their callers)."""
    return [op for op in module.regions[0].block.ops if isinstance(op, FuncOp)]


def entry_func(module: Operation) -> FuncOp:
    fs = funcs(module)
    for f in fs:
        if f.entry is not None:
            return f
    if not fs:
        raise VerifyException("no psk_realize.func in the module")
    return fs[-1]


def instance_runs(module: Operation) -> dict[str, int]:
    """How many times each instance runs in one call of the entry (a fold from..to runs
    its callee to − from times); an instance the entry does not reach runs 0 times."""
    by_name = {f.func_name: f for f in funcs(module)}
    runs = {name: 0 for name in by_name}
    entry = entry_func(module)

    def visit(f: FuncOp, times: int) -> None:
        runs[f.func_name] += times
        for op in f.body.block.ops:
            if isinstance(op, CallOp):
                visit(by_name[op.callee_name], times)
            elif isinstance(op, FoldOp):
                start, stop = op.bounds
                visit(by_name[op.callee_name], times * (stop - start))

    visit(entry, 1)
    return runs


def epilogue_of(op: Operation) -> Operation | None:
    """The element-wise reader a contraction is launched with as its epilogue (one launch
    for both; the reader's steps run on each finished sum, before the store): the one op
    that reads a `dot` or `contract` — an element-wise op or a `group` of the kernel's
    own arithmetic (`_tile_arithmetic`: add, mul, relu, …; not gelu) — of its shape,
    reading it in its own type at its own indices (a value broadcast from the product, or
    read through a convert, is not an epilogue); else None. convert-psk-realize-to-kernel
    decides by it, the listings count by it."""
    from .ops import ContractOp, DotOp, GroupOp, _operand_places
    if not isinstance(op, (DotOp, ContractOp)):
        return None
    uses = list(op.result.uses)
    if len(uses) != 1:
        return None
    reader = uses[0].operation
    if not (is_elementwise(reader) or isinstance(reader, GroupOp)) or \
            _ttype(reader.results[0]).sizes != op.result.type.sizes:
        return None
    steps = reader.steps if isinstance(reader, GroupOp) else [reader]
    if not all(_tile_arithmetic(s) for s in steps):
        return None
    identity = list(range(op.result.type.rank))
    if isinstance(reader, GroupOp):
        args = {a for a, v in zip(reader.body.block.args, reader.inputs) if v is op.result}
        reads = [places for step in reader.steps for v, places in _operand_places(step)
                 if v in args]
    else:
        reads = [places for v, places in _operand_places(reader) if v is op.result]
    return reader if reads and all(p == identity for p in reads) else None


def _tile_arithmetic(op: Operation) -> bool:
    """Whether an element-wise step is the kernel's own arithmetic (presk.ops
    `kernel_arithmetic`): a register tile runs it on its vectors. A math-library call in
    a tile runs lane by lane, R × C calls a tile: on the scaled Tower's gradient
    (B = 1024, f32) dy · wᵀ finished by gelu's slope took 68 ms a launch against 13 ms
    for the product and the slope as two kernels, so such a reader stays a kernel of its
    own."""
    from presk import ops
    from .elementwise import HeavisideOp, PowIOp
    if isinstance(op, PowIOp):
        return True
    fn = getattr(op, "FUNCTION", None)
    return not isinstance(op, HeavisideOp) and fn is not None and ops.kernel_arithmetic(fn)


def epilogue_count(module: Operation) -> int:
    """The contractions one call of the entry launches together with their epilogue."""
    runs = instance_runs(module)
    return sum(runs[f.func_name] * sum(1 for op in f.body.block.ops
                                       if epilogue_of(op) is not None)
               for f in funcs(module))


def launch_count(module: Operation) -> int:
    """The compute ops (a group counts once) one call of the entry executes: each
    instance's top-level compute ops times the number of times it runs."""
    runs = instance_runs(module)
    return sum(runs[f.func_name] * sum(1 for op in f.body.block.ops if is_compute(op))
               for f in funcs(module))
