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
from xdsl.dialects.builtin import ModuleOp, TupleType
from xdsl.ir import Attribute, Operation, SSAValue

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

    def items(self) -> list[tuple[str, np.ndarray]]:
        """Its tensors by path below this view, each as the view selects it."""
        return [(path[len(self.prefix):], array[self.select] if self.select else array)
                for path, array in self.data.items() if path.startswith(self.prefix)]

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
    # called with (op, its operands' values, its value) per op, after `trace`
    trace_op: Callable[[Operation, list[Any], Any], None] | None = None
    funcs: dict[str, C.FuncOp] = field(init=False)

    def __post_init__(self) -> None:
        self.funcs = {op.sym_name.data: op for op in self.module.ops if isinstance(op, C.FuncOp)}
        self.decls = {op.sym_name.data: op for op in self.module.ops
                      if isinstance(op, C.ModuleDeclOp)}

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
        prefix = _bound_prefix(func, args)
        for op in func.body.block.ops:
            if isinstance(op, C.ReturnOp):
                return env[op.operands[0]]
            operands = [env[o] for o in op.operands]
            value = self.step(op, operands, dims, prefix)
            env[op.results[0]] = value
            if self.trace is not None:
                self.trace(op.site.data, value)
            if self.trace_op is not None:
                self.trace_op(op, operands, value)
        raise InterpretError(f"`{func.sym_name.data}` has no return")

    # ---- one operation ----
    def step(self, op: Operation, args: list[Any], dims: Mapping[str, int] | None = None,
             prefix: tuple[int, ...] | None = None) -> Any:
        """One op on its operands' values; `dims` binds the function's dim symbols and
        `prefix` is the shape its `...` stands for (None when no argument binds it)."""
        ns = self.numbers
        dims = dims or {}
        if isinstance(op, C.ConstantOp):
            return float(op.number) if not isinstance(op.results[0].type, C.TensorAttr) \
                else ns.constant(op.number)
        if isinstance(op, C.RealOp):
            return ns.constant(float(args[0]))  # an f64, or a nat
        if isinstance(op, C.HeavisideOp):
            return ns.heaviside(args[0], op.at_zero_value)
        if isinstance(op, C.PowIOp):
            return ns.powi(args[0], op.n.value.data)
        if isinstance(op, C.SoftmaxOp):
            return ns.softmax(args[0], self._axis(op.operands[0], args[0], op.axis.data))
        if isinstance(op, C.UnaryOp):
            return ns.unary(_function(op), args[0])
        if isinstance(op, C.DotOp):
            return ns.dot(args[0], args[1])
        if isinstance(op, C.BinaryOp):
            a, b = self._aligned(op, args)
            return ns.binary(_function(op), a, b)
        if isinstance(op, C.ReduceOp):
            axis = op.axis_name
            index = None if axis is None else self._axis(op.operands[0], args[0], axis)
            return ns.reduce(_REDUCE[type(op)], args[0], index)
        if isinstance(op, C.BroadcastOp):
            return self._broadcast(op, args[0], dims, prefix)
        if isinstance(op, C.TupleOp):
            return tuple(args)
        if type(op) in _REVERSE_OPS:
            return _REVERSE_OPS[type(op)](self, op, args)
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
        if np.ndim(args[0]) == 0 and np.ndim(args[1]) == 0:
            return args[0], args[1]  # two scalars: nothing to align
        lhs, rhs = op.operands
        result, la, ra = shapes.alignment(lhs.type.shape, rhs.type.shape)  # type: ignore[attr-defined]
        p = max(self._prefix_len(lhs, args[0]), self._prefix_len(rhs, args[1]))
        rank = p + len(result.axes)
        return (_place(args[0], lhs.type.shape, la, p, rank),  # type: ignore[attr-defined]
                _place(args[1], rhs.type.shape, ra, p, rank))  # type: ignore[attr-defined]

    def _broadcast(self, op: C.BroadcastOp, value: np.ndarray, dims: Mapping[str, int],
                   prefix: tuple[int, ...] | None = None) -> np.ndarray:
        source = op.operands[0].type.shape  # type: ignore[attr-defined]
        target = op.results[0].type.shape  # type: ignore[attr-defined]
        _, places, _ = shapes.alignment(source, target)
        p = self._prefix_len(op.operands[0], value)
        lead: tuple[int, ...] = ()
        if target.prefix and not source.prefix:
            # The operand has no `...`: it stands for what the arguments bind it to.
            if prefix is None:
                raise InterpretError(f"{op.site.data}: the `...` of {target} is bound by no "
                                     "argument")
            lead = prefix
        placed = _place(value, source, places, p, p + len(target.axes))
        placed = placed.reshape((1,) * len(lead) + placed.shape)
        sizes = []
        for k, a in enumerate(target.axes):
            size = _size(a.size, dims)
            if size is None:
                if k not in places:
                    raise InterpretError(f"{op.site.data}: the size `{a.size}` of "
                                         f"{target} has no value")
                size = 1  # the operand has the axis: it gives the size
            sizes.append(size)
        full = np.broadcast_shapes(placed.shape, lead + (1,) * p + tuple(sizes))
        return np.broadcast_to(placed, full).copy()


def flatten(v: Any, out: list, leaf: type) -> None:
    """Append the numbers a value holds (a `leaf`, or a tuple, a parameter tree or an
    object array of them) to `out`, in order."""
    if isinstance(v, tuple):
        for x in v:
            flatten(x, out, leaf)
    elif isinstance(v, Tree):
        for _, a in v.items():
            out.extend(np.asarray(a, dtype=object).reshape(-1))
    elif isinstance(v, leaf):
        out.append(v)
    elif isinstance(v, np.ndarray) and v.dtype == object:
        out.extend(v.reshape(-1))


def _size(size: shapes.Size, dims: Mapping[str, int]) -> int | None:
    """A literal size, or a dim symbol's value where `dims` has one."""
    return size if isinstance(size, int) else dims.get(size)


def _bound_prefix(func: C.FuncOp, args: list[Any]) -> tuple[int, ...] | None:
    """The shape the function's `...` stands for: the leading axes of an argument whose
    type has it (through tuples), or None when no argument has it."""
    def find(t: Attribute, value: Any) -> tuple[int, ...] | None:
        if isinstance(t, C.TensorAttr) and t.shape.prefix:
            shape = np.shape(value)
            return tuple(shape[:len(shape) - len(t.shape.axes)])
        if isinstance(t, TupleType) and isinstance(value, tuple):
            for item_type, item in zip(t.types.data, value):
                if (found := find(item_type, item)) is not None:
                    return found
        return None

    for t, value in zip(func.function_type.inputs.data, args):
        if (found := find(t, value)) is not None:
            return found
    return None


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


def _sum_to(it: Interpreter, op: C.SumToOp, args: list) -> np.ndarray:
    x = args[0]
    p = it._prefix_len(op.operand, x)
    kept = set(op.kept)
    axes = [i for i in range(p) if op.keep_prefix is None] + \
        [p + k for k in range(np.ndim(x) - p) if k not in kept]
    return it.numbers.sum(x, tuple(axes)) if axes else x


def _spread(it: Interpreter, op: C.SpreadOp, args: list) -> np.ndarray:
    x, like = args
    source = op.operand.type.shape
    p = it._prefix_len(op.like, like)
    placed = _place(x, source, op.place_list, p, np.ndim(like))
    out = np.broadcast_to(placed, np.shape(like))
    if op.mean is not None:
        out = out / it.numbers.constant(float(np.size(like) // max(np.size(x), 1)))
    return np.array(out, dtype=out.dtype)


def _contract(it: Interpreter, op: C.ContractOp, args: list) -> np.ndarray:
    a, b = args
    lhs, rhs, prefix = op.axes
    pa, pb = it._prefix_len(op.lhs, a), it._prefix_len(op.rhs, b)
    # The pairs in the lhs's row-major order: the order a loop nest over them takes.
    pairs = sorted(list(zip(range(pa), range(pb)) if prefix else []) +
                   [(pa + i, pb + j) for i, j in zip(lhs, rhs)])
    a_axes, b_axes = [i for i, _ in pairs], [j for _, j in pairs]
    out = it.numbers.contract(a, b, a_axes, b_axes)
    if pb and not prefix:  # b's prefix leads the result, as its type says
        rest_a = np.ndim(a) - len(a_axes)
        order = list(range(rest_a, rest_a + pb)) + list(range(rest_a)) + \
            list(range(rest_a + pb, np.ndim(out)))
        out = np.transpose(out, order)
    return np.asarray(out, dtype=np.asarray(a).dtype)


def _zeros_like(it: Interpreter, op: C.ZerosLikeOp, args: list):
    def zeros(v):
        if isinstance(v, Tree):
            return Tree({path: it.numbers.array(np.zeros(np.shape(a))) for path, a in v.items()})
        if isinstance(v, tuple):
            return tuple(zeros(e) for e in v)
        return it.numbers.array(np.zeros(np.shape(v)))
    return zeros(args[0])


def _tree(it: Interpreter, op: C.TreeOp, args: list) -> Tree:
    decl = it.decls[op.result.type.module_name]
    data: dict[str, np.ndarray] = {}
    for entry, value in zip(decl.entries, args):
        name = entry.field.data
        if isinstance(value, Tree):
            data.update({f"{name}.{path}": a for path, a in value.items()})
        else:
            data[name] = value
    return Tree(data)


def _fold_scan(it: Interpreter, op: C.FoldScanOp, args: list) -> tuple:
    tree, acc = args
    callee = it.funcs[op.callee_name]
    carries = [acc]
    for i in range(len(op.result.type.types.data) - 1):
        carries.append(it.call(callee, [tree.at(i), carries[-1]]))
    return tuple(carries)


def _fold_vjp(it: Interpreter, op: C.FoldVjpOp, args: list) -> tuple:
    tree, carries, dy = args
    callee = it.funcs[op.callee_name]
    return _reverse_fold(len(carries) - 1, lambda i, d: it.call(callee, [tree.at(i), carries[i], d]), dy)


def _fold_fwd(it: Interpreter, op: C.FoldFwdOp, args: list) -> tuple:
    tree, acc = args
    callee = it.funcs[op.callee_name]
    steps = []
    for i in range(len(op.result.type.types.data)):
        steps.append(it.call(callee, [tree.at(i), acc]))
        acc = steps[-1][0]
    return tuple(steps)


def _fold_bwd(it: Interpreter, op: C.FoldBwdOp, args: list) -> tuple:
    _, steps, dy = args
    callee = it.funcs[op.callee_name]
    return _reverse_fold(len(steps), lambda i, d: it.call(callee, [steps[i], d]), dy)


def _reverse_fold(count: int, step: Callable, dy) -> tuple:
    """Steps count-1 … 0, each giving (dθᵢ, d); the dθᵢ stacked in step order."""
    grads: list[Tree] = []
    for i in reversed(range(count)):
        d_theta, dy = step(i, dy)
        grads.append(d_theta)
    grads.reverse()
    per_step = [dict(g.items()) for g in grads]
    stacked = {path: np.stack([g[path] for g in per_step]) for path in per_step[0]}
    return Tree(stacked), dy


_REVERSE_OPS: dict[type, Callable] = {
    C.SumToOp: _sum_to, C.SpreadOp: _spread, C.ContractOp: _contract,
    C.ZerosLikeOp: _zeros_like, C.TreeOp: _tree, C.FoldScanOp: _fold_scan,
    C.FoldVjpOp: _fold_vjp, C.FoldFwdOp: _fold_fwd, C.FoldBwdOp: _fold_bwd,
}


def _function(op: Operation) -> str:
    """The element-wise function (a row of presk/ops) a Core op computes."""
    return op.FUNCTION  # type: ignore[attr-defined]


_REDUCE = {C.SumOp: "sum", C.MeanOp: "mean", C.MaxOp: "max", C.MinOp: "min",
           C.LogSumExpOp: "logsumexp"}
