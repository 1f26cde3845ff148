"""Parameter trees in PSK-Core: module declarations (`psk_core.module` with its
`param` and `use` entries) and field reads (`psk_core.field`).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue, TypeAttribute
from xdsl.irdl import (IRDLOperation, attr_def, lazy_traits_def, operand_def, opt_attr_def,
    region_def, result_def, traits_def)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import (HasParent, IsolatedFromAbove, NoTerminator, Pure,
    SymbolOpInterface, SymbolTable)
from xdsl.utils.exceptions import VerifyException

from presk.dialects.common import print_op_attrs, print_string, site_attrs
from presk.shapes import Axis, TensorType

from .base import CoreOp, _infer, _names_attr, _value_type, core_op
from .types import (ParamsAttr, TensorAttr, substitute_type, type_conforms, type_symbols,
    type_text)


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
        print_string(printer, self.field.data)
        print_op_attrs(printer, self.attributes, reserved=("field", "type"))
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
    """`psk_core.param "w" {init = "xavier_uniform"} : !psk_core.tensor<In, Out>`: a parameter tensor of a module, in the module's dims; `init` names its initializer."""

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
    """`psk_core.use "proj" : !psk_core.params<Linear{D, D}>`: a sub-module instance (`use proj : Linear{D, D}`), possibly stacked."""

    name = "psk_core.use"

    def __init__(self, field: str, decl_type: ParamsAttr):
        super().__init__(attributes={"field": StringAttr(field), "type": decl_type})

    def verify_(self) -> None:
        if not isinstance(self.decl_type, ParamsAttr):
            raise VerifyException(f"a use holds a params type, not {type_text(self.decl_type)}")


@core_op
class ModuleDeclOp(IRDLOperation):
    """`psk_core.module @Linear attributes {dims = ["In", "Out"]} { psk_core.param "w" … }`: a module's parameter tree, so that field reads can be checked:

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
        print_op_attrs(printer, self.attributes, reserved=("sym_name",), keyword=True)
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
    """`%w = psk_core.field %θ {field = "w", site = "Linear.apply/%2"} : (!psk_core.params<Linear{In, Out}>) -> !psk_core.tensor<In, Out>`: a field of a parameter tree, `θ.w`."""

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
            attributes=site_attrs(site, name, field=StringAttr(field)),
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
