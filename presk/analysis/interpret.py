"""Evaluate PSK-Core functions at concrete dims, in f64 or in MPFR.

Values: a tensor is a numpy array (float64, or objects holding `mpfr`), laid out with the
axes its `...` binds first, then its explicit axes; an f64 is a Python float; a tuple is a
tuple; a parameter tree is a `Tree` over tensors keyed by path. Alignment of element-wise
operands comes from their types in the function (presk.shapes.alignment), never from the
concrete shapes, so `...` binding to an unnamed axis cannot change what aligns with what.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from .. import shapes
from ..dialects import core as C
from .numbers import Numbers


class InterpretError(Exception):
    """A value the interpreter cannot compute (a shape the IR did not promise)."""


@dataclass(frozen=True)
class Tree:
    """A parameter tree: `data` keyed by full path, viewed under `prefix`, each tensor
    indexed by `select` (a fold's iteration, one index per stack taken)."""

    data: dict[str, np.ndarray]
    prefix: str = ""
    select: tuple[int, ...] = ()

    def field(self, name: str) -> "Tree | np.ndarray":
        path = self.prefix + name
        if path in self.data:
            return self.data[path][self.select] if self.select else self.data[path]
        return Tree(self.data, path + ".", self.select)

    def at(self, i: int) -> "Tree":
        return Tree(self.data, self.prefix, self.select + (i,))

    def count(self) -> int:
        """The length of the stack this view folds over: its tensors' next leading axis."""
        for path, array in self.data.items():
            if path.startswith(self.prefix):
                return int(array.shape[len(self.select)])
        raise InterpretError(f"an empty tree at `{self.prefix}`")


@dataclass
class Interpreter:
    module: ModuleOp
    numbers: Numbers
    trace: Callable[[str, Any], None] | None = None  # called with (site, value) per op
    funcs: dict[str, C.FuncOp] = field(init=False)

    def __post_init__(self) -> None:
        self.funcs = {op.sym_name.data: op for op in self.module.ops if isinstance(op, C.FuncOp)}

    def run(self, name: str, args: list[Any], dims: Mapping[str, int] | None = None) -> Any:
        """Call `name` on `args`, its dim symbols at the values `dims` gives them."""
        if name not in self.funcs:
            raise InterpretError(f"no function `{name}`")
        with self.numbers.context():
            return self.call(self.funcs[name], args, dims)

    def call(self, func: C.FuncOp, args: list[Any],
             dims: Mapping[str, int] | None = None) -> Any:
        env: dict[SSAValue, Any] = dict(zip(func.body.block.args, args))
        dims = {d: dims[d] for d in func.dim_names if d in dims} if dims else {}
        for op in func.body.block.ops:
            if isinstance(op, C.ReturnOp):
                return env[op.operands[0]]
            value = self.step(op, [env[o] for o in op.operands], dims)
            env[op.results[0]] = value
            if self.trace is not None:
                self.trace(op.site.data, value)
        raise InterpretError(f"`{func.sym_name.data}` has no return")

    # ---- one operation ----
    def step(self, op: Operation, args: list[Any], dims: Mapping[str, int] | None = None) -> Any:
        """One op on its operands' values; `dims` binds the function's dim symbols."""
        ns = self.numbers
        dims = dims or {}
        if isinstance(op, C.ConstantOp):
            return float(op.number) if not isinstance(op.results[0].type, C.TensorAttr) \
                else ns.constant(op.number)
        if isinstance(op, C.RealOp):
            return ns.constant(float(args[0]))
        if isinstance(op, C.PowIOp):
            return ns.powi(args[0], op.n.value.data)
        if isinstance(op, C.SoftmaxOp):
            return ns.softmax(args[0], self._axis(op.operands[0], args[0], op.axis.data))
        if isinstance(op, C.UnaryOp):
            return ns.unary(_UNARY[type(op)], args[0])
        if isinstance(op, C.DotOp):
            return ns.dot(args[0], args[1])
        if isinstance(op, C.BinaryOp):
            a, b = self._aligned(op, args)
            return ns.binary(_BINARY[type(op)], a, b)
        if isinstance(op, C.ReduceOp):
            axis = op.axis_name
            index = None if axis is None else self._axis(op.operands[0], args[0], axis)
            return ns.reduce(_REDUCE[type(op)], args[0], index)
        if isinstance(op, C.BroadcastOp):
            return self._broadcast(op, args[0], dims)
        if isinstance(op, C.TupleOp):
            return tuple(args)
        if isinstance(op, C.GetOp):
            return args[0][op.index.value.data]
        if isinstance(op, C.FieldOp):
            return args[0].field(op.field.data)
        if isinstance(op, C.CallOp):
            callee = self.funcs[op.callee.root_reference.data]
            return self.call(callee, args, _callee_dims(op, dims))
        if isinstance(op, C.FoldOp):
            tree, acc = args
            callee = self.funcs[op.callee.root_reference.data]
            count = _size(C.size_value(op.count), dims)
            inner = _callee_dims(op, dims)
            for i in range(count if count is not None else tree.count()):
                acc = self.call(callee, [tree.at(i), acc], inner)
            return acc
        raise InterpretError(f"{op.name} is not interpreted")

    @staticmethod
    def _prefix_len(value: SSAValue, array: np.ndarray) -> int:
        t = value.type
        assert isinstance(t, C.TensorAttr)
        return np.ndim(array) - len(t.shape.axes) if t.shape.prefix else 0

    def _axis(self, value: SSAValue, array: np.ndarray, name: str) -> int:
        index = value.type.shape.index_of(name)  # type: ignore[attr-defined]
        if index is None:
            raise InterpretError(f"no axis `{name}` in {value.type}")
        return self._prefix_len(value, array) + index

    def _aligned(self, op: Operation, args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        lhs, rhs = op.operands
        result, la, ra = shapes.alignment(lhs.type.shape, rhs.type.shape)  # type: ignore[attr-defined]
        p = max(self._prefix_len(lhs, args[0]), self._prefix_len(rhs, args[1]))
        rank = p + len(result.axes)
        return (_place(args[0], lhs.type.shape, la, p, rank),  # type: ignore[attr-defined]
                _place(args[1], rhs.type.shape, ra, p, rank))  # type: ignore[attr-defined]

    def _broadcast(self, op: C.BroadcastOp, value: np.ndarray,
                   dims: Mapping[str, int]) -> np.ndarray:
        source = op.operands[0].type.shape  # type: ignore[attr-defined]
        target = op.results[0].type.shape  # type: ignore[attr-defined]
        _, places, _ = shapes.alignment(source, target)
        p = self._prefix_len(op.operands[0], value)
        placed = _place(value, source, places, p, p + len(target.axes))
        sizes = []
        for k, a in enumerate(target.axes):
            size = _size(a.size, dims)
            if size is None:
                if k not in places:
                    raise InterpretError(f"{op.site.data}: the size `{a.size}` of "
                                         f"{target} has no value")
                size = 1  # the operand has the axis: it gives the size
            sizes.append(size)
        full = np.broadcast_shapes(placed.shape, (1,) * p + tuple(sizes))
        return np.broadcast_to(placed, full).copy()


def _size(size: shapes.Size, dims: Mapping[str, int]) -> int | None:
    """A literal size, or a dim symbol's value where `dims` has one."""
    return size if isinstance(size, int) else dims.get(size)


def _callee_dims(op: C.CallOp | C.FoldOp, dims: Mapping[str, int]) -> dict[str, int]:
    """The callee's dims at this call, the caller's symbols replaced by their values."""
    out = {}
    for name, size in op.dim_env.items():
        value = _size(size, dims)
        if value is not None:
            out[name] = value
    return out


def _place(array: np.ndarray, t: shapes.TensorType, places: list[int], p: int,
           rank: int) -> np.ndarray:
    """View `array` at the result's rank: its axes where alignment puts them, ones elsewhere."""
    array = np.asarray(array)
    shape = [1] * rank
    own_p = np.ndim(array) - len(t.axes) if t.prefix else 0
    for i in range(own_p):
        shape[i] = array.shape[i]
    for k, place in enumerate(places):
        shape[p + place] = array.shape[own_p + k]
    return array.reshape(shape)


_UNARY = {
    C.NegOp: "neg", C.SqrtOp: "sqrt", C.ExpOp: "exp", C.LogOp: "log", C.TanhOp: "tanh",
    C.SigmoidOp: "sigmoid", C.ReluOp: "relu", C.GeluOp: "gelu", C.SoftplusOp: "softplus",
    C.AbsOp: "abs", C.SinOp: "sin", C.CosOp: "cos",
}
_BINARY = {
    C.AddOp: "add", C.SubOp: "sub", C.MulOp: "mul", C.DivOp: "div", C.MinimumOp: "min",
    C.MaximumOp: "max", C.PowOp: "pow",
}
_REDUCE = {C.SumOp: "sum", C.MeanOp: "mean", C.MaxOp: "max", C.MinOp: "min",
           C.LogSumExpOp: "logsumexp"}
