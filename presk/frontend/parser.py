"""Parse .psk text into the syntax tree of presk.frontend.ast, or a syntax diagnostic."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import lark
from lark import Lark, Token, Transformer, v_args

from . import ast as A
from .diagnostics import CompileError, error, source_lines

_GRAMMAR = Path(__file__).with_name("grammar.lark")

# The grammar's keywords (its quoted words and OPTIMIZER). Lark's contextual lexer would
# take one as a NAME where no keyword fits (`fn let(…)`); a NAME token spelling one is
# refused (E0006), so that a keyword means one thing wherever it stands.
RESERVED: frozenset[str] = frozenset(
    re.findall(r'"([a-z_]+)"', _GRAMMAR.read_text(encoding="utf-8"))) | {"optimizer"}

_READABLE = {
    "NAME": "a name", "NUMBER": "a number", "INT": "a natural number", "STRING": "a string",
    "REAL": "`ℝ`", "ARROW": "`->`", "DOT": "`·`", "ELLIPSIS": "`...`", "CMP": "a comparison",
    "$END": "the end of the file",
}


@lru_cache(maxsize=1)
def _parser() -> Lark:
    # cache=True keeps the LALR tables on disk: `presk check` starts in milliseconds.
    return Lark(_GRAMMAR.read_text(encoding="utf-8"), parser="lalr",
                start=["start", "type_only"], propagate_positions=True, cache=True)


def parse_file(path: str, text: str) -> A.SourceFile:
    tree = _parse(path, text, "start")
    return A.SourceFile(path, text, _transform(_Build(path, text), tree))


def parse_type(path: str, text: str, line: int = 1) -> A.TypeExpr:
    """Parse a type written outside a program (a data file's header)."""
    tree = _parse(path, text, "type_only")
    return _transform(_Build(path, text, line - 1), tree).children[0]


# The tree builder, the checker and the lowering recurse once or more per level of the
# syntax tree: deeper than this, Python's recursion limit would end them in a traceback.
MAX_DEPTH = 150


def _check_depth(build: "_Build", tree: lark.Tree) -> None:
    stack, deep = [(tree, 1)], []
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            deep.append(build._span(node.meta))
        else:
            stack += [(c, depth + 1) for c in node.children if isinstance(c, lark.Tree)]
    if deep:
        first = min(deep, key=lambda s: (s.line, s.col))
        raise error("E0005", f"the expression nests more than {MAX_DEPTH} levels deep", first,
                    "split it with `let`")


def _transform(build: "_Build", tree: lark.Tree):
    _check_depth(build, tree)
    # lark wraps an exception raised inside a rule in VisitError: unwrap our diagnostics.
    try:
        return build.transform(tree)
    except lark.exceptions.VisitError as exc:
        if isinstance(exc.orig_exc, CompileError):
            raise exc.orig_exc from None
        raise


def _parse(path: str, text: str, start: str) -> lark.Tree:
    try:
        return _parser().parse(text, start=start)
    except lark.exceptions.UnexpectedInput as exc:
        raise _syntax_error(path, text, exc) from None


def _describe(name: str) -> str:
    if name in _READABLE:
        return _READABLE[name]
    term = next((t for t in _parser().terminals if t.name == name), None)
    if term is not None and term.pattern.type == "str":
        return f"`{term.pattern.value}`"
    return name.lower()


def _syntax_error(path: str, text: str, exc: lark.exceptions.UnexpectedInput):
    line, col = max(exc.line, 1), max(exc.column, 1)
    if isinstance(exc, lark.exceptions.UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        span = A.Span(path, line, col, line, col + 1)
        shown = f"`{char}`" if char.isprintable() else f"U+{ord(char):04X}"
        return error("E0001", f"unexpected character {shown}", span)
    # LALR merges states, so `exc.expected` may list tokens of another context (`init`
    # after a function parameter's type); the interactive parser tries each token.
    interactive = getattr(exc, "interactive_parser", None)
    accepted = interactive.accepts() if interactive is not None else None
    expected = sorted({_describe(t) for t in accepted or getattr(exc, "expected", None) or ()})
    hint = None
    if expected:
        hint = "expected " + (", ".join(expected[:-1]) + " or " + expected[-1]
                              if len(expected) > 1 else expected[0])
    token = getattr(exc, "token", None)
    if token is None or token.type == "$END":
        if token is not None and token.end_line:  # lark puts $END after the last token
            line, col = token.end_line, token.end_column
        else:
            last = source_lines(text.rstrip()) or [""]
            line, col = len(last), len(last[-1]) + 1
        span = A.Span(path, line, col, line, col + 1)
        return error("E0001", "unexpected end of file", span, hint)
    span = A.Span(path, line, col, line, col + max(1, len(str(token))))
    return error("E0001", f"unexpected `{token}`", span, hint)


@v_args(meta=True)
class _Build(Transformer):
    """Turns lark's tree into dataclasses, each node with its span."""

    def __init__(self, path: str, text: str, line_offset: int = 0):
        super().__init__()
        self.path, self.text, self.offset = path, text, line_offset

    def _span(self, meta) -> A.Span:
        if getattr(meta, "empty", False):
            return A.Span(self.path, 1, 1, 1, 1)
        return A.Span(self.path, meta.line + self.offset, meta.column,
                      meta.end_line + self.offset, meta.end_column)

    def _tok(self, tok: Token) -> A.Span:
        return A.Span(self.path, tok.line + self.offset, tok.column,
                      tok.end_line + self.offset, tok.end_column)

    def NAME(self, tok: Token) -> Token:  # noqa: N802 - lark calls a terminal's method by name
        if tok.value in RESERVED:
            raise error("E0006", f"`{tok.value}` is a reserved word; it cannot be a name",
                        self._tok(tok), f"rename it, e.g. `{tok.value}_`")
        return tok

    # ---- file ----
    def start(self, meta, items):
        return items

    def import_decl(self, meta, c):
        return A.ImportDecl(c[0][1:-1], str(c[1]), self._span(meta), self._tok(c[0]))

    def dim_decl(self, meta, c):
        return A.DimDecl([str(t) for t in c], [self._tok(t) for t in c], self._span(meta))

    def const_decl(self, meta, c):
        return A.ConstDecl(str(c[0]), str(c[1]), c[2], self._span(meta), self._tok(c[1]))

    def module_decl(self, meta, c):
        name, dims, members = c[0], c[1], c[2:]
        return A.ModuleDecl(
            str(name), [str(d) for d in dims or []], [self._tok(d) for d in dims or []],
            [m for m in members if isinstance(m, A.ParamDecl)],
            [m for m in members if isinstance(m, A.UseDecl)],
            [m for m in members if isinstance(m, A.FnDecl)],
            self._span(meta), self._tok(name))

    def dim_params(self, meta, c):
        return list(c)

    def param_decl(self, meta, c):
        return A.ParamDecl(str(c[0]), c[1], c[2], self._span(meta))

    def init_spec(self, meta, c):
        return A.InitSpec(str(c[0]), c[1] or [], self._span(meta))

    def use_decl(self, meta, c):
        return A.UseDecl(str(c[0]), c[1], self._span(meta))

    def module_ref(self, meta, c):
        qual, sizes = c[0], [s for s in c[1:] if s is not None]
        return A.ModuleRef(qual.path, [self._size(s) for s in sizes], None, self._span(meta))

    def stack_ref(self, meta, c):
        ref: A.ModuleRef = c[1]
        return A.ModuleRef(ref.path, ref.sizes, self._size(c[0]), self._span(meta))

    def qualname(self, meta, c):
        return A.Name(self._span(meta), path=[str(t) for t in c])

    def _size(self, tok) -> A.SizeExpr:
        return A.SizeExpr(str(tok), self._tok(tok))

    # ---- functions ----
    def fn_decl(self, meta, c):
        name, rest = c[0], c[1:]
        params = [p for p in rest[:-3] if p is not None]
        result, (lets, body) = rest[-2], rest[-1]
        return A.FnDecl(str(name), params, result, lets, body, self._span(meta), self._tok(name))

    def fparam(self, meta, c):
        return A.FnParam(str(c[0]), c[1], c[2], self._span(meta))

    def body(self, meta, c):
        return list(c[:-1]), c[-1]

    def let_name(self, meta, c):
        return A.Let([str(c[0])], [self._tok(c[0])], False, c[1], self._span(meta))

    def let_tuple(self, meta, c):
        names = c[:-1]
        return A.Let([str(n) for n in names], [self._tok(n) for n in names], True, c[-1],
                     self._span(meta))

    # ---- declarations with blocks ----
    def assert_decl(self, meta, c):
        span = self._span(meta)
        lines = source_lines(self.text)
        text = lines[meta.line - 1][meta.column - 1:] if meta.line == meta.end_line else ""
        text = text[:meta.end_column - meta.column] if text else ""
        return A.AssertDecl(c[0], span, text.removeprefix("assert").strip())

    def optimizer_decl(self, meta, c):
        name, kind, fields = c[1], c[2], c[3:]
        return A.OptimizerDecl(str(name), str(kind or name), list(fields), self._span(meta),
                               self._tok(name))

    def opt_value(self, meta, c):
        return A.OptField(str(c[0]), str(c[1]), c[2], None, self._span(meta))

    def opt_schedule(self, meta, c):
        return A.OptField(str(c[0]), str(c[1]), None, c[2] or [], self._span(meta))

    def training_decl(self, meta, c):
        return A.TrainingDecl(str(c[0]), list(c[1:]), self._span(meta), self._tok(c[0]))

    def train_key(self, meta, c):
        return str(c[0])

    def train_stream(self, meta, c):
        path_tok, stages = c[1]
        return A.TrainItem(c[0], self._span(meta), stream=path_tok[1:-1],
                           stream_span=self._tok(path_tok), stages=stages)

    def train_ref(self, meta, c):
        return A.TrainItem(c[0], self._span(meta), ref=c[1])

    def train_value(self, meta, c):
        return A.TrainItem(str(c[0]), self._span(meta), type_name=str(c[1]), value=c[2])

    def train_checkpoint(self, meta, c):
        if len(c[0]) > 18:
            raise error("E0601", "the checkpoint interval is too large", self._tok(c[0]))
        return A.TrainItem("checkpoint", self._span(meta), every=int(c[0]), directory=c[1][1:-1])

    def stream_expr(self, meta, c):
        return c[0], list(c[1:])

    def stage(self, meta, c):
        return A.Stage(str(c[0]), c[1] or [], self._span(meta))

    def kwargs(self, meta, c):
        return list(c)

    def kwarg(self, meta, c):
        return A.KwArg(str(c[0]), c[1], self._span(meta))

    # ---- types ----
    def tensor_type(self, meta, c):
        axes = [a for a in c[1:] if a is not None]
        dots = [i for i, a in enumerate(axes) if a == "..."]
        if dots not in ([], [0]):
            raise error("E0308", "`...` may only stand first in a tensor type, once",
                        self._span(meta))
        named = [a for a in axes if a != "..." and a.name is not None]
        for i, a in enumerate(named):
            if any(b.name == a.name for b in named[:i]):
                raise error("E0308", f"the axis name `{a.name}` appears twice", a.span,
                            "each axis of a tensor has its own name, or none")
        return A.TensorTypeExpr([a for a in axes if a != "..."], bool(dots), self._span(meta))

    def prefix_axis(self, meta, c):
        return "..."

    def named_axis(self, meta, c):
        return A.AxisExpr(str(c[0]), self._size(c[1]), self._span(meta))

    def bare_axis(self, meta, c):
        return A.AxisExpr(None, self._size(c[0]), self._span(meta))

    def tuple_type(self, meta, c):
        return A.TupleTypeExpr(list(c), self._span(meta))

    def params_type(self, meta, c):
        return A.ParamsTypeExpr(c[0], self._span(meta))

    def scalar_type(self, meta, c):
        return A.ScalarTypeExpr(str(c[0]), self._span(meta))

    def type_only(self, meta, c):
        return lark.Tree("type_only", c)

    # ---- conditions ----
    def or_cond(self, meta, c):
        return A.Logical("or", list(c), self._span(meta))

    def and_cond(self, meta, c):
        return A.Logical("and", list(c), self._span(meta))

    def not_cond(self, meta, c):
        return A.Logical("not", list(c), self._span(meta))

    def comparison(self, meta, c):
        op = {"≤": "<=", "≥": ">=", "≠": "!="}.get(str(c[1]), str(c[1]))
        return A.Comparison(op, c[0], c[2], self._span(meta))

    # ---- expressions ----
    def _binary(op):  # noqa: N805 - a factory for the methods below
        def build(self, meta, c):
            lhs, rhs = c[0], c[-1]
            op_tok = c[1] if len(c) == 3 else None
            return A.Binary(self._span(meta), op=op, lhs=lhs, rhs=rhs,
                            op_span=self._tok(op_tok) if op_tok is not None else None)
        return build

    add, sub, mul, div = _binary("add"), _binary("sub"), _binary("mul"), _binary("div")
    dot, mod, pow = _binary("dot"), _binary("mod"), _binary("pow")

    def neg(self, meta, c):
        return A.Neg(self._span(meta), operand=c[0])

    def number(self, meta, c):
        return A.Number(self._span(meta), text=str(c[0]))

    def name_ref(self, meta, c):
        return c[0]

    def tuple_expr(self, meta, c):
        return A.TupleExpr(self._span(meta), items=list(c))

    def call(self, meta, c):
        callee, args = c[0], [a for a in c[1:] if a is not None]
        return A.Call(self._span(meta), callee=callee, args=args)

    def apply(self, meta, c):
        func, args = c[0], [a for a in c[1:] if a is not None]
        return A.Apply(self._span(meta), func=func, args=args)

    def pos_arg(self, meta, c):
        return A.Arg(self._span(meta), expr=c[0])

    def kw_arg(self, meta, c):
        return A.Arg(self._span(meta), expr=c[1], keyword=str(c[0]))

    def axis_arg(self, meta, c):
        return A.Arg(self._span(meta), axis=str(c[0]))
