"""PSK-Realize (`psk_realize`): one entry recorded at concrete dims under a realization.

Where PSK-Core is polymorphic (symbolic dims, `...`, ℝ), PSK-Realize is what one call of
an entry (`--entry loss --dim B=4`) runs: every value has a concrete shape and a builtin
float element type (f64, f32 or bf16) chosen by the realization, every change of type is
an explicit `convert`, every function is an INSTANCE (one per distinct dims, argument
types and hyperparameter values), and element-wise work may be grouped (`group`).

Textual forms (one line each; attributes print sorted, `site` on every op):

  type      !psk_realize.tensor<f32, batch: 4, model: 4>     scalar !psk_realize.tensor<f64>
            listing form (rtype_text): f32[batch: 4, model: 4], f64[]
  func      psk_realize.func @RMSNorm.apply_2(%0: T, %1: T) -> T attributes {arg_names = ["θ.γ", "x"],
                dims = {D = 4 : i64}, source = "RMSNorm.apply"} { … }       (`entry` unit attr on the entry)
  unary     %r = psk_realize.sqrt %a {site = "RMSNorm.apply/%7"} : T
            neg sqrt exp log tanh sigmoid relu gelu softplus abs sin cos erf erf_slope gelu_slope;
            psk_realize.powi %a {n = 2 : i64, …} : T;  psk_realize.heaviside %a {at_zero = 0.5 : f64, …} : T
  binary    %r = psk_realize.add %a, %b {lhs_map = array<i64: 0>, rhs_map = array<i64: 0, 1>, site = …} : (A, B) -> R
            add sub mul div minimum maximum pow
  reduce    %r = psk_realize.mean %a {axis = 1 : i64, axis_name = "model", site = …} : (A) -> R
            sum mean max min logsumexp; no `axis` = over every axis
  softmax   %r = psk_realize.softmax %a {axis = 1 : i64, axis_name = "model", site = …} : T
  dot       %r = psk_realize.dot %a, %b {site = …} : (A, B) -> R    (a's last axis with b's first)
  contract  %r = psk_realize.contract %a, %b {lhs_axes = array<i64: …>, rhs_axes = array<i64: …>[, perm = array<i64: …>]}
  sum_to    %r = psk_realize.sum_to %a {keep = array<i64: …>, …} : (A) -> R
  spread    %r = psk_realize.spread %a, %like {places = array<i64: …>[, mean], …} : (A, L) -> L
  broadcast %r = psk_realize.broadcast %a {map = array<i64: …>, …} : (A) -> R
  convert   %r = psk_realize.convert %a {site = <the reader's site>} : (f64-tensor) -> f32-tensor
  constant  %r = psk_realize.constant {site = "RMSNorm.apply/%5", value = 1.000000e-06 : f64} : !psk_realize.tensor<f64>
  slice     %r = psk_realize.slice %stacked {index = 0 : i64, site = "Tower.apply/%3"} : (S) -> R
  stack     %r = psk_realize.stack %g0, %g1, %g2 {site = "Tower.apply.bwd/%18"} : (T, T, T) -> S
  func (--grad entry) … attributes {…, result_names = ["result", "grad.w", …]}: the results' paths
  call      %r = psk_realize.call @RMSNorm.apply_2(%a, %b) {site = "Block.apply/%4"} : (A, B) -> R
  fold      %r = psk_realize.fold @Block.apply(%s0, %s1, %s2, %acc) {from = 1 : i64, site = …, to = 3 : i64} : (…) -> R
  group     %r = psk_realize.group %i0, %i1 {site = "RMSNorm.apply/%7"} : (A, B) -> R {
            ^0(%a: A, %b: B):  …element-wise ops…  psk_realize.yield %s : R }
  return    psk_realize.return %r {site = "loss/%8"} : T

Semantics a consumer needs (the kernel stage, interpreters):
- A tensor is laid out row-major in its axes' order; a Core `...` has become explicit
  leading axes. Names are for display only: two types FIT when their element types and
  sizes are equal (`fits`).
- Binary ops: `lhs_map[k]` is the result axis the lhs's axis k lands on (strictly
  increasing); a result axis no map names is broadcast. A numpy view: reshape the operand
  to the result's rank with its sizes at the mapped places and 1 elsewhere. `broadcast`
  uses `map` the same way; `spread` uses `places` (onto `like`'s axes).
- Every operand of an arithmetic op has the result's element type; no arithmetic op has
  element type bf16 (a bf16 site computes in f32 and is converted). `convert` rounds to
  nearest even when it narrows; a widening convert (bf16→f32, bf16→f64, f32→f64) is exact
  and a kernel may fold it into its loads.
- `constant` is a scalar of any element type: `value` rounded to it.
- `slice %s {index = i}` is iteration i's view of a stacked value (its leading axis);
  `stack %v0, …, %vn-1` the inverse: a new leading axis of n, element l being %vl (the
  parameter cotangents of a fold's iterations, which a vjp records one call each).
- `fold @f(%s…, %acc) {from, to}`: acc = f(slice(s…, i), acc) for i in from..to-1; the
  callee takes the sliced stacked values, then the accumulator, and returns it.
- `group`: its block's arguments are its inputs (the operands, same order), its body is
  element-wise ops whose results all have ONE shape (the group's), ending in `yield`;
  its site is the site of the value it yields (its root). Intermediates never reach memory.
- Instances: `psk_realize.func`; `source` is the Core function, `dims` its dims, arguments
  are tensors only (a parameter tree flattened to its leaves in declaration order, names
  are paths `θ.norm.γ`; a tuple to its elements, `batch.0`). One func has the unit
  attribute `entry`. `instance_runs(module)` gives how many times each instance runs per
  call of the entry.

Python API (stable): RTensorType (.element, .axes, .sizes, .shape, .rank, .count,
.with_element, get, scalar), rtype_text, element_name, ELEMENT_TYPES, fits; op classes
below (each constructor takes `site=` and optional `name=`), FuncOp.make, GroupOp.make;
is_compute, is_elementwise, is_arithmetic, funcs, entry_func, instance_runs, launch_count,
lookup_instance.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    BFloat16Type,
    DenseArrayBase,
    DictionaryAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
    bf16,
    f32,
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
    lazy_traits_def,
    irdl_attr_definition,
    operand_def,
    opt_attr_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    ReturnLike,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from presk.dialects.core import (
    AxisAttr,
    CoreOp,
    _parse_axis,
    _print_op_attrs,
    core_op,
)
from presk.shapes import Axis, TensorType

# --------------------------------------------------------------------------------------
# Element types and the tensor type
# --------------------------------------------------------------------------------------

ELEMENT_TYPES: dict[str, Attribute] = {"f64": f64, "f32": f32, "bf16": bf16}
"""The element types a realization may name, by their names."""

ElementType = Float64Type | Float32Type | BFloat16Type


def element_name(t: Attribute) -> str:
    """`f64`, `f32` or `bf16` for an element type or an RTensorType."""
    if isinstance(t, RTensorType):
        t = t.element
    for name, e in ELEMENT_TYPES.items():
        if t == e:
            return name
    raise VerifyException(f"{t} is not an element type of psk_realize (f64, f32, bf16)")


@irdl_attr_definition
class RTensorType(ParametrizedAttribute, TypeAttribute):
    """A concrete tensor: `!psk_realize.tensor<f32, batch: 4, model: 4>`, the scalar
    `!psk_realize.tensor<f64>`. Axes are `psk_core.axis` with integer sizes."""

    name = "psk_realize.tensor"

    element: ElementType
    axes: ArrayAttr[AxisAttr]

    @classmethod
    def get(cls, element: Attribute | str,
            axes: Sequence[Axis | tuple[str | None, int] | int] = ()) -> RTensorType:
        """`RTensorType.get("f32", [("batch", 4), ("model", 4)])`."""
        if isinstance(element, str):
            element = ELEMENT_TYPES[element]
        items = []
        for a in axes:
            if isinstance(a, Axis):
                items.append(a)
            elif isinstance(a, tuple):
                items.append(Axis(a[0], a[1]))
            else:
                items.append(Axis(None, a))
        return cls(element, ArrayAttr(AxisAttr.from_axis(a) for a in items))

    @classmethod
    def from_shape(cls, element: Attribute | str, shape: TensorType) -> RTensorType:
        if shape.prefix or any(not isinstance(a.size, int) for a in shape.axes):
            raise VerifyException(f"{shape} is not concrete")
        return cls.get(element, shape.axes)

    @classmethod
    def scalar(cls, element: Attribute | str = "f64") -> RTensorType:
        return cls.get(element, ())

    @property
    def axis_list(self) -> tuple[Axis, ...]:
        return tuple(a.axis for a in self.axes.data)

    @property
    def shape(self) -> TensorType:
        """The shape as presk.shapes sees it (no prefix, integer sizes)."""
        return TensorType(self.axis_list, False)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(a.size) for a in self.axis_list)

    @property
    def rank(self) -> int:
        return len(self.axes.data)

    @property
    def count(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    def with_element(self, element: Attribute | str) -> RTensorType:
        if isinstance(element, str):
            element = ELEMENT_TYPES[element]
        return RTensorType(element, self.axes)

    def verify(self) -> None:
        for a in self.axes.data:
            if not isinstance(a.size, IntAttr):
                raise VerifyException(f"a psk_realize tensor has integer sizes, not "
                                      f"`{a.axis.size}`")
        names = [a.name for a in self.axis_list if a.name is not None]
        if len(names) != len(set(names)):
            raise VerifyException(f"an axis name repeats in {rtype_text(self)}")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_attribute(self.element)
            for a in self.axes.data:
                printer.print_string(", ")
                a.print_axis(printer)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        element = parser.parse_type()
        axes: list[AxisAttr] = []
        while parser.parse_optional_punctuation(",") is not None:
            axes.append(_parse_axis(parser))
        parser.parse_punctuation(">", " to close a psk_realize tensor type")
        return (element, ArrayAttr(axes))


def rtype_text(t: Attribute) -> str:
    """The listing form: `f32[batch: 4, model: 4]`, `f64[]`."""
    if isinstance(t, RTensorType):
        return element_name(t) + "[" + ", ".join(str(a) for a in t.axis_list) + "]"
    return str(t)


def fits(a: Attribute, b: Attribute) -> bool:
    """Same element type and sizes: names are display only."""
    return (isinstance(a, RTensorType) and isinstance(b, RTensorType)
            and a.element == b.element and a.sizes == b.sizes)


def _ttype(value: SSAValue | Operation) -> RTensorType:
    t = SSAValue.get(value).type
    if not isinstance(t, RTensorType):
        raise VerifyException(f"{t} is not a psk_realize tensor")
    return t


def _i64s(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _ints(attr: Attribute | None) -> list[int]:
    if attr is None:
        return []
    assert isinstance(attr, DenseArrayBase)
    return [int(v) for v in attr.get_values()]


def _attrs(site: str, name: str | None, **more: Attribute | None) -> dict[str, Attribute]:
    attrs: dict[str, Attribute] = {"site": StringAttr(site)}
    if name is not None:
        attrs["name"] = StringAttr(name)
    attrs.update({k: v for k, v in more.items() if v is not None})
    return attrs


# --------------------------------------------------------------------------------------
# The op base: Core's site/name and generic syntax, with several results allowed
# --------------------------------------------------------------------------------------


class RealizeOp(CoreOp, ABC):
    """An op of an instance's body; the textual form of CoreOp (`%r = op %a, %b {attrs} :
    (A, B) -> R`, `: T` when every operand has the result's type), and `-> (R1, R2)`
    for a call with several results."""

    COMPUTE: ClassVar[bool] = False
    """It computes on reals: one launch of a kernel (constants, converts, slices, calls,
    folds are not)."""
    ELEMENTWISE: ClassVar[bool] = False
    """Each result element depends on the operands' elements at its place only."""

    def _print_signature(self, printer: Printer) -> None:
        operand_types = [o.type for o in self.operands]
        results = [r.type for r in self.results]
        if not results:
            printer.print_list(operand_types, printer.print_attribute)
            return
        if len(results) == 1 and (not operand_types or
                                  (operand_types == results * len(operand_types)
                                   and not self.HAS_CALLEE)):
            printer.print_attribute(results[0])
            return
        with printer.in_parens():
            printer.print_list(operand_types, printer.print_attribute)
        printer.print_string(" -> ")
        if len(results) == 1:
            printer.print_attribute(results[0])
        else:
            with printer.in_parens():
                printer.print_list(results, printer.print_attribute)

    @classmethod
    def _parse_signature(
        cls, parser: Parser, operands: Sequence[UnresolvedOperand]
    ) -> tuple[list[Attribute], list[Attribute]]:
        defn = cls.get_irdl_definition()
        if not defn.results:
            if not operands:
                return [], []
            types = parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type)
            return types, []
        inputs = parser.parse_optional_comma_separated_list(
            parser.Delimiter.PAREN, parser.parse_type
        )
        if inputs is not None:
            parser.parse_punctuation("->")
            outs = parser.parse_optional_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_type
            )
            return inputs, (outs if outs is not None else [parser.parse_type()])
        single = parser.parse_type()
        return [single] * len(operands), [single]


class ComputeOp(RealizeOp, ABC):
    """An arithmetic op: operands of the result's element type, never bf16."""

    COMPUTE: ClassVar[bool] = True

    def _tensor_operands(self) -> list[SSAValue]:
        return list(self.operands)

    def verify_(self) -> None:
        super().verify_()
        result = _ttype(self.results[0])
        if isinstance(result.element, BFloat16Type):
            raise VerifyException(
                "an arithmetic op in bf16: bf16 is a storage type, compute in f32 and convert")
        for i, v in enumerate(self._tensor_operands()):
            t = _ttype(v)
            if t.element != result.element:
                raise VerifyException(
                    f"operand {i} is {rtype_text(t)}, the result {rtype_text(result)}: "
                    "element types differ (a conversion is an explicit psk_realize.convert)")


# ---- element-wise ----


class UnaryOp(ComputeOp, ABC):
    """An element-wise function: the result has the operand's type."""

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())
    ELEMENTWISE: ClassVar[bool] = True

    def __init__(self, operand: SSAValue | Operation, *, site: str, name: str | None = None,
                 result_type: RTensorType | None = None, **attrs: Attribute | None):
        super().__init__(operands=[operand],
                         result_types=[result_type or _ttype(operand)],
                         attributes=_attrs(site, name, **attrs))

    def verify_(self) -> None:
        super().verify_()
        if self.operand.type.sizes != self.result.type.sizes:
            raise VerifyException(f"the result {rtype_text(self.result.type)} is not the "
                                  f"operand's shape {rtype_text(self.operand.type)}")


@core_op
class NegOp(UnaryOp):
    name = "psk_realize.neg"


@core_op
class SqrtOp(UnaryOp):
    name = "psk_realize.sqrt"


@core_op
class ExpOp(UnaryOp):
    name = "psk_realize.exp"


@core_op
class LogOp(UnaryOp):
    name = "psk_realize.log"


@core_op
class TanhOp(UnaryOp):
    name = "psk_realize.tanh"


@core_op
class SigmoidOp(UnaryOp):
    name = "psk_realize.sigmoid"


@core_op
class ReluOp(UnaryOp):
    name = "psk_realize.relu"


@core_op
class GeluOp(UnaryOp):
    name = "psk_realize.gelu"


@core_op
class SoftplusOp(UnaryOp):
    name = "psk_realize.softplus"


@core_op
class AbsOp(UnaryOp):
    name = "psk_realize.abs"


@core_op
class SinOp(UnaryOp):
    name = "psk_realize.sin"


@core_op
class CosOp(UnaryOp):
    name = "psk_realize.cos"


@core_op
class ErfOp(UnaryOp):
    name = "psk_realize.erf"


@core_op
class ErfSlopeOp(UnaryOp):
    name = "psk_realize.erf_slope"


@core_op
class GeluSlopeOp(UnaryOp):
    name = "psk_realize.gelu_slope"


@core_op
class HeavisideOp(UnaryOp):
    """1 where positive, 0 where negative, `at_zero` at 0."""

    name = "psk_realize.heaviside"
    at_zero = attr_def(FloatAttr)

    def __init__(self, operand: SSAValue | Operation, at_zero: float, *, site: str,
                 name: str | None = None):
        super().__init__(operand, site=site, name=name, at_zero=FloatAttr(at_zero, f64))

    @property
    def at_zero_value(self) -> float:
        return self.at_zero.value.data


@core_op
class PowIOp(UnaryOp):
    """`x ^ n`, n a natural."""

    name = "psk_realize.powi"
    n = attr_def(IntegerAttr)

    def __init__(self, operand: SSAValue | Operation, n: int, *, site: str,
                 name: str | None = None):
        super().__init__(operand, site=site, name=name, n=IntegerAttr(n, i64))

    @property
    def exponent(self) -> int:
        return self.n.value.data


class BinaryOp(ComputeOp, ABC):
    """Element-wise on two operands placed on the result's axes by `lhs_map`/`rhs_map`."""

    lhs = operand_def(RTensorType)
    rhs = operand_def(RTensorType)
    result = result_def(RTensorType)
    lhs_map = attr_def(DenseArrayBase)
    rhs_map = attr_def(DenseArrayBase)

    traits = traits_def(Pure())
    ELEMENTWISE: ClassVar[bool] = True

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 lhs_map: Sequence[int], rhs_map: Sequence[int], result_type: RTensorType,
                 *, site: str, name: str | None = None):
        super().__init__(operands=[lhs, rhs], result_types=[result_type],
                         attributes=_attrs(site, name, lhs_map=_i64s(lhs_map),
                                           rhs_map=_i64s(rhs_map)))

    @property
    def maps(self) -> tuple[list[int], list[int]]:
        return _ints(self.lhs_map), _ints(self.rhs_map)

    def verify_(self) -> None:
        super().verify_()
        result = self.result.type
        covered: set[int] = set()
        for side, value, places in (("lhs", self.lhs, _ints(self.lhs_map)),
                                    ("rhs", self.rhs, _ints(self.rhs_map))):
            _check_map(side, value.type, places, result)
            covered.update(places)
        if missing := sorted(set(range(result.rank)) - covered):
            raise VerifyException(f"result axes {missing} of {rtype_text(result)} come from "
                                  "neither operand")


def _check_map(what: str, t: RTensorType, places: Sequence[int], result: RTensorType) -> None:
    if len(places) != t.rank:
        raise VerifyException(f"{what} {rtype_text(t)} has {t.rank} axes, its map "
                              f"{list(places)} places {len(places)}")
    if list(places) != sorted(set(places)) or any(not 0 <= p < result.rank for p in places):
        raise VerifyException(f"the {what} map {list(places)} is not increasing axes of "
                              f"{rtype_text(result)}")
    for k, p in enumerate(places):
        if t.sizes[k] != result.sizes[p]:
            raise VerifyException(f"shape mismatch: axis {k} of the {what} "
                                  f"{rtype_text(t)} has size {t.sizes[k]}, the result's axis "
                                  f"{p} of {rtype_text(result)} {result.sizes[p]}")


@core_op
class AddOp(BinaryOp):
    name = "psk_realize.add"


@core_op
class SubOp(BinaryOp):
    name = "psk_realize.sub"


@core_op
class MulOp(BinaryOp):
    name = "psk_realize.mul"


@core_op
class DivOp(BinaryOp):
    name = "psk_realize.div"


@core_op
class MinimumOp(BinaryOp):
    name = "psk_realize.minimum"


@core_op
class MaximumOp(BinaryOp):
    name = "psk_realize.maximum"


@core_op
class PowOp(BinaryOp):
    name = "psk_realize.pow"


# ---- reductions and the rest ----


class ReduceOp(ComputeOp, ABC):
    """A reduction over axis index `axis` (its name `axis_name`), or every axis."""

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)
    axis = opt_attr_def(IntegerAttr)
    axis_name = opt_attr_def(StringAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, axis: int | None, result_type: RTensorType,
                 *, axis_name: str | None = None, site: str, name: str | None = None):
        super().__init__(operands=[operand], result_types=[result_type],
                         attributes=_attrs(
                             site, name,
                             axis=IntegerAttr(axis, i64) if axis is not None else None,
                             axis_name=StringAttr(axis_name) if axis_name else None))

    @property
    def axis_index(self) -> int | None:
        return self.axis.value.data if self.axis is not None else None

    def verify_(self) -> None:
        super().verify_()
        t, result = self.operand.type, self.result.type
        k = self.axis_index
        if k is None:
            expected: tuple[int, ...] = ()
        else:
            if not 0 <= k < t.rank:
                raise VerifyException(f"axis {k} is not an axis of {rtype_text(t)}")
            expected = t.sizes[:k] + t.sizes[k + 1:]
        if result.sizes != expected:
            over = f"axis {k}" if k is not None else "every axis"
            raise VerifyException(f"shape mismatch: reducing {rtype_text(t)} over {over} makes "
                                  f"{list(expected)}, not {rtype_text(result)}")


@core_op
class SumOp(ReduceOp):
    name = "psk_realize.sum"


@core_op
class MeanOp(ReduceOp):
    name = "psk_realize.mean"


@core_op
class MaxOp(ReduceOp):
    name = "psk_realize.max"


@core_op
class MinOp(ReduceOp):
    name = "psk_realize.min"


@core_op
class LogSumExpOp(ReduceOp):
    name = "psk_realize.logsumexp"


@core_op
class SoftmaxOp(ComputeOp):
    """Softmax along axis index `axis`."""

    name = "psk_realize.softmax"

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)
    axis = attr_def(IntegerAttr)
    axis_name = opt_attr_def(StringAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, axis: int, *, axis_name: str | None = None,
                 site: str, name: str | None = None):
        super().__init__(operands=[operand], result_types=[_ttype(operand)],
                         attributes=_attrs(site, name, axis=IntegerAttr(axis, i64),
                                           axis_name=StringAttr(axis_name) if axis_name
                                           else None))

    @property
    def axis_index(self) -> int:
        return self.axis.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.operand.type.sizes != self.result.type.sizes:
            raise VerifyException("shape mismatch: softmax keeps its operand's shape")
        if not 0 <= self.axis_index < self.operand.type.rank:
            raise VerifyException(f"axis {self.axis_index} is not an axis of "
                                  f"{rtype_text(self.operand.type)}")


@core_op
class DotOp(ComputeOp):
    """The last axis of `lhs` contracts with the first of `rhs`."""

    name = "psk_realize.dot"

    lhs = operand_def(RTensorType)
    rhs = operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 result_type: RTensorType, *, site: str, name: str | None = None):
        super().__init__(operands=[lhs, rhs], result_types=[result_type],
                         attributes=_attrs(site, name))

    def verify_(self) -> None:
        super().verify_()
        a, b, r = self.lhs.type.sizes, self.rhs.type.sizes, self.result.type.sizes
        if not a or not b or a[-1] != b[0] or r != a[:-1] + b[1:]:
            raise VerifyException(f"shape mismatch: {rtype_text(self.lhs.type)} · "
                                  f"{rtype_text(self.rhs.type)} does not make "
                                  f"{rtype_text(self.result.type)}")


@core_op
class ContractOp(ComputeOp):
    """lhs's axes `lhs_axes` with rhs's `rhs_axes` pairwise; the result is lhs's other
    axes then rhs's, permuted by `perm` when given (result axis i is that list's perm[i])."""

    name = "psk_realize.contract"

    lhs = operand_def(RTensorType)
    rhs = operand_def(RTensorType)
    result = result_def(RTensorType)
    lhs_axes = attr_def(DenseArrayBase)
    rhs_axes = attr_def(DenseArrayBase)
    perm = opt_attr_def(DenseArrayBase)

    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation,
                 lhs_axes: Sequence[int], rhs_axes: Sequence[int], result_type: RTensorType,
                 *, perm: Sequence[int] | None = None, site: str, name: str | None = None):
        super().__init__(operands=[lhs, rhs], result_types=[result_type],
                         attributes=_attrs(site, name, lhs_axes=_i64s(lhs_axes),
                                           rhs_axes=_i64s(rhs_axes),
                                           perm=_i64s(perm) if perm is not None else None))

    @property
    def axes(self) -> tuple[list[int], list[int], list[int] | None]:
        return (_ints(self.lhs_axes), _ints(self.rhs_axes),
                _ints(self.perm) if self.perm is not None else None)

    def verify_(self) -> None:
        super().verify_()
        lhs, rhs, perm = self.axes
        a, b = self.lhs.type.sizes, self.rhs.type.sizes
        if len(lhs) != len(rhs) or any(not 0 <= i < len(a) for i in lhs) or \
                any(not 0 <= j < len(b) for j in rhs) or \
                any(a[i] != b[j] for i, j in zip(lhs, rhs)):
            raise VerifyException(f"shape mismatch: axes {lhs} of {rtype_text(self.lhs.type)} "
                                  f"do not pair with {rhs} of {rtype_text(self.rhs.type)}")
        rest = [s for i, s in enumerate(a) if i not in lhs] + \
            [s for j, s in enumerate(b) if j not in rhs]
        if perm is not None:
            if sorted(perm) != list(range(len(rest))):
                raise VerifyException(f"perm {perm} is not a permutation of {len(rest)} axes")
            rest = [rest[p] for p in perm]
        if tuple(rest) != self.result.type.sizes:
            raise VerifyException(f"shape mismatch: the contraction makes {rest}, not "
                                  f"{rtype_text(self.result.type)}")


@core_op
class SumToOp(ComputeOp):
    """Sum away every axis but `keep` (indices, increasing)."""

    name = "psk_realize.sum_to"

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)
    keep = attr_def(DenseArrayBase)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, keep: Sequence[int],
                 result_type: RTensorType, *, site: str, name: str | None = None):
        super().__init__(operands=[operand], result_types=[result_type],
                         attributes=_attrs(site, name, keep=_i64s(keep)))

    @property
    def kept(self) -> list[int]:
        return _ints(self.keep)

    def verify_(self) -> None:
        super().verify_()
        t = self.operand.type
        keep = self.kept
        if keep != sorted(set(keep)) or any(not 0 <= k < t.rank for k in keep) or \
                tuple(t.sizes[k] for k in keep) != self.result.type.sizes:
            raise VerifyException(f"shape mismatch: keeping axes {keep} of {rtype_text(t)} "
                                  f"does not make {rtype_text(self.result.type)}")


@core_op
class SpreadOp(ComputeOp):
    """The operand broadcast to `like`'s shape, its axis k onto like's `places[k]`; with
    `mean`, divided by how many elements each operand element spreads over."""

    name = "psk_realize.spread"

    operand = operand_def(RTensorType)
    like = operand_def(RTensorType)
    result = result_def(RTensorType)
    places = attr_def(DenseArrayBase)
    mean = opt_attr_def(UnitAttr)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, like: SSAValue | Operation,
                 places: Sequence[int], result_type: RTensorType, *, mean: bool = False,
                 site: str, name: str | None = None):
        super().__init__(operands=[operand, like], result_types=[result_type],
                         attributes=_attrs(site, name, places=_i64s(places),
                                           mean=UnitAttr() if mean else None))

    @property
    def place_list(self) -> list[int]:
        return _ints(self.places)

    def _tensor_operands(self) -> list[SSAValue]:
        return [self.operand]  # `like` gives a shape only

    def verify_(self) -> None:
        super().verify_()
        if self.like.type.sizes != self.result.type.sizes:
            raise VerifyException("shape mismatch: the result's shape is not that of `like`")
        _check_map("operand", self.operand.type, self.place_list, self.result.type)


@core_op
class BroadcastOp(ComputeOp):
    """The operand broadcast to the result, its axis k onto the result's `map[k]`."""

    name = "psk_realize.broadcast"

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)
    map = attr_def(DenseArrayBase)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, places: Sequence[int],
                 result_type: RTensorType, *, site: str, name: str | None = None):
        super().__init__(operands=[operand], result_types=[result_type],
                         attributes=_attrs(site, name, map=_i64s(places)))

    @property
    def place_list(self) -> list[int]:
        return _ints(self.map)

    def verify_(self) -> None:
        super().verify_()
        _check_map("operand", self.operand.type, self.place_list, self.result.type)


# ---- conversions, constants, slices ----


@core_op
class ConvertOp(RealizeOp):
    """A change of element type, rounding to nearest even when it narrows. Its site is
    the site of the op that reads it (or of the bf16 value it stores)."""

    name = "psk_realize.convert"

    operand = operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())
    ELEMENTWISE: ClassVar[bool] = True

    def __init__(self, operand: SSAValue | Operation, element: Attribute | str, *, site: str,
                 name: str | None = None):
        super().__init__(operands=[operand],
                         result_types=[_ttype(operand).with_element(element)],
                         attributes=_attrs(site, name))

    @property
    def widening(self) -> bool:
        order = {"bf16": 0, "f32": 1, "f64": 2}
        return order[element_name(self.result.type)] > order[element_name(self.operand.type)]

    def verify_(self) -> None:
        super().verify_()
        a, r = self.operand.type, self.result.type
        if a.sizes != r.sizes:
            raise VerifyException(f"shape mismatch: converting {rtype_text(a)} to "
                                  f"{rtype_text(r)}")
        if a.element == r.element:
            raise VerifyException(f"a convert from {element_name(a)} to itself")


@core_op
class ConstantOp(RealizeOp):
    """A scalar of any element type: `value` rounded to it."""

    name = "psk_realize.constant"

    value = attr_def(FloatAttr)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, value: float, element: Attribute | str = "f64", *, site: str,
                 name: str | None = None):
        super().__init__(result_types=[RTensorType.scalar(element)],
                         attributes=_attrs(site, name, value=FloatAttr(value, f64)))

    @property
    def number(self) -> float:
        return self.value.value.data

    def verify_(self) -> None:
        super().verify_()
        if self.result.type.rank:
            raise VerifyException(f"a constant is a scalar, not {rtype_text(self.result.type)}")


@core_op
class SliceOp(RealizeOp):
    """Iteration `index`'s view of a stacked value: its leading axis taken at `index`."""

    name = "psk_realize.slice"

    operand = operand_def(RTensorType)
    index = attr_def(IntegerAttr)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, operand: SSAValue | Operation, index: int, *, site: str,
                 name: str | None = None):
        t = _ttype(operand)
        super().__init__(operands=[operand],
                         result_types=[RTensorType(t.element, ArrayAttr(t.axes.data[1:]))],
                         attributes=_attrs(site, name, index=IntegerAttr(index, i64)))

    @property
    def position(self) -> int:
        return self.index.value.data

    def verify_(self) -> None:
        super().verify_()
        a, r = self.operand.type, self.result.type
        if not a.rank or a.sizes[1:] != r.sizes or a.element != r.element:
            raise VerifyException(f"shape mismatch: a slice of {rtype_text(a)} is not "
                                  f"{rtype_text(r)}")
        if not 0 <= self.position < a.sizes[0]:
            raise VerifyException(f"index {self.position} is outside {rtype_text(a)}")


@core_op
class StackOp(RealizeOp):
    """The operands (one type) stacked along a new leading axis: element l is operand l.
    What a fold's reverse sweep makes of its iterations' parameter cotangents."""

    name = "psk_realize.stack"

    items = var_operand_def(RTensorType)
    result = result_def(RTensorType)

    traits = traits_def(Pure())

    def __init__(self, items: Sequence[SSAValue | Operation], *, site: str,
                 name: str | None = None):
        t = _ttype(items[0])
        result = RTensorType(t.element, ArrayAttr([AxisAttr.from_axis(Axis(None, len(items))),
                                                   *t.axes.data]))
        super().__init__(operands=[list(items)], result_types=[result],
                         attributes=_attrs(site, name))

    def verify_(self) -> None:
        super().verify_()
        if not self.items:
            raise VerifyException("a stack needs one item or more")
        first = self.items[0].type
        for v in self.items:
            if not fits(v.type, first):
                raise VerifyException(f"a stack of {rtype_text(first)} is given "
                                      f"{rtype_text(v.type)}")
        r = self.result.type
        if r.element != first.element or r.sizes != (len(self.items), *first.sizes):
            raise VerifyException(f"stacking {len(self.items)} × {rtype_text(first)} does not "
                                  f"make {rtype_text(r)}")


# ---- instances, calls, folds, groups ----


@core_op
class FuncOp(IRDLOperation):
    """One instance of a Core function (`source`) at `dims`, its arguments tensors."""

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
    def source_func(self) -> str:
        return self.source.data

    @property
    def dim_values(self) -> dict[str, int]:
        return {k: v.value.data for k, v in self.dims.data.items()} if self.dims else {}

    @property
    def arg_name_list(self) -> tuple[str, ...]:
        return tuple(n.data for n in self.arg_names)

    @property
    def args(self) -> tuple[BlockArgument, ...]:
        return self.body.block.args

    @property
    def result_types(self) -> tuple[Attribute, ...]:
        return self.function_type.outputs.data

    def verify_(self) -> None:
        inputs = self.function_type.inputs.data
        if tuple(a.type for a in self.args) != inputs:
            raise VerifyException("the block arguments' types are not the function's inputs")
        if len(self.arg_name_list) != len(inputs):
            raise VerifyException(f"arg_names {list(self.arg_name_list)} do not name "
                                  f"{len(inputs)} arguments")
        for t in (*inputs, *self.result_types):
            if not isinstance(t, RTensorType):
                raise VerifyException(f"an instance takes and returns tensors, not {t}")
        if self.result_names is not None and len(self.result_names) != len(self.result_types):
            raise VerifyException(f"result_names names {len(self.result_names)} of "
                                  f"{len(self.result_types)} results")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        with printer.in_parens():
            printer.print_list(self.args, printer.print_block_argument)
        printer.print_string(" -> ")
        outs = self.result_types
        if len(outs) == 1:
            printer.print_attribute(outs[0])
        else:
            with printer.in_parens():
                printer.print_list(outs, printer.print_attribute)
        _print_op_attrs(printer, self.attributes, reserved=("sym_name", "function_type"),
                        keyword=True)
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


@core_op
class CallOp(_CallLike):
    """A call of an instance."""

    name = "psk_realize.call"

    arguments = var_operand_def(RTensorType)
    res = var_result_def(RTensorType)

    def __init__(self, callee: FuncOp | str, args: Sequence[SSAValue | Operation],
                 result_types: Sequence[Attribute], *, site: str, name: str | None = None):
        cname = callee.func_name if isinstance(callee, FuncOp) else callee
        super().__init__(operands=[list(args)], result_types=[list(result_types)],
                         attributes=_attrs(site, name, callee=SymbolRefAttr(cname)))

    def verify_(self) -> None:
        super().verify_()
        callee = lookup_instance(self, self.callee_name)
        self._check_args(callee.function_type.inputs.data, [a.type for a in self.arguments])
        outs = callee.result_types
        if len(outs) != len(self.res) or not all(fits(r.type, o) for r, o in zip(self.res, outs)):
            raise VerifyException(f"@{self.callee_name} returns "
                                  f"{', '.join(rtype_text(o) for o in outs)}, not "
                                  f"{', '.join(rtype_text(r.type) for r in self.res)}")


@core_op
class FoldOp(_CallLike):
    """Iterations from..to-1 of the callee over the leading axis of the stacked operands;
    the last operand is the accumulator."""

    name = "psk_realize.fold"

    arguments = var_operand_def(RTensorType)
    start = attr_def(IntegerAttr, attr_name="from")
    stop = attr_def(IntegerAttr, attr_name="to")
    result = result_def(RTensorType)

    def __init__(self, callee: FuncOp | str, stacked: Sequence[SSAValue | Operation],
                 acc: SSAValue | Operation, start: int, stop: int, *, site: str,
                 name: str | None = None):
        cname = callee.func_name if isinstance(callee, FuncOp) else callee
        super().__init__(operands=[[*stacked, acc]], result_types=[_ttype(acc)],
                         attributes=_attrs(site, name, callee=SymbolRefAttr(cname),
                                           **{"from": IntegerAttr(start, i64),
                                              "to": IntegerAttr(stop, i64)}))

    @property
    def stacked(self) -> list[SSAValue]:
        return list(self.arguments)[:-1]

    @property
    def acc(self) -> SSAValue:
        return self.arguments[-1]

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
        outs = callee.result_types
        if len(outs) != 1 or not fits(outs[0], self.acc.type) or \
                not fits(self.result.type, self.acc.type):
            raise VerifyException(f"@{self.callee_name} must return the accumulator's type "
                                  f"{rtype_text(self.acc.type)}")


@core_op
class YieldOp(IRDLOperation):
    """The value a group computes: `psk_realize.yield %v : T`."""

    name = "psk_realize.yield"

    value = operand_def(RTensorType)

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(GroupOp)))

    assembly_format = "$value attr-dict `:` type($value)"

    def __init__(self, value: SSAValue | Operation):
        super().__init__(operands=[value])


@core_op
class GroupOp(RealizeOp):
    """Element-wise ops over one shape, fused: one loop nest."""

    name = "psk_realize.group"

    inputs = var_operand_def(RTensorType)
    result = result_def(RTensorType)
    body = region_def("single_block")

    traits = traits_def(IsolatedFromAbove(), Pure())
    COMPUTE: ClassVar[bool] = True
    ELEMENTWISE: ClassVar[bool] = True

    @classmethod
    def make(cls, inputs: Sequence[SSAValue], result_type: RTensorType, *, site: str,
             name: str | None = None) -> tuple[GroupOp, Block]:
        """An empty group and its block (arguments typed like the inputs): fill the block,
        ending with a YieldOp."""
        block = Block(arg_types=[SSAValue.get(v).type for v in inputs])
        op = cls.create(operands=list(inputs), result_types=[result_type],
                        attributes=_attrs(site, name), regions=[Region(block)])
        return op, block

    @property
    def steps(self) -> list[Operation]:
        """The ops of the body, the yield aside."""
        return [o for o in self.body.block.ops if not isinstance(o, YieldOp)]

    @property
    def root(self) -> Operation:
        """The op whose value the group yields."""
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        owner = last.value.owner
        assert isinstance(owner, Operation)
        return owner

    def verify_(self) -> None:
        super().verify_()
        block = self.body.block
        if [a.type for a in block.args] != [v.type for v in self.inputs]:
            raise VerifyException("the group's block arguments are not typed like its inputs")
        last = block.last_op
        if not isinstance(last, YieldOp):
            raise VerifyException("a group ends with psk_realize.yield")
        if last.value.type != self.result.type:
            raise VerifyException(f"the group yields {rtype_text(last.value.type)}, not "
                                  f"{rtype_text(self.result.type)}")
        shape = self.result.type.sizes
        for op in self.steps:
            what = f"{op.attributes['site'].data} {op.name}" if "site" in op.attributes \
                else op.name  # type: ignore[attr-defined]
            if not (isinstance(op, RealizeOp) and op.ELEMENTWISE) or isinstance(op, GroupOp):
                raise VerifyException(f"{what} is not element-wise: a group holds element-wise "
                                      "operations only")
            for r in op.results:
                if _ttype(r).sizes != shape:
                    raise VerifyException(f"{what} makes {rtype_text(r.type)}, the group's "
                                          f"shape is {list(shape)}: a group is one loop nest "
                                          "over one shape")
        owner = last.value.owner
        if isinstance(owner, Operation) and "site" in owner.attributes and \
                owner.attributes["site"] != self.site:
            raise VerifyException(f"the group's site is not the site of its root, "
                                  f"{owner.attributes['site'].data}")  # type: ignore[attr-defined]

    def print(self, printer: Printer) -> None:
        if self.inputs:
            printer.print_string(" ")
            printer.print_list(self.inputs, printer.print_operand)
        _print_op_attrs(printer, self.attributes)
        printer.print_string(" : ")
        with printer.in_parens():
            printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(" -> ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)

    @classmethod
    def parse(cls, parser: Parser) -> GroupOp:
        operands = parser.parse_optional_undelimited_comma_separated_list(
            parser.parse_optional_unresolved_operand, parser.parse_unresolved_operand
        ) or []
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        inputs = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        result = parser.parse_type()
        values = parser.resolve_operands(operands, inputs, pos)
        region = parser.parse_region()
        return cls.create(operands=values, result_types=[result], attributes=attrs,
                          regions=[region])


@core_op
class ReturnOp(RealizeOp):
    """An instance's results."""

    name = "psk_realize.return"

    values = var_operand_def(RTensorType)

    traits = traits_def(IsTerminator(), ReturnLike(), HasParent(FuncOp))

    def __init__(self, values: Sequence[SSAValue | Operation], *, site: str):
        super().__init__(operands=[list(values)], attributes={"site": StringAttr(site)})

    def verify_(self) -> None:
        super().verify_()
        func = self.parent_op()
        assert isinstance(func, FuncOp)
        outs = func.result_types
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


Realize = Dialect(
    "psk_realize",
    [
        NegOp, SqrtOp, ExpOp, LogOp, TanhOp, SigmoidOp, ReluOp, GeluOp, SoftplusOp, AbsOp,
        SinOp, CosOp, ErfOp, ErfSlopeOp, GeluSlopeOp, HeavisideOp, PowIOp,
        AddOp, SubOp, MulOp, DivOp, MinimumOp, MaximumOp, PowOp,
        SumOp, MeanOp, MaxOp, MinOp, LogSumExpOp, SoftmaxOp,
        DotOp, ContractOp, SumToOp, SpreadOp, BroadcastOp,
        ConvertOp, ConstantOp, SliceOp, StackOp,
        FuncOp, CallOp, FoldOp, GroupOp, YieldOp, ReturnOp,
    ],
    [RTensorType],
)


def launch_count(module: Operation) -> int:
    """The compute ops (a group counts once) one call of the entry executes: each
    instance's top-level compute ops times the number of times it runs."""
    runs = instance_runs(module)
    return sum(runs[f.func_name] * sum(1 for op in f.body.block.ops if is_compute(op))
               for f in funcs(module))
