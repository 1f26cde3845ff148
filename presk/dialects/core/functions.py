"""Functions and calls in PSK-Core: `func`, `return`, `call`, `fold` and the ops
differentiation makes from them (`fold_scan`, `fold_vjp`, `fold_fwd`, `fold_bwd`, `grad`).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (ArrayAttr, DictionaryAttr, FunctionType, IntegerAttr,
    StringAttr, SymbolRefAttr, TupleType, UnitAttr, i64)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (IRDLOperation, attr_def, operand_def, opt_attr_def, region_def,
    result_def, traits_def, var_operand_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (CallableOpInterface, HasParent, IsTerminator, IsolatedFromAbove,
    ReturnLike, SymbolOpInterface)
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import NamedArguments, parse_func_like, print_func_tail, site_attrs, size_value
from presk.shapes import ShapeError, Size

from .base import CoreOp, _dims_attr, _infer, _names_attr, _value_type, core_op
from .modules import _lookup
from .types import Binder, ParamsAttr, TensorAttr, type_conforms, type_symbols, type_text


def lookup_function(op: Operation, callee: str) -> FuncOp:
    found = _lookup(op, callee)
    if not isinstance(found, FuncOp):
        raise VerifyException(f"no psk_core.func @{callee} is defined")
    return found


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
class FuncOp(NamedArguments, IRDLOperation):
    """`psk_core.func @Linear.apply(%0 : !psk_core.params<Linear{In, Out}>, %1 : …) -> … attributes {arg_names = ["θ", "x"], dims = ["In", "Out"]} { … }`: a function, polymorphic in `dims`; its block arguments are its arguments.

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
        print_func_tail(printer, self)

    @classmethod
    def parse(cls, parser: Parser) -> FuncOp:
        attrs, inputs, region = parse_func_like(parser)
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

    @staticmethod
    def call_attrs(callee: FuncOp | str, dims: Mapping[str, Size] | None, *, site: str,
                   name: str | None, **more: Attribute | None) -> dict[str, Attribute]:
        """The attributes of a call-like op: its site and name, `callee`, the callee's
        `dims` in its order, and `more` (those not None)."""
        return site_attrs(site, name, callee=SymbolRefAttr(_callee_name(callee)),
                          dims=_dims_attr(_ordered_dims(callee, dims or {})), **more)


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
    """`%r = psk_core.call @RMSNorm.apply(%n, %x, %eps) {dims = {D = 4 : i64}, site = "Block.apply/%4"} : (P, X, f64) -> R`: `call RMSNorm.apply{D = 4}(norm, x, %3)`."""

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
            attributes=self.call_attrs(callee, dims, site=site, name=name),
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
    """`%r = psk_core.fold @Block.apply(%blocks, %x) {count = 3 : i64, site = "Tower.apply/%3"} : (!psk_core.params<stack{3}(Block)>, X) -> X`: `fold 3 Block.apply(stacked blocks; acc x)`; the callee takes one element of the
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
            attributes=self.call_attrs(
                callee, dims, site=site, name=name,
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


def _count_of(stacked: Attribute) -> int:
    if not isinstance(stacked, ParamsAttr) or not stacked.stack.data:
        raise VerifyException(f"a fold runs over a stacked params type, not {type_text(stacked)}")
    count = stacked.stack_counts[0]
    if not isinstance(count, int):
        raise VerifyException(f"differentiating a fold needs its count, not `{count}`")
    return count


def _check_per_step(op: _CallLike, values: TupleType, extra: int, what: str) -> None:
    """A fold op's tuple of one value per step of its stacked operand (and `extra` more),
    and its callee's existence; `what` says what the tuple holds, `{}` its length."""
    count = _count_of(op.stacked.type)  # type: ignore[attr-defined]
    if len(values.types) != count + extra:
        raise VerifyException(f"a fold of {count} steps " + what.format(count + extra))
    lookup_function(op, op.callee_name)


@core_op
class FoldScanOp(_CallLike):
    """`%xs = psk_core.fold_scan @Block.apply(%blocks, %x) {site = "Tower.apply/%3"} : (S, X) -> tuple<X, X, X, X>`: a fold that keeps every accumulator, the tuple (x₀, x₁, …, xₙ), x₀ the initial one
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
            attributes=self.call_attrs(callee, dims, site=site, name=name),
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
    """`%r = psk_core.fold_vjp @Block.apply.vjp(%blocks, %xs, %dy) {site = "Tower.apply.vjp/%9"} : (S, tuple<X, X, X, X>, X) -> tuple<S, X>`: the reverse of a fold, from the last step to the first, the step's vjp (the callee,
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
            attributes=self.call_attrs(callee, dims, site=site, name=name),
        )

    def verify_(self) -> None:
        super().verify_()
        _check_per_step(self, self.carries.type, 1, "keeps {} accumulators")


@core_op
class FoldFwdOp(_CallLike):
    """`%r = psk_core.fold_fwd @Block.apply.fwd(%blocks, %x) {site = "Tower.apply.fwd/%3"} : (S, X) -> tuple<F, F, F>`: a fold whose steps run the step's forward sweep (the callee, a `.fwd`, returning
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
            attributes=self.call_attrs(callee, dims, site=site, name=name),
        )

    def verify_(self) -> None:
        super().verify_()
        _check_per_step(self, self.result.type, 0, "has {} step results")


@core_op
class FoldBwdOp(_CallLike):
    """`%r = psk_core.fold_bwd @Block.apply.bwd(%blocks, %steps, %dy) {site = "Tower.apply.bwd/%9"} : (S, tuple<F, F, F>, X) -> tuple<S, X>`: the reverse of a `fold_fwd`, from the last step to the first, the step's reverse
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
            attributes=self.call_attrs(callee, dims, site=site, name=name),
        )

    def verify_(self) -> None:
        super().verify_()
        _check_per_step(self, self.steps.type, 0, "has {} step results")


@core_op
class GradOp(_CallLike):
    """`%g = psk_core.grad @loss(%θ, %x) {site = "main/%4"} : (P, X) -> P`: `grad(f)(args)`, f's gradient in its first argument; with `value`, the pair
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
            attributes=self.call_attrs(callee, dims, site=site, name=name,
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
