"""The loop nests of convert-psk-realize-to-kernel: `NestBuilder` (one kernel body: its
arguments, loops, loads, scalar ops), the scalar form of an element-wise op (`scalar_op`,
from the table of element-wise functions), the nest of each kind of compute op
(`build_elementwise`, `build_reduce`, `build_softmax`, `build_contraction`,
`build_sum_to`, `build_spread`), and a contraction's default layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from xdsl.dialects.builtin import BFloat16Type, Float32Type, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue

from presk import ops
from presk.dialects import kernel as K, realize as R
from presk.dialects.realize.ops import _operand_places
from presk.kernel_abi.tiles import KBLOCK, panel_columns
from presk.powers import power
from presk.summation import partials_for


class KernelConversionError(Exception):
    """A Realize op the kernel stage cannot lower (yet); the message names its site."""


def _site(op: Operation) -> str:
    site = op.attributes.get("site")
    return site.data if isinstance(site, StringAttr) else "(no site)"


def _name(op: Operation) -> str | None:
    name = op.attributes.get("name")
    return name.data if isinstance(name, StringAttr) else None


def buffer_type(t: Attribute) -> K.BufferType:
    """The buffer holding a Realize tensor: same element type, sizes and axis names."""
    assert isinstance(t, R.RTensorType), t
    return K.BufferType(t.element, t.axes)


# --------------------------------------------------------------------------------------
# Building one kernel's nest
# --------------------------------------------------------------------------------------


@dataclass
class _Input:
    """A kernel input: the host buffer it reads and the type its loads widen to."""

    buffer: SSAValue
    widen_to: Attribute | None = None  # f64 for a widening read of f32/bf16, else None


class NestBuilder:
    """Builds one kernel body: its arguments (inputs, then outputs), loops, loads (one
    per buffer and index in a loop body), scalar ops."""

    def __init__(self, title: str):
        self.title = title
        self.body = Block()
        self.blocks: list[Block] = [self.body]
        self.inputs: list[SSAValue] = []  # host buffers, in argument order
        self.outputs: list[SSAValue] = []
        self._arg_of: dict[SSAValue, BlockArgument] = {}
        self._loads: dict[tuple, SSAValue] = {}

    # ---- arguments ----
    def input(self, host_buffer: SSAValue) -> BlockArgument:
        if host_buffer not in self._arg_of:
            assert not self.outputs, "inputs come before outputs"
            arg = self.body.insert_arg(host_buffer.type, len(self.body.args))
            self._arg_of[host_buffer] = arg
            self.inputs.append(host_buffer)
        return self._arg_of[host_buffer]

    def output(self, host_buffer: SSAValue) -> BlockArgument:
        arg = self.body.insert_arg(host_buffer.type, len(self.body.args))
        self.outputs.append(host_buffer)
        return arg

    # ---- ops ----
    @property
    def block(self) -> Block:
        return self.blocks[-1]

    def add(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def value(self, op: Operation) -> SSAValue:
        self.add(op)
        return op.results[0]

    def const(self, number: float, t: Attribute) -> SSAValue:
        key = ("const", id(self.block), float(number), K.type_name(t))
        if key not in self._loads:
            self._loads[key] = self.value(K.ConstantOp(number, t))
        return self._loads[key]

    def load(self, source: _Input, indices: Sequence[SSAValue], to: Attribute) -> SSAValue:
        """The element of `source` at `indices`, as a scalar of type `to` (widened by a
        cast when the buffer's compute type is narrower)."""
        arg = self.input(source.buffer)
        key = ("load", id(self.block), arg, tuple(indices), K.type_name(to))
        if key in self._loads:
            return self._loads[key]
        v = self.value(K.LoadOp(arg, list(indices)))
        if v.type != to:
            v = self.value(K.CastOp(v, to))
        self._loads[key] = v
        return v

    def store(self, value: SSAValue, out: BlockArgument, indices: Sequence[SSAValue]) -> None:
        t = out.type
        assert isinstance(t, K.BufferType)
        if value.type != t.compute:
            value = self.value(K.CastOp(value, t.compute))
        self.add(K.StoreOp(value, out, list(indices)))

    # ---- loops ----
    def open_loops(self, sizes: Sequence[int]) -> list[SSAValue]:
        """Parallel loops over `sizes`, nested; the caller closes them (`close`)."""
        indices = []
        for n in sizes:
            loop = K.ForOp(0, n)
            self.add(loop)
            self.blocks.append(loop.body.block)
            indices.append(loop.induction)
        return indices

    def close(self, count: int) -> None:
        for _ in range(count):
            self.add(K.YieldOp())
            self.blocks.pop()

    def reduce(self, sizes: Sequence[int], inits: Sequence[SSAValue],
               step: Callable[[list[SSAValue], list[SSAValue]], list[SSAValue]]
               ) -> list[SSAValue]:
        """Loops over `sizes` in order, carrying `inits`; `step(indices, carried)` gives
        the next carried values from the innermost body. Returns the final values."""
        if not sizes:
            return step([], list(inits))
        loops: list[K.ForOp] = []
        carried = list(inits)
        indices: list[SSAValue] = []
        for n in sizes:
            loop = K.ForOp(0, n, carried)
            self.add(loop)
            self.blocks.append(loop.body.block)
            loops.append(loop)
            indices.append(loop.induction)
            carried = list(loop.carried)
        values = step(indices, carried)
        for loop in reversed(loops):
            self.add(K.YieldOp(*values))
            self.blocks.pop()
            values = list(loop.res)
        return values

    def sum(self, sizes: Sequence[int], t: Attribute,
            term: Callable[[list[SSAValue]], SSAValue]) -> SSAValue:
        """Σ of `term(indices)` over `sizes` in the blocked order of presk/summation.py:
        one blocked loop per axis, from +0, the outer axis' terms the inner axes' sums."""
        def level(indices: list[SSAValue]) -> SSAValue:
            if len(indices) == len(sizes):
                return term(indices)
            n = sizes[len(indices)]
            loop = K.ForOp(0, n, [self.const(0.0, t)], partials=partials_for(n))
            self.add(loop)
            self.blocks.append(loop.body.block)
            x = level([*indices, loop.induction])
            self.add(K.YieldOp(self.value(K.AddOp(loop.carried[0], x))))
            self.blocks.pop()
            return loop.res[0]
        if not sizes:
            return self.value(K.AddOp(self.const(0.0, t), term([])))
        return level([])

    def finish(self, layout: K.LayoutAttr | None = None) -> K.KernelOp:
        types = [a.type for a in self.body.args]
        return K.KernelOp("k", types, len(self.outputs), self.title, layout, body=self.body)


# --------------------------------------------------------------------------------------
# Element-wise arithmetic: one Realize op on scalars
# --------------------------------------------------------------------------------------

# the kernel's own scalar ops by name (`psk_kernel.add`), for the table's exact rows
_SCALAR_OPS: dict[str, type[Operation]] = {op.name: op for op in K.Kernel.operations}


def scalar_op(nb: NestBuilder, op: Operation, args: list[SSAValue], t: Attribute) -> SSAValue:
    """The scalar form of an element-wise Realize op on operands `args` of type `t`: its
    table row's (presk/ops), a composite in the row's order of operations — the order the
    PSK-Core f64 interpreter follows, so that f64 kernels give its bits."""
    x = args[0]
    if isinstance(op, R.PowIOp):  # square and multiply: presk/powers.py
        return power(x, op.exponent, lambda a, b: nb.value(K.MulOp(a, b)),
                     lambda: nb.const(1.0, t))
    if isinstance(op, R.HeavisideOp):
        return nb.value(K.MathOp("heaviside", x, nb.const(op.at_zero_value, t)))
    fn = getattr(op, "FUNCTION", None)
    if fn is None:
        raise KernelConversionError(f"{_site(op)}: {op.name} has no kernel form")
    return scalar_function(nb, ops.row(fn), args, t)


def scalar_function(nb: NestBuilder, f: ops.Function, args: list[SSAValue],
                    t: Attribute) -> SSAValue:
    """Table row `f` on scalars: its own kernel op, `psk_kernel.math`, or its composite's
    ops (operands left to right, constants where first used)."""
    c = f.compute
    if isinstance(c, ops.Composite):
        walker = ops.Walker[SSAValue](
            const=lambda k: nb.const(k.value, t),
            apply=lambda fn, a: scalar_function(nb, ops.row(fn), a, t))
        return walker.walk(c.expr, {"x": args[0]})
    if isinstance(c, ops.Exact) and c.kernel is not None:
        return nb.value(_SCALAR_OPS[f"psk_kernel.{c.kernel}"](*args))
    return nb.value(K.MathOp(f.name, *args))


def _operand_maps(op: Operation, rank: int) -> list[list[int]]:
    """Where each operand's axes land on the result's."""
    if isinstance(op, R.BinaryOp):
        lhs, rhs = op.maps
        return [lhs, rhs]
    return [list(range(rank))]


# --------------------------------------------------------------------------------------
# Kernel bodies for each kind of op
# --------------------------------------------------------------------------------------


def _title(op: Operation) -> str:
    kind = op.name.split(".", 1)[1]
    if isinstance(op, R.PowIOp):
        return f"pow {op.exponent}"
    if isinstance(op, (R.ReduceOp, R.SoftmaxOp)):
        k = op.axis_index
        if k is None:
            return kind
        name = op.axis_name.data if op.axis_name is not None else str(k)
        return f"{kind} axis {name}"
    return kind


def build_elementwise(nb: NestBuilder, steps: list[Operation], yielded: SSAValue,
                      inputs: dict[SSAValue, _Input], out: SSAValue, result: R.RTensorType,
                      ) -> None:
    """Element-wise ops `steps` (a group's, or one op) over `result`'s shape: loads of
    `inputs` (by Realize value), scalars for the steps, one store of `yielded`."""
    out_arg = nb.output(out)
    indices = nb.open_loops(result.sizes)
    elementwise_steps(nb, steps, yielded, inputs, {}, out_arg, indices)
    nb.close(len(indices))


def elementwise_steps(nb: NestBuilder, steps: list[Operation], yielded: SSAValue,
                      inputs: dict[SSAValue, _Input], scalars: dict[SSAValue, SSAValue],
                      out_arg: BlockArgument, indices: list[SSAValue]) -> None:
    """Inside the loops over the result's `indices`: the steps' scalars (operands from
    `scalars`, values already computed — a contraction's sum for its epilogue —, or loads
    of `inputs`), then the store of `yielded`."""
    for op in steps:
        t = K.compute_type(R._ttype(op.results[0]).element)
        if isinstance(op, R.ConvertOp):
            src = op.operand
            if isinstance(op.result.type.element, BFloat16Type):
                if op.result is not yielded:
                    raise KernelConversionError(
                        f"{_site(op)}: a bf16 value inside a group is read again; only the "
                        "group's result may be bf16")
                scalars[op.result] = _scalar(nb, src, indices, list(range(len(indices))),
                                             scalars, inputs, Float32Type())
                continue
            x = _scalar(nb, src, indices, list(range(len(indices))), scalars, inputs, None)
            scalars[op.result] = x if x.type == t else nb.value(K.CastOp(x, t))
            continue
        maps = _operand_maps(op, len(indices))
        args = [_scalar(nb, o, indices, m, scalars, inputs, t)
                for o, m in zip(_elementwise_operands(op), maps)]
        scalars[op.results[0]] = scalar_op(nb, op, args, t)
    nb.store(scalars[yielded], out_arg, indices)


def _elementwise_operands(op: Operation) -> list[SSAValue]:
    if isinstance(op, R.SpreadOp):
        return [op.operand]
    return list(op.operands)


def _scalar(nb: NestBuilder, value: SSAValue, indices: list[SSAValue], places: list[int],
            scalars: dict[SSAValue, SSAValue], inputs: dict[SSAValue, _Input],
            t: Attribute | None) -> SSAValue:
    """A step's operand: an earlier step's scalar, or a load of an input at the indices
    its map places it on (cast to `t` when given)."""
    if value in scalars:
        return scalars[value]
    source = inputs[value]
    to = t if t is not None else (
        source.widen_to or K.compute_type(value.type.element))  # type: ignore[attr-defined]
    return nb.load(source, [indices[p] for p in places], to)


def _row_loops(nb: NestBuilder, sizes: tuple[int, ...], kept: list[int]):
    """Open the loops over the `kept` axes (in order); return their indices, the other
    (reduced) axes, and a function placing the reduced axes' indices among them."""
    reduced = [i for i in range(len(sizes)) if i not in kept]
    kept_idx = nb.open_loops([sizes[i] for i in kept])

    def at(red_idx: list[SSAValue]) -> list[SSAValue]:
        where = dict(zip(kept, kept_idx)) | dict(zip(reduced, red_idx))
        return [where[i] for i in range(len(sizes))]
    return kept_idx, reduced, at


def _row_nest(nb: NestBuilder, op: Operation, source: _Input, out: SSAValue, kept: list[int]):
    """The start of a nest over the rows of `op`'s operand: its input and output, then
    the loops over the `kept` axes (`_row_loops`). Returns the compute type, the output
    argument, and what `_row_loops` returns."""
    nb.input(source.buffer)
    t = K.compute_type(op.results[0].type.element)  # type: ignore[attr-defined]
    out_arg = nb.output(out)
    return (t, out_arg, *_row_loops(nb, op.operand.type.sizes, kept))  # type: ignore


def build_reduce(nb: NestBuilder, op: R.ReduceOp, source: _Input, out: SSAValue) -> None:
    k = op.axis_index
    sizes = op.operand.type.sizes
    t, out_arg, kept_idx, reduced, at = _row_nest(
        nb, op, source, out, [i for i in range(len(sizes)) if k is not None and i != k])
    result = reduce_rows(nb, op, reduced, t, lambda idx: nb.load(source, at(idx), t))
    nb.store(result, out_arg, kept_idx)
    nb.close(len(kept_idx))


def reduce_rows(nb: NestBuilder, op: R.ReduceOp, reduced: list[int], t: Attribute,
                term: Callable[[list[SSAValue]], SSAValue]) -> SSAValue:
    """`op` over its operand's `reduced` axes, inside the loops over the kept ones:
    `term(indices)` the operand's element at the reduced axes' indices (a load, or the
    fused steps computing it). A sum or mean in the blocked order, max and min in order."""
    sizes = op.operand.type.sizes
    count = 1
    for i in reduced:
        count *= sizes[i]
    red_sizes = [sizes[i] for i in reduced]

    def fold(kind: type, init: float) -> SSAValue:
        return nb.reduce(red_sizes, [nb.const(init, t)],
                         lambda idx, acc: [nb.value(kind(acc[0], term(idx)))])[0]

    if isinstance(op, (R.SumOp, R.MeanOp)):
        total = nb.sum(red_sizes, t, term)
        return nb.value(K.DivOp(total, nb.const(float(count), t))) \
            if isinstance(op, R.MeanOp) else total
    if isinstance(op, R.MaxOp):
        return fold(K.MaxOp, float("-inf"))
    if isinstance(op, R.MinOp):
        return fold(K.MinOp, float("inf"))
    if isinstance(op, R.LogSumExpOp):
        top = fold(K.MaxOp, float("-inf"))

        def shifted_exp(idx: list[SSAValue]) -> SSAValue:
            return nb.value(K.MathOp("exp", nb.value(K.SubOp(term(idx), top))))

        total = nb.sum(red_sizes, t, shifted_exp)
        return nb.value(K.AddOp(top, nb.value(K.MathOp("log", total))))
    raise KernelConversionError(f"{_site(op)}: {op.name} has no kernel form")


def build_reduce_group(nb: NestBuilder, group: R.ReduceGroupOp,
                       inputs: dict[SSAValue, _Input], out: SSAValue) -> None:
    """A reduce_group (psk-fuse-reduce): loops over the kept axes; in them, in block order,
    each reduction (its terms the F steps it reads, computed in its loop body) and each K
    step as a scalar of the row; when the group yields an F value, a loop over the
    reduced axes computing it from the row's scalars and storing it. Every step is the
    scalar op the unfused kernel runs, in its type: the same bits."""
    sizes = group.full.sizes
    out_arg = nb.output(out)
    kept_idx, reduced, at = _row_loops(nb, sizes, group.kept)
    rows = _Rows(nb, inputs)
    for op in group.steps:
        t = K.compute_type(R._ttype(op.results[0]).element)
        if isinstance(op, R.ReduceOp):
            rows.row[op.result] = reduce_rows(
                nb, op, reduced, t, lambda idx, op=op, t=t: rows.at(op.operand, at(idx), t))
        elif R._ttype(op.results[0]).sizes != sizes:  # a K step: once per row
            args = [rows.row[v] if v in rows.row else
                    nb.load(inputs[v], [kept_idx[p] for p in places], t)
                    for v, places in _operand_places(op)]
            rows.row[op.results[0]] = scalar_op(nb, op, args, t)
        # an F step is computed where it is read
    yielded = group.root.results[0]
    if yielded in rows.row:
        nb.store(rows.row[yielded], out_arg, kept_idx)
    else:
        red_idx = nb.open_loops([sizes[i] for i in reduced])
        t = K.compute_type(R._ttype(yielded).element)
        nb.store(rows.at(yielded, at(red_idx), t), out_arg, at(red_idx))
        nb.close(len(red_idx))
    nb.close(len(kept_idx))


class _Rows:
    """The values of a reduce_group inside its row loops: `row`, the K values of this row
    as scalars; `at`, an F value at F's indices."""

    def __init__(self, nb: NestBuilder, inputs: dict[SSAValue, _Input]):
        self.nb = nb
        self.inputs = inputs
        self.row: dict[SSAValue, SSAValue] = {}
        self._made: dict[tuple, SSAValue] = {}  # (loop body, value, indices) → scalar

    def at(self, value: SSAValue, indices: list[SSAValue], t: Attribute) -> SSAValue:
        """An F value at `indices`: a load of an input (as type `t`, its reader's), or its
        step on its operands (row scalars, loads, F values), once per loop body."""
        nb = self.nb
        if value in self.inputs:
            return nb.load(self.inputs[value], indices, t)
        key = (id(nb.block), value, tuple(indices))
        if key not in self._made:
            op = value.owner
            assert isinstance(op, Operation)
            t = K.compute_type(R._ttype(value).element)
            args = [self.row[v] if v in self.row else
                    self.at(v, [indices[p] for p in places], t)
                    for v, places in _operand_places(op)]
            self._made[key] = scalar_op(nb, op, args, t)
        return self._made[key]


def build_softmax(nb: NestBuilder, op: R.SoftmaxOp, source: _Input, out: SSAValue) -> None:
    """Per row: its max, the sum of exp(x − max), then each exp(x − max) / sum."""
    sizes = op.operand.type.sizes
    k = op.axis_index
    t, out_arg, kept_idx, _, row_at = _row_nest(nb, op, source, out,
                                                [i for i in range(len(sizes)) if i != k])

    def at(j: SSAValue) -> list[SSAValue]:
        return row_at([j])

    top = nb.reduce([sizes[k]], [nb.const(float("-inf"), t)], lambda idx, acc: [
        nb.value(K.MaxOp(acc[0], nb.load(source, at(idx[0]), t)))])[0]

    def shifted(j: SSAValue) -> SSAValue:
        return nb.value(K.MathOp("exp", nb.value(K.SubOp(nb.load(source, at(j), t), top))))

    total = nb.sum([sizes[k]], t, lambda idx: shifted(idx[0]))
    (j,) = nb.open_loops([sizes[k]])
    nb.store(nb.value(K.DivOp(shifted(j), total)), out_arg, at(j))
    nb.close(1)
    nb.close(len(kept_idx))


Epilogue = tuple[list[Operation], SSAValue, dict[SSAValue, "_Input"], SSAValue]
"""A contraction's epilogue: the steps, the value stored, their inputs, the product's
value in them."""


def build_contraction(nb: NestBuilder, lhs: _Input, rhs: _Input, lhs_type: R.RTensorType,
                      rhs_type: R.RTensorType, lhs_axes: list[int], rhs_axes: list[int],
                      perm: list[int] | None, t: Attribute, out: SSAValue,
                      epilogue: Epilogue | None = None, fused: bool = False) -> None:
    """Σ over the paired axes, in order, k ascending: acc = acc + a·b from 0 (`fused`:
    acc = fma(a, b, acc), one rounding a step — the realization's choice for the site).
    With an epilogue (its reader's element-wise steps, the value they yield, their inputs
    by Realize value, and the value that stands for the product in them), the steps run
    on each finished sum before the store: `dot+add` (a bias), `dot+add+gelu`, ….
    """
    nb.input(lhs.buffer)
    nb.input(rhs.buffer)
    if epilogue is not None:
        for v in epilogue[2].values():
            nb.input(v.buffer)
    out_arg = nb.output(out)
    a_rest = [i for i in range(lhs_type.rank) if i not in lhs_axes]
    b_rest = [j for j in range(rhs_type.rank) if j not in rhs_axes]
    natural = [("a", i) for i in a_rest] + [("b", j) for j in b_rest]
    order = [natural[p] for p in perm] if perm is not None else natural
    sizes = [lhs_type.sizes[i] if s == "a" else rhs_type.sizes[i] for s, i in order]
    res_idx = nb.open_loops(sizes)
    where = {key: idx for key, idx in zip(order, res_idx)}
    red_sizes = [lhs_type.sizes[i] for i in lhs_axes]

    def step(idx: list[SSAValue], acc: list[SSAValue]) -> list[SSAValue]:
        a_at = {i: where[("a", i)] for i in a_rest} | dict(zip(lhs_axes, idx))
        b_at = {j: where[("b", j)] for j in b_rest} | dict(zip(rhs_axes, idx))
        a = nb.load(lhs, [a_at[i] for i in range(lhs_type.rank)], t)
        b = nb.load(rhs, [b_at[j] for j in range(rhs_type.rank)], t)
        if fused:
            return [nb.value(K.FmaOp(a, b, acc[0]))]
        return [nb.value(K.AddOp(acc[0], nb.value(K.MulOp(a, b))))]

    total = nb.reduce(red_sizes, [nb.const(0.0, t)], step)[0]
    if epilogue is None:
        nb.store(total, out_arg, res_idx)
    else:  # the reader's steps on the finished sum, as its own kernel computes them
        steps, yielded, inputs, product = epilogue
        elementwise_steps(nb, steps, yielded, inputs, {product: total}, out_arg, res_idx)
    nb.close(len(res_idx))


def build_sum_to(nb: NestBuilder, op: R.SumToOp, source: _Input, out: SSAValue) -> None:
    sizes = op.operand.type.sizes
    t, out_arg, kept_idx, other, at = _row_nest(nb, op, source, out, op.kept)

    total = nb.sum([sizes[i] for i in other], t, lambda idx: nb.load(source, at(idx), t))
    nb.store(total, out_arg, kept_idx)
    nb.close(len(kept_idx))


def build_spread(nb: NestBuilder, op: Operation, source: _Input, places: list[int],
                 result: R.RTensorType, out: SSAValue, divide_by: int | None) -> None:
    nb.input(source.buffer)
    t = K.compute_type(result.element)
    out_arg = nb.output(out)
    idx = nb.open_loops(result.sizes)
    x = nb.load(source, [idx[p] for p in places], t)
    if divide_by is not None:
        x = nb.value(K.DivOp(x, nb.const(float(divide_by), t)))
    nb.store(x, out_arg, idx)
    nb.close(len(idx))


VECTOR_BYTES, VECTOR_REGISTERS = 64, 32
"""The vector unit a contraction's default tile is planned for when /proc/cpuinfo does
not say (AVX-512's; LLVM splits a wider vector into the machine's registers)."""


def vector_unit() -> tuple[int, int]:
    """(registers, bytes each) of this machine's vector unit (analysis/profile.py
    `host_vector_unit`), else (VECTOR_REGISTERS, VECTOR_BYTES)."""
    return _vector_unit()


@lru_cache(maxsize=1)
def _vector_unit() -> tuple[int, int]:
    from presk.analysis.profile import host_vector_unit
    return host_vector_unit() or (VECTOR_REGISTERS, VECTOR_BYTES)

KBLOCK_L2 = 1 << 20
"""The L2 a core (bytes) from which an xᵀ·g's default layout sweeps a long k in blocks
(`_both_last`). The scaled Tower's xᵀ·g (K = 1024, 2 workers) a launch, [4, 16] or
[8, 16] with panels, k whole against k in blocks of 256: on Zen 4 (1 MiB L2) 0.63 →
0.54 ms in f32 and 1.85 → 1.53 in f64 with the blocks; on Zen 3 (512 KiB) 0.87 → 1.30
ms and 2.42 → 2.59 with them (bench/contractions.py's points). The block's working set
(the j operand's 256 rows read in place, the i operand's panels, the tiles) is the same
share of L2 in Zen 4's f64 as in Zen 3's f32, so its size alone does not tell them
apart: this is the measured boundary, not a model; a plan made with the machine's
profile (`presk plan`) chooses by the cost model instead."""


@lru_cache(maxsize=1)
def blocks_k() -> bool:
    """Whether this machine's L2 is KBLOCK_L2 or more (a machine whose caches sysfs does
    not give: as the larger)."""
    from presk.analysis.profile import ProfileError, read_machine
    try:
        return read_machine().l2 >= KBLOCK_L2
    except (ProfileError, OSError):
        return True


SPLIT_WORK = 1 << 21
"""Multiply-adds from which a contraction's rows are split among the machine's cores: a
split launch on the worker pool costs a few µs, a small fraction of such a kernel's time."""


PANEL_TILES = 4
"""Rows of tiles from which a contraction's default layout packs its operands into panels
(`pack = "panels"`, for tiles of 16 columns or more): the copy's K·J elements are then at
most 1/(4R) of the multiply-adds; on the scaled Tower's products it made g·wᵀ 1.1× and
xᵀ·g 1.2× faster in f32 (bench/contractions.py), the forward no slower."""


def workers() -> int:
    """The threads a split kernel runs on: `PRESK_THREADS` (a whole number ≥ 1; `presk
    export --target c --threads N` sets it), else this machine's cores, at most 8."""
    import os
    env = os.environ.get("PRESK_THREADS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env)
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


NEST_SPLIT_WORK = 1 << 15
"""Innermost iterations from which a nest that is not a contraction (element-wise, a
reduction over independent outputs, a backward's sum-to) has its outermost loop split
among the machine's cores: a split launch on the worker pool costs under 1 µs, and at
2¹⁵ iterations even the cheapest nest (a copy or a scale, ~0.1 ns an element in f32)
runs for several µs; on the scaled Tower at B = 1024 (2¹⁸ elements a nest) RMSNorm's and
gelu's nests then take about half their time on 2 cores."""


def iterations(ops) -> int:
    """The innermost iterations a nest's loops run: the sum over sibling loops of the
    product of their trips down to the innermost."""
    total = 0
    for op in ops:
        if isinstance(op, K.ForOp):
            total += op.trip * max(1, iterations(op.body.block.ops))
    return total


def default_nest_layout(kernel: K.KernelOp) -> K.LayoutAttr:
    """A nest's default layout when it is not a contraction: as written, its outermost
    loop split among `workers()` when psk-kernel-split can honour it (one loop carrying
    nothing, at least two iterations a worker) and its work reaches NEST_SPLIT_WORK. A
    split never changes bits: every output element is computed whole by one part."""
    layout = kernel.layout
    loops = [op for op in kernel.body.block.ops if isinstance(op, K.ForOp)]
    n = workers()
    if (n < 2 or not layout.is_default or layout.split.data or len(loops) != 1
            or loops[0].inits or loops[0].trip < 2 * n
            or iterations(loops) < NEST_SPLIT_WORK):
        return layout
    return layout.with_split((0, n))


def default_layout(op: Operation, lhs: R.RTensorType, rhs: R.RTensorType,
                   lhs_axes: list[int], rhs_axes: list[int],
                   fused: bool = False) -> K.LayoutAttr:
    """A contraction's default layout: a register tile of the J side in vector lanes of
    this machine (`vector_unit`) — `row_vectors` vectors when J holds them, else one, else
    up to 4 lanes — by as many rows (I) as `tile_rows` gives; tiles visited I-major, the
    operands packed into panels when a tile row spans a cache line (`panel_columns`: 16
    f32 or 8 f64 columns) and the product
    PANEL_TILES rows of tiles, and an xᵀ·g's long k swept in blocks (`_both_last`) on a
    machine of a large L2 (`blocks_k`).
    `fused`: the realization fuses the product's multiply-adds. AVX-512 (32 × 64 bytes):
    fused [12, 32] f32, [12, 16] f64, xᵀ·g [8, 32] and [8, 16]; a multiply and an add
    [12, 16] f32, [12, 8] f64, xᵀ·g [8, 16] and [8, 8]. AVX2 (16 × 32 bytes, znver2
    here): [4, 16] f32, [4, 8] f64 — [8, 16]'s 16 accumulators spill there, and xᵀ·g ran
    15 GFLOP/s at [8, 16] with panels against 55 at [4, 16]."""
    i_size = 1
    for a in range(lhs.rank):
        if a not in lhs_axes:
            i_size *= lhs.sizes[a]
    j_size = 1
    for b in range(rhs.rank):
        if b not in rhs_axes:
            j_size *= rhs.sizes[b]
    element = op.results[0].type.element  # type: ignore[attr-defined]
    registers, vector_bytes = vector_unit()
    lanes = vector_bytes // K.element_bytes(K.compute_type(element))
    vectors = row_vectors(registers, fused) if j_size >= 2 * lanes else 1
    rows = min(tile_rows(registers, vectors, _both_last(lhs, rhs, lhs_axes, rhs_axes)),
               max(i_size, 1))
    if vectors == 2:
        tile, lanes = [rows, 2 * lanes], lanes
    elif j_size >= lanes:
        tile = [rows, lanes]
    else:
        tile = [rows, min(4, max(j_size, 1))]
        lanes = tile[1]
    k_size = 1
    for a in lhs_axes:
        k_size *= lhs.sizes[a]
    n = workers()
    pack = "panels" if tile[1] >= panel_columns(element) and \
        i_size >= PANEL_TILES * rows else ""
    kblock = KBLOCK if pack and k_size >= 2 * KBLOCK and blocks_k() and \
        _both_last(lhs, rhs, lhs_axes, rhs_axes) else 0
    split = (0, n) if n > 1 and i_size * j_size * k_size >= SPLIT_WORK and \
        i_size >= 2 * rows else ()
    return K.LayoutAttr.tiled(tile, lanes, "IJ", split=split, pack=pack, kblock=kblock)


def row_vectors(registers: int, fused: bool) -> int:
    """The vectors a row of a contraction's default tile holds when J holds two: two,
    but one for a multiply and an add (not fused) on a machine of 32 vector registers.
    There a row's broadcast of x[i, k] then feeds one multiply, which takes it as its
    memory operand (`vmulps m32{1to16}`); with two vectors a row LLVM loads it once into
    a register (`vbroadcastss`), and on Zen 4 (LLVM's `znver4`, AVX-512 on 256-bit
    halves) that broadcast takes a floating-point pipe, where a tile of multiplies (FP0,
    FP1) and adds (FP2, FP3) has none free. Measured there (bench/contractions.py, the
    scaled Tower at B = 1024, 2 workers, f32 unfused): x·w + b, g·wᵀ, xᵀ·g at 160, 152,
    156 GFLOP/s with two vectors a row (any of 4–12 rows), 230, 220, 222 with one: the
    fused products' rate (232, 218, 221, which no tile shape changes); f64 77, 77, 72
    against 102, 104, 82. On the Xeon of earlier sessions unfused products ran at half
    the fused rate (a multiply and an add share its one 512-bit FMA unit); one vector a
    row was not measured there."""
    return 1 if registers >= 32 and not fused else 2


def tile_rows(registers: int, vectors: int, both_last: bool) -> int:
    """The rows of a contraction's default register tile whose rows take `vectors` vector
    registers each. The accumulators (rows × vectors) take at most half the registers —
    the rest hold the loaded row and the broadcasts (more spills them, a load and a store
    a k step) — and at most 8 rows; with 32 registers or more and two vectors a row, 12
    rows (24 accumulators, 8 registers left): the tile loads 14 values a k step for 24
    multiply-adds where [8, 32] loads 10 for 16. On the Xeon (AVX-512, bench/
    contractions.py, 2 workers) the scaled Tower's x·w + b ran 4–7 % faster at [12, 32]
    than at [8, 32] and g·wᵀ 6 % (fused), level unfused; in f64 fused [12, 16] against
    [8, 16] 7 % and 5 %, level unfused; its xᵀ·g (`both_last`, k in blocks, its i
    operand in panels of R rows) ran 7 % slower, and keeps 8. One vector a row
    (`row_vectors`) takes 12 rows too: on Zen 4 unfused [12, 16] against [8, 16] x·w + b
    3 %, g·wᵀ 6 % faster."""
    if registers >= 32 and not both_last:
        return 12
    return min(8, max(registers // 2 // vectors, 1))


def _both_last(lhs: R.RTensorType, rhs: R.RTensorType, lhs_axes: list[int],
               rhs_axes: list[int]) -> bool:
    """Whether i is the last axis of one operand and j of the other (xᵀ·g): the
    default layout then sweeps a long k in blocks (KBLOCK), its j operand read in place
    (kernel_abi/tiles.py `panel_loads`) — the scaled Tower's xᵀ·g (K = 1024, 2 parts)
    0.63 → 0.54 ms a launch in f32, 1.85 → 1.53 in f64."""
    return lhs.rank - 1 not in lhs_axes and rhs.rank - 1 not in rhs_axes
