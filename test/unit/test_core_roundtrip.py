"""Random well-shaped PSK-Core programs: built with the dialect's constructors, printed,
parsed back and printed again, the text is the same, and the interpreter gives the
original and the parsed module the same bits.

A program is one function (optionally reading a parameter tree) over tensors whose axes
come from batch (a literal or the dim symbol B), head and model, named or not, with or
without the polymorphic prefix `...`; its body is a random sequence of element-wise
unary and binary ops (broadcasting by name and by position), powi, reductions over an
axis or over everything, softmax, dot, broadcast, ℝ[] constants and real of an f64
constant. An op whose operands do not fit is refused by its constructor and not drawn.
Every value the interpreter computes also has the shape its type gives at B = 3.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, f64
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64
from presk.dialects import core as C
from presk.emit.core_listing import format_module
from presk import ops, shapes
from presk.shapes import ShapeError

# the table's element-wise functions a program writes (presk/ops): `-x` and the builtins
UNARY = [C.NegOp] + [C.FUNCTION_OPS[f.name] for f in ops.builtins(arity=1).values()]
BINARY = [C.FUNCTION_OPS[f.name] for f in ops.rows(arity=2, core=True)]
REDUCE = [C.SumOp, C.MeanOp, C.MaxOp, C.MinOp, C.LogSumExpOp]
# Element-wise ops are drawn most often: they are where broadcasting happens.
KINDS = ["unary"] * 3 + ["binary"] * 5 + ["powi", "reduce", "reduce", "softmax", "dot",
                                           "dot", "broadcast", "broadcast", "constant",
                                           "real"]
CONSTANTS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 0.1, 1e-6, -2.5, 1 / 3, 5e-324, 1e300]),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
SIZES = {"batch": 3, "head": 2, "model": 4}
B = 3  # the value of the dim symbol B when batch is symbolic
PREFIX_SHAPE = (2,)  # what `...` stands for in the inputs


def parse(text: str) -> ModuleOp:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(C.Core)
    return Parser(ctx, text).parse_module()


@st.composite
def tensor_types(draw, symbolic: bool, prefix: bool) -> C.TensorAttr:
    axes = []
    for axis in ("batch", "head", "model"):
        if draw(st.booleans()):
            size = "B" if axis == "batch" and symbolic else SIZES[axis]
            named = draw(st.integers(0, 3)) > 0  # mostly named
            axes.append((axis if named else None, size))
    return C.TensorAttr.get(*axes, prefix=prefix and draw(st.booleans()))


class Builder:
    def __init__(self, name: str, args: list[tuple[str, object]], dims: list[str]):
        self.result_type = None
        self.func = C.FuncOp(name, args, C.TensorAttr.scalar(), dims)
        self.name = name
        self.count = len(args)
        self.block = self.func.body.block

    def site(self) -> str:
        return f"{self.name}/%{self.count}"

    def add(self, op):
        self.block.add_op(op)
        self.count += 1
        return op.results[0]


@st.composite
def programs(draw):
    symbolic = draw(st.booleans())
    prefix = draw(st.booleans())
    with_theta = draw(st.booleans())
    dims = ["B"] if symbolic else []
    args: list[tuple[str, object]] = []
    decl = None
    if with_theta:
        decl = C.ModuleDeclOp("M", [], [
            C.ParamDeclOp("γ", C.TensorAttr.get(4), "ones"),
            C.ParamDeclOp("w", C.TensorAttr.get(("model", 4), 2), "xavier_uniform"),
        ])
        args.append(("θ", C.ParamsAttr.get("M")))
    n_args = draw(st.integers(1, 3))
    for i in range(n_args):
        args.append((f"x{i}", draw(tensor_types(symbolic, prefix))))
    b = Builder("f", args, dims)
    block_args = list(b.block.args)
    pool = [a for a in block_args if isinstance(a.type, C.TensorAttr)]
    if with_theta:
        for field in draw(st.lists(st.sampled_from(["γ", "w"]), max_size=2, unique=True)):
            pool.append(b.add(C.FieldOp(block_args[0], field, site=b.site(), name=field,
                                        decl=decl)))

    names = ["ms", "h", "γ", "θ2", "logits", "z"]
    n_ops = draw(st.integers(1, 14))
    attempts = 0
    while n_ops > 0 and attempts < 80:
        attempts += 1
        kind = draw(st.sampled_from(KINDS))
        name = draw(st.sampled_from(names + [None] * 6))
        recent = draw(st.booleans())
        x = draw(st.sampled_from(pool[-3:] if recent else pool))
        try:
            if kind == "unary":
                op = draw(st.sampled_from(UNARY))(x, site=b.site(), name=name)
            elif kind == "binary":
                fits = [y for y in pool if _fits(shapes.broadcast, x, y)]
                y = draw(st.sampled_from(fits))
                op = draw(st.sampled_from(BINARY))(x, y, site=b.site(), name=name)
            elif kind == "broadcast":
                if draw(st.booleans()):  # often from the value with the fewest axes
                    x = min(pool, key=lambda v: len(v.type.shape.axes))
                fits = [y for y in pool if _fits(shapes.broadcast, x, y)]
                # Mostly to a type with more axes than x: the broadcast adds axes.
                wider = [y for y in fits if len(y.type.shape.axes) > len(x.type.shape.axes)]
                y = draw(st.sampled_from(wider if wider and draw(st.booleans()) else fits))
                target = shapes.broadcast(x.type.shape, y.type.shape)
                op = C.BroadcastOp(x, C.TensorAttr.from_shape(target), site=b.site(),
                                   name=name)
            elif kind == "powi":
                op = C.PowIOp(x, draw(st.integers(0, 3)), site=b.site(), name=name)
            elif kind == "reduce":
                axis = draw(st.sampled_from([None, *x.type.shape.names()]))
                op = draw(st.sampled_from(REDUCE))(x, axis, site=b.site(), name=name)
            elif kind == "softmax":
                if not x.type.shape.names():
                    continue
                axis = draw(st.sampled_from(x.type.shape.names()))
                op = C.SoftmaxOp(x, axis, site=b.site(), name=name)
            elif kind == "dot":
                fits = [(u, v) for u in pool for v in pool if _fits(shapes.contract, u, v)]
                if not fits:
                    continue
                u, v = draw(st.sampled_from(fits))
                op = C.DotOp(u, v, site=b.site(), name=name)
            elif kind == "constant":
                op = C.ConstantOp(draw(CONSTANTS), site=b.site(), name=name,
                                  result_type=C.TensorAttr.scalar())
            else:
                number = b.add(C.ConstantOp(draw(CONSTANTS), site=b.site(), result_type=f64))
                op = C.RealOp(number, site=b.site(), name=name)
        except (VerifyException, ShapeError):
            continue  # the operands do not fit: draw another op
        pool.append(b.add(op))
        if name is not None:
            names.remove(name)  # a let's name is used once
        n_ops -= 1
    result = pool[-1]
    b.block.add_op(C.ReturnOp(result, site=b.site()))
    # The function returns what its last op makes.
    b.func.function_type = b.func.function_type.from_lists(
        [t for _, t in args], [result.type])
    ops = [decl, b.func] if decl is not None else [b.func]
    module = ModuleOp(ops)

    # Inputs at concrete shapes.
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = []
    for arg_name, t in args:
        if isinstance(t, C.ParamsAttr):
            values.append(Tree({"γ": rng.normal(1.0, 0.2, 4), "w": rng.normal(0, 0.5, (4, 2))}))
            continue
        shape = PREFIX_SHAPE if t.shape.prefix else ()
        shape += tuple(B if a.size == "B" else a.size for a in t.shape.axes)
        values.append(rng.normal(0.0, 1.5, shape))
    return module, values, {"B": B} if symbolic else {}


def _fits(rule, x, y) -> bool:
    try:
        rule(x.type.shape, y.type.shape)
    except ShapeError:
        return False
    return True


def _bits(value) -> bytes:
    return np.ascontiguousarray(np.asarray(value, dtype=np.float64)).tobytes() \
        + repr(np.shape(value)).encode()


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs())
def test_print_parse_print_and_interpret(program) -> None:
    module, values, dims = program
    module.verify()
    text = str(module)
    parsed = parse(text)
    parsed.verify()
    assert str(parsed) == text
    assert format_module(parsed) == format_module(module)
    # Every op's value, not only the result: the trace gives (site, value) per op.
    first: list = []
    second: list = []
    original = Interpreter(module, F64(), trace=lambda s, v: first.append((s, v))).run(
        "f", values, dims)
    again = Interpreter(parsed, F64(), trace=lambda s, v: second.append((s, v))).run(
        "f", values, dims)
    assert [s for s, _ in second] == [s for s, _ in first]
    for (site, a), (_, b) in zip(first, second):
        assert _bits(b) == _bits(a), site
    assert _bits(again) == _bits(original)
    # Each value has the shape its type says: `...` is what the inputs bind it to.
    types = {op.site.data: op.results[0].type for op in module.ops.last.body.block.ops
             if op.results}
    for site, value in first:
        t = types[site]
        if isinstance(t, C.TensorAttr):
            expected = (PREFIX_SHAPE if t.shape.prefix else ()) + tuple(
                dims.get(a.size, a.size) if isinstance(a.size, str) else a.size
                for a in t.shape.axes)
            assert np.shape(value) == expected, (site, t)
