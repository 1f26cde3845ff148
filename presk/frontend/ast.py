"""The syntax tree of a .psk file: what the parser builds, each node with its span.

Elaboration annotates expression nodes in place: `ty` (the node's type) and, on calls
and names, `ref` (what the name resolved to). Those fields are not part of equality.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


# ---- types as written -------------------------------------------------------------------

@dataclass
class SizeExpr:
    text: str  # a natural literal or a dim/const name
    span: Span

    @property
    def is_literal(self) -> bool:
        return self.text.isdecimal()


@dataclass
class AxisExpr:
    name: str | None
    size: SizeExpr
    span: Span


@dataclass
class TensorTypeExpr:
    axes: list[AxisExpr]
    prefix: bool
    span: Span


@dataclass
class TupleTypeExpr:
    items: list["TypeExpr"]
    span: Span


@dataclass
class ModuleRef:
    """`lin.Linear{D, D}`, `Block`, or `stack{L}(Block)`."""

    path: list[str]
    sizes: list[SizeExpr]
    stack: SizeExpr | None
    span: Span


@dataclass
class ParamsTypeExpr:
    ref: ModuleRef
    span: Span


@dataclass
class ScalarTypeExpr:
    name: str  # f64 or nat
    span: Span


TypeExpr = Union[TensorTypeExpr, TupleTypeExpr, ParamsTypeExpr, ScalarTypeExpr]


# ---- expressions ------------------------------------------------------------------------

@dataclass(eq=False)
class Expr:
    span: Span
    ty: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class Number(Expr):
    text: str = ""

    @property
    def is_natural(self) -> bool:
        return self.text.isdecimal()

    @property
    def value(self) -> float:
        return float(self.text)


@dataclass(eq=False)
class Name(Expr):
    path: list[str] = field(default_factory=list)
    ref: Any = field(default=None, init=False, repr=False)

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(eq=False)
class Arg:
    span: Span
    expr: Expr | None = None
    keyword: str | None = None  # `eps = 1e-5`
    axis: str | None = None  # `axis model`


@dataclass(eq=False)
class Call(Expr):
    callee: Name = None  # type: ignore[assignment]
    args: list[Arg] = field(default_factory=list)
    ref: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class Apply(Expr):
    """`grad(f)(θ, batch)`: the function a call returns, applied to arguments."""

    func: Call = None  # type: ignore[assignment]
    args: list[Arg] = field(default_factory=list)
    ref: Any = field(default=None, init=False, repr=False)


@dataclass(eq=False)
class Binary(Expr):
    op: str = ""  # add sub mul div dot mod pow
    lhs: Expr = None  # type: ignore[assignment]
    rhs: Expr = None  # type: ignore[assignment]
    op_span: Span | None = None


@dataclass(eq=False)
class Neg(Expr):
    operand: Expr = None  # type: ignore[assignment]


@dataclass(eq=False)
class TupleExpr(Expr):
    items: list[Expr] = field(default_factory=list)


# ---- conditions (static assertions) ------------------------------------------------------

@dataclass(eq=False)
class Comparison:
    op: str
    lhs: Expr
    rhs: Expr
    span: Span


@dataclass(eq=False)
class Logical:
    op: str  # and, or, not
    operands: list["Cond"]
    span: Span


Cond = Union[Comparison, Logical]


# ---- declarations -----------------------------------------------------------------------

@dataclass(eq=False)
class Let:
    names: list[str]
    name_spans: list[Span]
    is_tuple: bool
    expr: Expr
    span: Span
    types: list[Any] = field(default_factory=list, repr=False)


@dataclass(eq=False)
class FnParam:
    name: str
    type: TypeExpr
    default: Expr | None
    span: Span


@dataclass(eq=False)
class FnDecl:
    name: str
    params: list[FnParam]
    result: TypeExpr
    lets: list[Let]
    body: Expr
    span: Span
    name_span: Span


@dataclass(eq=False)
class KwArg:
    name: str
    value: Expr
    span: Span


@dataclass(eq=False)
class InitSpec:
    name: str
    args: list[KwArg]
    span: Span


@dataclass(eq=False)
class ParamDecl:
    name: str
    type: TypeExpr
    init: InitSpec
    span: Span


@dataclass(eq=False)
class UseDecl:
    name: str
    ref: ModuleRef
    span: Span


@dataclass(eq=False)
class ModuleDecl:
    name: str
    dims: list[str]
    dim_spans: list[Span]
    params: list[ParamDecl]
    uses: list[UseDecl]
    fns: list[FnDecl]
    span: Span
    name_span: Span


@dataclass(eq=False)
class ImportDecl:
    path: str
    alias: str
    span: Span
    path_span: Span
    target: str | None = None  # the imported file's path as displayed, set when loaded


@dataclass(eq=False)
class DimDecl:
    names: list[str]
    spans: list[Span]
    span: Span


@dataclass(eq=False)
class ConstDecl:
    name: str
    type_name: str
    value: Expr
    span: Span
    type_span: Span


@dataclass(eq=False)
class AssertDecl:
    cond: Cond
    span: Span
    text: str


@dataclass(eq=False)
class OptField:
    name: str
    type_name: str
    value: Expr | None  # None for a schedule
    schedule_args: list[KwArg] | None
    span: Span


@dataclass(eq=False)
class OptimizerDecl:
    name: str
    kind: str
    fields: list[OptField]
    span: Span
    name_span: Span


@dataclass(eq=False)
class Stage:
    name: str
    args: list[KwArg]
    span: Span


@dataclass(eq=False)
class TrainItem:
    """One line of a training block: `key = value`, `key : type = value` or a checkpoint."""

    key: str
    span: Span
    ref: ModuleRef | None = None
    stream: str | None = None
    stream_span: Span | None = None
    stages: list[Stage] = field(default_factory=list)
    type_name: str | None = None
    value: Expr | None = None
    every: int | None = None
    directory: str | None = None


@dataclass(eq=False)
class TrainingDecl:
    name: str
    items: list[TrainItem]
    span: Span
    name_span: Span


Decl = Union[ImportDecl, DimDecl, ConstDecl, ModuleDecl, FnDecl, AssertDecl,
             OptimizerDecl, TrainingDecl]


@dataclass(eq=False)
class SourceFile:
    path: str  # as displayed: relative to the working directory where possible
    text: str
    decls: list[Decl]
