"""convert-psk-realize-to-kernel: PSK-Realize instances → PSK-Kernel loop nests and hosts.

Each `psk_realize.func` becomes a `psk_kernel.host` of the same name over buffers: its
arguments, then one output buffer per result (destination-passing). In its body:

* every compute op, and every fusion group, becomes ONE launch of a kernel: an
  element-wise op (its operands placed by `lhs_map`/`rhs_map`), a group (its steps inlined
  into one nest, its intermediates scalars), a reduction over one axis or all (parallel
  loops over the kept axes, the reduced ones in order carrying the accumulator), softmax,
  logsumexp, a contraction (`dot`, `contract`: k ascending, a product then a sum, no FMA),
  `sum_to`, `spread`, `broadcast`;
* a `dot` whose value only one `add` reads is launched with that add as its epilogue: one
  "dot+add" kernel (the add's other operand loaded after the sum);
* a widening `convert` (bf16→f32, bf16→f64, f32→f64) read by kernels only is folded into
  the kernels' loads: a bf16 parameter read by an f32 kernel stays bf16 (the kernel loads
  bf16 and widens exactly); any other convert is a host `convert` into an arena buffer,
  made where it is first read;
* `constant` → an arena buffer and a `fill`; `slice` → `at` (a view); `stack` → its
  items written into `at %s[l]` views of its buffer (the op making an item that nothing
  else reads writes there directly, any other item is copied); `call` → `call`;
  `fold {from, to}` → a host `fold` loop over two scratch buffers; `return` → the value's
  producer writes the output buffer directly (else a `copy`).

A host that allocates brackets its body with `mark`/`release`. Kernels are shared: two
nests with the same body, buffer element types and sizes (axis names aside) and layout are
one kernel, launched by every site that computes it. Kernels are named k0, k1, … in the
order of their first launch in one call of the entry; a contraction's kernel gets the
default register-tiled layout, every other the default layout.

`realize_to_kernel(module) -> ModuleOp` builds the new module; the pass replaces the
module's contents with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float32Type,
    Float64Type,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from presk import ops
from presk.dialects import kernel as K
from presk.dialects import realize as R
from presk.powers import power
from presk.dialects.common import replace_module_body


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


def _compute(element: Attribute) -> Attribute:
    return Float32Type() if isinstance(element, BFloat16Type) else element


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
    scalars: dict[SSAValue, SSAValue] = {}
    pending_bf16: set[SSAValue] = set()
    for op in steps:
        t = _compute(R._ttype(op.results[0]).element)
        if isinstance(op, R.ConvertOp):
            src = op.operand
            if isinstance(op.result.type.element, BFloat16Type):
                if op.result is not yielded:
                    raise KernelConversionError(
                        f"{_site(op)}: a bf16 value inside a group is read again; only the "
                        "group's result may be bf16")
                scalars[op.result] = _scalar(nb, src, indices, list(range(len(indices))),
                                             scalars, inputs, Float32Type())
                pending_bf16.add(op.result)
                continue
            x = _scalar(nb, src, indices, list(range(len(indices))), scalars, inputs, None)
            scalars[op.result] = x if x.type == t else nb.value(K.CastOp(x, t))
            continue
        maps = _operand_maps(op, len(indices))
        args = [_scalar(nb, o, indices, m, scalars, inputs, t)
                for o, m in zip(_elementwise_operands(op), maps)]
        scalars[op.results[0]] = scalar_op(nb, op, args, t)
    nb.store(scalars[yielded], out_arg, indices)
    nb.close(len(indices))


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
        source.widen_to or _compute(value.type.element))  # type: ignore[attr-defined]
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


def build_reduce(nb: NestBuilder, op: R.ReduceOp, source: _Input, out: SSAValue) -> None:
    nb.input(source.buffer)
    operand = op.operand.type
    t = _compute(op.result.type.element)
    out_arg = nb.output(out)
    k = op.axis_index
    sizes = operand.sizes
    kept_idx, reduced, at = _row_loops(nb, sizes, [i for i in range(len(sizes))
                                                   if k is not None and i != k])
    count = 1
    for i in reduced:
        count *= sizes[i]
    red_sizes = [sizes[i] for i in reduced]

    def fold(kind: type, init: float) -> SSAValue:
        return nb.reduce(red_sizes, [nb.const(init, t)],
                         lambda idx, acc: [nb.value(kind(acc[0], nb.load(source, at(idx), t)))])[0]

    if isinstance(op, (R.SumOp, R.MeanOp)):
        total = fold(K.AddOp, 0.0)
        result = nb.value(K.DivOp(total, nb.const(float(count), t))) \
            if isinstance(op, R.MeanOp) else total
    elif isinstance(op, R.MaxOp):
        result = fold(K.MaxOp, float("-inf"))
    elif isinstance(op, R.MinOp):
        result = fold(K.MinOp, float("inf"))
    elif isinstance(op, R.LogSumExpOp):
        top = fold(K.MaxOp, float("-inf"))
        def step(idx: list[SSAValue], acc: list[SSAValue]) -> list[SSAValue]:
            shifted = nb.value(K.SubOp(nb.load(source, at(idx), t), top))
            return [nb.value(K.AddOp(acc[0], nb.value(K.MathOp("exp", shifted))))]

        total = nb.reduce(red_sizes, [nb.const(0.0, t)], step)[0]
        result = nb.value(K.AddOp(top, nb.value(K.MathOp("log", total))))
    else:
        raise KernelConversionError(f"{_site(op)}: {op.name} has no kernel form")
    nb.store(result, out_arg, kept_idx)
    nb.close(len(kept_idx))


def build_softmax(nb: NestBuilder, op: R.SoftmaxOp, source: _Input, out: SSAValue) -> None:
    """Per row: its max, the sum of exp(x − max), then each exp(x − max) / sum."""
    nb.input(source.buffer)
    sizes = op.operand.type.sizes
    t = _compute(op.result.type.element)
    out_arg = nb.output(out)
    k = op.axis_index
    kept_idx, _, row_at = _row_loops(nb, sizes, [i for i in range(len(sizes)) if i != k])

    def at(j: SSAValue) -> list[SSAValue]:
        return row_at([j])

    top = nb.reduce([sizes[k]], [nb.const(float("-inf"), t)], lambda idx, acc: [
        nb.value(K.MaxOp(acc[0], nb.load(source, at(idx[0]), t)))])[0]

    def shifted(j: SSAValue) -> SSAValue:
        return nb.value(K.MathOp("exp", nb.value(K.SubOp(nb.load(source, at(j), t), top))))

    total = nb.reduce([sizes[k]], [nb.const(0.0, t)], lambda idx, acc: [
        nb.value(K.AddOp(acc[0], shifted(idx[0])))])[0]
    (j,) = nb.open_loops([sizes[k]])
    nb.store(nb.value(K.DivOp(shifted(j), total)), out_arg, at(j))
    nb.close(1)
    nb.close(len(kept_idx))


def build_contraction(nb: NestBuilder, lhs: _Input, rhs: _Input, lhs_type: R.RTensorType,
                      rhs_type: R.RTensorType, lhs_axes: list[int], rhs_axes: list[int],
                      perm: list[int] | None, t: Attribute, out: SSAValue,
                      epilogue: tuple[Operation, _Input, list[int], bool] | None = None
                      ) -> None:
    """Σ over the paired axes, in order, k ascending: acc = acc + a·b from 0. With an
    epilogue (an add, its other operand, that operand's map, whether the sum is its lhs),
    the add is applied to the sum before the store."""
    nb.input(lhs.buffer)
    nb.input(rhs.buffer)
    if epilogue is not None:
        nb.input(epilogue[1].buffer)
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
        return [nb.value(K.AddOp(acc[0], nb.value(K.MulOp(a, b))))]

    total = nb.reduce(red_sizes, [nb.const(0.0, t)], step)[0]
    if epilogue is not None:
        add, other, places, sum_is_lhs = epilogue
        y = nb.load(other, [res_idx[p] for p in places], t)
        total = nb.value(K.AddOp(total, y) if sum_is_lhs else K.AddOp(y, total))
    nb.store(total, out_arg, res_idx)
    nb.close(len(res_idx))


def build_sum_to(nb: NestBuilder, op: R.SumToOp, source: _Input, out: SSAValue) -> None:
    nb.input(source.buffer)
    sizes = op.operand.type.sizes
    t = _compute(op.result.type.element)
    out_arg = nb.output(out)
    kept_idx, other, at = _row_loops(nb, sizes, op.kept)

    def step(idx: list[SSAValue], acc: list[SSAValue]) -> list[SSAValue]:
        return [nb.value(K.AddOp(acc[0], nb.load(source, at(idx), t)))]

    total = nb.reduce([sizes[i] for i in other], [nb.const(0.0, t)], step)[0]
    nb.store(total, out_arg, kept_idx)
    nb.close(len(kept_idx))


def build_spread(nb: NestBuilder, op: Operation, source: _Input, places: list[int],
                 result: R.RTensorType, out: SSAValue, divide_by: int | None) -> None:
    nb.input(source.buffer)
    t = _compute(result.element)
    out_arg = nb.output(out)
    idx = nb.open_loops(result.sizes)
    x = nb.load(source, [idx[p] for p in places], t)
    if divide_by is not None:
        x = nb.value(K.DivOp(x, nb.const(float(divide_by), t)))
    nb.store(x, out_arg, idx)
    nb.close(len(idx))


VECTOR_BYTES = 64
"""The vector register a contraction's tile is planned for (AVX-512; LLVM splits a wider
vector into the machine's registers)."""

SPLIT_WORK = 1 << 21
"""Multiply-adds from which a contraction's rows are split among the machine's cores:
starting and joining a thread costs some 20 µs, a fraction of such a kernel's time."""


def workers() -> int:
    """The threads a split kernel runs on: this machine's cores, at most 8."""
    import os
    return max(1, min(8, os.cpu_count() or 1))


def default_layout(op: Operation, lhs: R.RTensorType, rhs: R.RTensorType,
                   lhs_axes: list[int], rhs_axes: list[int]) -> K.LayoutAttr:
    """A contraction's default layout: a register tile of up to 4 rows (I) × the J side in
    vector lanes — two vectors of 64 bytes when J holds them (32 f32, 16 f64), else up to
    4 — tiles visited I-major."""
    i_size = 1
    for a in range(lhs.rank):
        if a not in lhs_axes:
            i_size *= lhs.sizes[a]
    j_size = 1
    for b in range(rhs.rank):
        if b not in rhs_axes:
            j_size *= rhs.sizes[b]
    element = op.results[0].type.element  # type: ignore[attr-defined]
    lanes = VECTOR_BYTES // (8 if isinstance(element, Float64Type) else 4)
    rows = min(4, max(i_size, 1))
    if j_size >= 2 * lanes:
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
    if n > 1 and i_size * j_size * k_size >= SPLIT_WORK and i_size >= 2 * rows:
        return K.LayoutAttr.tiled(tile, lanes, "IJ", split=(0, n))
    return K.LayoutAttr.tiled(tile, lanes, "IJ")


# --------------------------------------------------------------------------------------
# Structure keys: which kernels are the same
# --------------------------------------------------------------------------------------


def structure_key(kernel: K.KernelOp) -> tuple:
    """What makes two kernels one: the body's ops, their attributes and types, the
    arguments' element types and sizes, the outputs and the layout (not the title, not
    the axis names)."""
    ids: dict[SSAValue, str] = {}
    for i, a in enumerate(kernel.args):
        ids[a] = f"a{i}"
    parts: list = [tuple((K.type_name(a.type.element), a.type.shape) for a in kernel.args),
                   kernel.output_count, str(kernel.layout)]
    for op in kernel.body.walk():
        for region in op.regions:
            for block in region.blocks:
                for arg in block.args:
                    ids.setdefault(arg, f"b{len(ids)}")
        for r in op.results:
            ids[r] = f"v{len(ids)}"
        attrs = tuple(sorted((k, str(v)) for k, v in op.attributes.items()))
        parts.append((op.name, tuple(ids.get(o, "?") for o in op.operands), attrs,
                      tuple(str(r.type) for r in op.results)))
    return tuple(parts)


# --------------------------------------------------------------------------------------
# One instance → one host
# --------------------------------------------------------------------------------------


@dataclass
class _Pending:
    """A widening convert not (yet) materialized: kernels read its source."""

    source: SSAValue  # the Realize value converted
    op: R.ConvertOp


class _HostConversion:
    def __init__(self, conv: "RealizeToKernel", func: R.FuncOp, host: K.HostOp):
        self.conv = conv
        self.func = func
        self.host = host
        self.block = host.body.block
        self.values: dict[SSAValue, SSAValue] = dict(zip(func.args, host.input_args))
        self.pending: dict[SSAValue, _Pending] = {}
        self.lazy: dict[SSAValue, R.ConvertOp] = {}  # narrowing converts, made when read
        self.allocates = False
        self.dest: dict[SSAValue, SSAValue] = {}  # Realize value → the output it fills
        self.epilogues: dict[Operation, R.DotOp] = {}  # add → the dot it finishes
        self.skip: set[Operation] = set()
        self.into: dict[SSAValue, tuple[R.StackOp, int]] = {}  # value → the stack element it fills
        self.stacks: dict[R.StackOp, SSAValue] = {}  # a stack → its buffer, made when first written

    # ---- buffers ----
    def alloc(self, t: Attribute, site: str, name: str | None = None) -> SSAValue:
        self.allocates = True
        op = K.AllocOp(buffer_type(t) if isinstance(t, R.RTensorType) else t, site, name)
        self.block.add_op(op)
        return op.result

    def target(self, value: SSAValue, site: str, name: str | None = None) -> SSAValue:
        """Where the op making `value` writes it: the output it is returned in, or an
        arena buffer."""
        if value in self.dest:
            return self.dest[value]
        if value in self.into:
            stack, index = self.into[value]
            at = K.AtOp(self.stack_buffer(stack), index)
            at.attributes["site"] = StringAttr(site)
            self.block.add_op(at)
            return at.result
        return self.alloc(value.type, site, name)

    def stack_buffer(self, stack: R.StackOp) -> SSAValue:
        """A stack's buffer: its items are written into its elements (`at %s[l]`)."""
        if stack not in self.stacks:
            self.stacks[stack] = self.target(stack.result, _site(stack), _name(stack))
        return self.stacks[stack]

    def buffer(self, value: SSAValue) -> SSAValue:
        """The host buffer holding a Realize value, materializing a convert."""
        if value in self.values:
            return self.values[value]
        convert = self.pending.get(value)
        op = convert.op if convert is not None else self.lazy.get(value)
        if op is None:
            raise KernelConversionError(f"{self.func.func_name}: a value is read before it "
                                        "is made")
        src = self.buffer(op.operand)
        dst = self.target(op.result, _site(op))
        self.block.add_op(K.ConvertOp(src, dst, _site(op)))
        self.values[value] = dst
        return dst

    def kernel_input(self, value: SSAValue) -> _Input:
        """How a kernel reads `value`: a widening convert not materialized is read from
        its source and widened in the kernel."""
        if value not in self.values and value in self.pending:
            p = self.pending[value]
            target = value.type.element  # type: ignore[attr-defined]
            src = self.kernel_input(p.source)
            widen = target if not isinstance(target, BFloat16Type) else None
            if widen is not None and isinstance(widen, Float32Type):
                widen = None  # bf16 → f32: the load itself widens
            return _Input(src.buffer, widen or src.widen_to)
        return _Input(self.buffer(value))

    # ---- planning ----
    def plan(self) -> None:
        ops = list(self.func.body.block.ops)
        # Converts: widening ones read by kernels only stay pending; others are lazy.
        for op in ops:
            if isinstance(op, R.ConvertOp):
                readers = [u.operation for u in op.result.uses]
                if op.widening and readers and all(_is_kernel(r) for r in readers):
                    self.pending[op.result] = _Pending(op.operand, op)
                else:
                    self.lazy[op.result] = op
        # dot + the one add that reads it.
        for op in ops:
            add = R.epilogue_add(op)
            if add is not None:
                self.epilogues[add] = op
                self.skip.add(op)
        # A stack's item that nothing else reads is written into its element directly.
        for op in ops:
            if isinstance(op, R.StackOp):
                for index, item in enumerate(op.items):
                    owner = item.owner
                    if len(list(item.uses)) == 1 and isinstance(owner, Operation) and \
                            not isinstance(owner, (R.SliceOp, R.FoldOp, R.ConvertOp)):
                        self.into[item] = (op, index)
        # Results written straight into the outputs.
        ret = self.func.body.block.last_op
        assert isinstance(ret, R.ReturnOp)
        seen: set[SSAValue] = set()
        for value, out in zip(ret.values, self.host.output_args):
            owner = value.owner
            if value in seen or not isinstance(owner, Operation) or \
                    isinstance(owner, (R.SliceOp, R.FoldOp)) or \
                    (isinstance(owner, R.ConvertOp) and value in self.pending):
                continue
            seen.add(value)
            self.dest[value] = out

    # ---- the body ----
    def run(self) -> None:
        self.plan()
        mark = K.MarkOp()
        self.block.add_op(mark)
        for op in list(self.func.body.block.ops):
            if op in self.skip:
                continue
            self.lower(op)
        if self.allocates:
            self.block.add_op(K.ReleaseOp(mark))
        else:
            mark.detach()
            mark.erase()

    def lower(self, op: Operation) -> None:
        site = _site(op)
        if isinstance(op, R.ConvertOp):
            if op.result in self.dest:  # returned: convert into the output now
                self.buffer(op.result)
            return  # pending or lazy: made where it is read
        if isinstance(op, R.ConstantOp):
            dst = self.target(op.result, site, _name(op))
            self.block.add_op(K.FillOp(dst, op.number, site))
            self.values[op.result] = dst
            return
        if isinstance(op, R.SliceOp):
            at = K.AtOp(self.buffer(op.operand), op.position)
            at.attributes["site"] = StringAttr(site)
            self.block.add_op(at)
            self.values[op.result] = at.result
            return
        if isinstance(op, R.CallOp):
            args = [self.buffer(a) for a in op.arguments]
            outs = [self.target(r, site, _name(op)) for r in op.res]
            self.block.add_op(K.CallOp(op.callee_name, args + outs, site))
            self.values.update(zip(op.res, outs))
            return
        if isinstance(op, R.FoldOp):
            self.lower_fold(op)
            return
        if isinstance(op, R.StackOp):
            self.lower_stack(op)
            return
        if isinstance(op, R.ReturnOp):
            for value, out in zip(op.values, self.host.output_args):
                if self.dest.get(value) is out:
                    continue
                self.block.add_op(K.CopyOp(self.buffer(value), out, site))
            return
        if R.is_compute(op):
            self.lower_compute(op)
            return
        raise KernelConversionError(f"{site}: {op.name} has no kernel form")

    def lower_fold(self, op: R.FoldOp) -> None:
        site = _site(op)
        start, stop = op.bounds
        stacked = [self.buffer(s) for s in op.stacked]
        init = self.buffer(op.acc)
        t = init.type
        s0 = self.alloc(t, site)
        s1 = self.alloc(t, site)
        fold = K.FoldOp(start, stop, init, (s0, s1), site)
        self.block.add_op(fold)
        body = fold.body.block
        views = []
        for s in stacked:
            at = K.AtOp(s, fold.index)
            body.add_op(at)
            views.append(at.result)
        body.add_op(K.CallOp(op.callee_name, [*views, fold.acc, fold.dest], site))
        self.values[op.result] = fold.result

    def lower_stack(self, op: R.StackOp) -> None:
        """Items not written into their element in place are copied there."""
        site = _site(op)
        dst = self.stack_buffer(op)
        for index, item in enumerate(op.items):
            if self.into.get(item) == (op, index):
                continue
            at = K.AtOp(dst, index)
            at.attributes["site"] = StringAttr(site)
            self.block.add_op(at)
            self.block.add_op(K.CopyOp(self.buffer(item), at.result, site))
        self.values[op.result] = dst

    def lower_compute(self, op: Operation) -> None:
        site = _site(op)
        result = op.results[0]
        read = self.kernel_input
        nb: NestBuilder
        layout = None
        fused = False
        sites = [site]
        name = _name(op)
        if isinstance(op, R.GroupOp):
            fused = True
            nb = NestBuilder(f"fused {len(op.steps)} steps")
            inputs = {arg: read(v) for arg, v in zip(op.body.block.args, op.inputs)}
            for v in op.inputs:
                nb.input(read(v).buffer)
            out = self.target(result, site, name)
            last = op.body.block.last_op
            assert isinstance(last, R.YieldOp)
            build_elementwise(nb, op.steps, last.value, inputs, out, result.type)
            sites = [_site(s) for s in op.steps]
        elif op in self.epilogues:
            dot = self.epilogues[op]
            assert isinstance(op, R.AddOp)
            nb = NestBuilder("dot+add")
            sum_is_lhs = op.operands[0] is dot.result
            other = op.operands[1] if sum_is_lhs else op.operands[0]
            lmap, rmap = op.maps
            places = rmap if sum_is_lhs else lmap
            lt, rt = dot.lhs.type, dot.rhs.type
            out = self.target(result, site, name)
            build_contraction(nb, read(dot.lhs), read(dot.rhs), lt, rt, [lt.rank - 1], [0],
                              None, _compute(result.type.element), out,
                              (op, read(other), places, sum_is_lhs))
            layout = default_layout(dot, lt, rt, [lt.rank - 1], [0])
            sites = [_site(dot), site]
        elif isinstance(op, R.DotOp):
            nb = NestBuilder("dot")
            lt, rt = op.lhs.type, op.rhs.type
            out = self.target(result, site, name)
            build_contraction(nb, read(op.lhs), read(op.rhs), lt, rt, [lt.rank - 1], [0], None,
                              _compute(result.type.element), out)
            layout = default_layout(op, lt, rt, [lt.rank - 1], [0])
        elif isinstance(op, R.ContractOp):
            nb = NestBuilder("contract")
            lhs_axes, rhs_axes, perm = op.axes
            out = self.target(result, site, name)
            build_contraction(nb, read(op.lhs), read(op.rhs), op.lhs.type, op.rhs.type,
                              lhs_axes, rhs_axes, perm, _compute(result.type.element), out)
            layout = default_layout(op, op.lhs.type, op.rhs.type, lhs_axes, rhs_axes)
        elif isinstance(op, R.ReduceOp):
            nb = NestBuilder(_title(op))
            src = read(op.operand)
            out = self.target(result, site, name)
            build_reduce(nb, op, src, out)
        elif isinstance(op, R.SoftmaxOp):
            nb = NestBuilder(_title(op))
            src = read(op.operand)
            out = self.target(result, site, name)
            build_softmax(nb, op, src, out)
        elif isinstance(op, R.SumToOp):
            nb = NestBuilder(_title(op))
            src = read(op.operand)
            out = self.target(result, site, name)
            build_sum_to(nb, op, src, out)
        elif isinstance(op, R.SpreadOp):
            nb = NestBuilder(_title(op))
            src = read(op.operand)
            out = self.target(result, site, name)
            divide = op.like.type.count // max(op.operand.type.count, 1) \
                if op.mean is not None else None
            build_spread(nb, op, src, op.place_list, op.result.type, out, divide)
        elif isinstance(op, R.BroadcastOp):
            nb = NestBuilder(_title(op))
            src = read(op.operand)
            out = self.target(result, site, name)
            build_spread(nb, op, src, op.place_list, op.result.type, out, None)
        elif R.is_elementwise(op):
            nb = NestBuilder(_title(op))
            operands = _elementwise_operands(op)
            inputs = {v: read(v) for v in operands}
            for v in operands:
                nb.input(inputs[v].buffer)
            out = self.target(result, site, name)
            build_elementwise(nb, [op], result, inputs, out, result.type)
        else:
            raise KernelConversionError(f"{site}: {op.name} has no kernel form")
        kernel = self.conv.intern(nb.finish(layout))
        args = nb.inputs + nb.outputs
        self.block.add_op(K.LaunchOp(kernel.sym_name.data, args, site, sites, fused, name))
        self.values[result] = out


def _is_kernel(op: Operation) -> bool:
    """An op that becomes a kernel launch (and so may read a widened buffer)."""
    return R.is_compute(op) and not isinstance(op, R.ReturnOp)


# --------------------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------------------


@dataclass
class RealizeToKernel:
    realize: ModuleOp
    kernels: list[K.KernelOp] = field(default_factory=list)
    _by_key: dict[tuple, K.KernelOp] = field(default_factory=dict)

    def intern(self, kernel: K.KernelOp) -> K.KernelOp:
        """The kernel with this structure: `kernel` itself the first time."""
        key = structure_key(kernel)
        if key in self._by_key:
            kernel.erase()
            return self._by_key[key]
        kernel.sym_name = StringAttr(f"t{len(self.kernels)}")
        self._by_key[key] = kernel
        self.kernels.append(kernel)
        return kernel

    def convert(self) -> ModuleOp:
        hosts: list[K.HostOp] = []
        entry = R.entry_func(self.realize)
        for func in R.funcs(self.realize):
            outs = [buffer_type(t) for t in func.result_types]
            arg_types = [buffer_type(a.type) for a in func.args]
            out_names = ["out"] if len(outs) == 1 else [f"out.{i}" for i in range(len(outs))]
            if func.result_names is not None:
                out_names = [n.data for n in func.result_names]
            host = K.HostOp(func.func_name, func.source_func, arg_types + outs, len(outs),
                            list(func.arg_name_list) + out_names)
            if func is entry:
                host.attributes["entry"] = UnitAttr()
            _HostConversion(self, func, host).run()
            hosts.append(host)
        self._name_kernels(hosts, entry.func_name)
        module = ModuleOp([*self.kernels, *hosts])
        for k, v in self.realize.attributes.items():
            module.attributes.setdefault(k, v)
        return module

    def _name_kernels(self, hosts: list[K.HostOp], entry: str) -> None:
        """k0, k1, … in the order of first launch in one call of the entry."""
        by_name = {h.sym_name.data: h for h in hosts}
        order: list[str] = []
        seen_hosts: set[str] = set()

        def visit(host: K.HostOp) -> None:
            for op in K.host_ops(host):
                if isinstance(op, K.LaunchOp) and op.callee_name not in order:
                    order.append(op.callee_name)
                elif isinstance(op, K.CallOp) and op.callee_name not in seen_hosts:
                    seen_hosts.add(op.callee_name)
                    visit(by_name[op.callee_name])

        seen_hosts.add(entry)
        visit(by_name[entry])
        for h in hosts:  # hosts the entry does not reach
            if h.sym_name.data not in seen_hosts:
                seen_hosts.add(h.sym_name.data)
                visit(h)
        rename = {old: f"k{i}" for i, old in enumerate(order)}
        for k in self.kernels:
            if k.sym_name.data not in rename:
                rename[k.sym_name.data] = f"k{len(rename)}"
        for k in self.kernels:
            k.sym_name = StringAttr(rename[k.sym_name.data])
        self.kernels.sort(key=lambda k: int(k.sym_name.data[1:]))
        for h in hosts:
            for op in K.host_ops(h):
                if isinstance(op, K.LaunchOp):
                    op.callee = SymbolRefAttr(rename[op.callee_name])


def realize_to_kernel(module: ModuleOp) -> ModuleOp:
    """The PSK-Kernel module for a PSK-Realize one (fused or not), verified."""
    out = RealizeToKernel(module).convert()
    out.verify()
    return out


@dataclass(frozen=True)
class ConvertRealizeToKernelPass(ModulePass):
    """`convert-psk-realize-to-kernel`: the module's instances replaced by kernels and
    hosts."""

    name = "convert-psk-realize-to-kernel"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        new = realize_to_kernel(op)
        replace_module_body(op, new)
