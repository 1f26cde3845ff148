"""The types of PSK-Kernel: buffers of a concrete shape (`BufferType`), the layout
directive of a kernel (`LayoutAttr`), and the element and scalar types they name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (ArrayAttr, BFloat16Type, Float32Type, Float64Type,
    IndexType, IntAttr, StringAttr)
from xdsl.ir import Attribute, ParametrizedAttribute, TypeAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import AxisAttr, ConcreteAxes, parse_axis
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


def element_bytes(t: Attribute) -> int:
    """The bytes of one element of `t`: 8 for f64, 4 for f32, 2 for bf16."""
    return 2 if isinstance(t, BFloat16Type) else 4 if isinstance(t, Float32Type) else 8


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
class BufferType(ConcreteAxes, ParametrizedAttribute, TypeAttribute):
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
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def compute(self) -> Attribute:
        return compute_type(self.element)

    @property
    def bytes(self) -> int:
        return self.size * element_bytes(self.element)

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
                axes.append(parse_axis(parser))
        return (element, ArrayAttr(axes))


@irdl_attr_definition
class LayoutAttr(ParametrizedAttribute):
    """How the native backend runs a nest. `#psk_kernel.layout<default>`: as written,
    lanes 1, no split. `#psk_kernel.layout<tiled, tile = [4, 4], lanes = 4, order = "IJ">`:
    a contraction's register tile of I×J outputs, J in vector lanes, tiles visited in
    `order`, each output's sum still k ascending. `split = [a, n]` (optional) divides loop
    `a` among `n` workers; "none" is no split. `pack = "panels"` (tiled only, optional):
    the product's operands are copied per launch into panels, each tile's columns (and,
    for an operand whose last axis is i, its rows) contiguous along k — the same values
    in the same order, so the same bits. `kblock = N` (tiled only, optional; 0 or absent:
    the k loop whole): every tile sweeps k in blocks of N, all tiles one block after the
    other, each tile's accumulators stored to its output between blocks and loaded back —
    exactly, in the sum's type: each output still sums k ascending, the same bits."""

    name = "psk_kernel.layout"

    kind: StringAttr
    tile: ArrayAttr[IntAttr]
    lanes: IntAttr
    order: StringAttr
    split: ArrayAttr[IntAttr]
    pack: StringAttr  # "" or "panels"
    kblock: IntAttr  # 0: the k loop whole; else its blocks' length

    KINDS: ClassVar[tuple[str, ...]] = ("default", "tiled")
    PACKS: ClassVar[tuple[str, ...]] = ("", "panels")

    @classmethod
    def default(cls) -> LayoutAttr:
        return cls(StringAttr("default"), ArrayAttr(()), IntAttr(1), StringAttr(""),
                   ArrayAttr(()), StringAttr(""), IntAttr(0))

    @classmethod
    def tiled(cls, tile: Sequence[int], lanes: int, order: str = "IJ",
              split: Sequence[int] = (), pack: str = "", kblock: int = 0) -> LayoutAttr:
        return cls(StringAttr("tiled"), ArrayAttr(IntAttr(t) for t in tile), IntAttr(lanes),
                   StringAttr(order), ArrayAttr(IntAttr(s) for s in split), StringAttr(pack),
                   IntAttr(kblock))

    def with_split(self, split: Sequence[int]) -> LayoutAttr:
        """The same layout with another split (`()`: none)."""
        return LayoutAttr(self.kind, self.tile, self.lanes, self.order,
                          ArrayAttr(IntAttr(s) for s in split), self.pack, self.kblock)

    @property
    def panels(self) -> bool:
        return self.pack.data == "panels"

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
            if self.panels:
                out += ", pack panels"
            if self.kblock.data:
                out += f", kblock {self.kblock.data}"
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
        if self.pack.data not in self.PACKS or (self.pack.data and self.kind.data != "tiled"):
            raise VerifyException(f"a layout's pack is \"panels\" (tiled only), not "
                                  f"`{self.pack.data}`")
        if self.kblock.data < 0 or (self.kblock.data and self.kind.data != "tiled"):
            raise VerifyException(f"a layout's kblock is a length ≥ 1 (tiled only), not "
                                  f"{self.kblock.data}")

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(self.kind.data)
            if self.kind.data == "tiled":
                printer.print_string(", tile = [" + ", ".join(str(t.data) for t in self.tile)
                                     + f"], lanes = {self.lanes.data}, order = "
                                     f'"{self.order.data}"')
                if self.panels:
                    printer.print_string(', pack = "panels"')
                if self.kblock.data:
                    printer.print_string(f", kblock = {self.kblock.data}")
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
            lanes, order, split, pack, kblock = 1, "", [], "", 0
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
                elif key == "pack":
                    pack = parser.parse_str_literal()
                elif key == "kblock":
                    kblock = parser.parse_integer(False, False)
                else:
                    parser.raise_error(f"unknown layout key `{key}` (tile, lanes, order, "
                                       "split, pack, kblock)")
        return (StringAttr(kind), ArrayAttr(IntAttr(t) for t in tile), IntAttr(lanes),
                StringAttr(order), ArrayAttr(IntAttr(s) for s in split), StringAttr(pack),
                IntAttr(kblock))
