"""The type of PSK-Realize: a tensor of a concrete shape and a builtin float element
type (`RTensorType`, `!psk_realize.tensor<f32, batch: 4>`), and its names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import (ArrayAttr, BFloat16Type, Float32Type, Float64Type,
    IntAttr, bf16, f32, f64)
from xdsl.ir import Attribute, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import AxisAttr, ConcreteAxes, parse_axis
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
class RTensorType(ConcreteAxes, ParametrizedAttribute, TypeAttribute):
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
    def shape(self) -> TensorType:
        """The shape as presk.shapes sees it (no prefix, integer sizes)."""
        return TensorType(self.axis_list, False)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(int(a.size) for a in self.axis_list)

    @property
    def count(self) -> int:
        return math.prod(self.sizes)

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
            axes.append(parse_axis(parser))
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
