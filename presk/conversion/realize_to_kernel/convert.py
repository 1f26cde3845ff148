"""convert-psk-realize-to-kernel: PSK-Realize instances → PSK-Kernel loop nests and hosts.

Each `psk_realize.func` becomes a `psk_kernel.host` of the same name over buffers: its
arguments, then one output buffer per result (destination-passing). In its body:

* every compute op, and every fusion group, becomes ONE launch of a kernel: an
  element-wise op (its operands placed by `lhs_map`/`rhs_map`), a group (its steps inlined
  into one nest, its intermediates scalars), a reduce_group (one nest over the rows: its
  reductions' terms computed in their loops, the reduced values as scalars of the row,
  an F result in a loop after them), a reduction over one axis or all (parallel
  loops over the kept axes, the reduced ones in order carrying the accumulator), softmax,
  logsumexp, a contraction (`dot`, `contract`: k ascending, a product then a sum, no FMA),
  `sum_to`, `spread`, `broadcast`;
* a contraction (`dot`, `contract`) whose value only one element-wise op or group reads,
  at its own indices and in its own type, is launched with that reader as its epilogue:
  one kernel ("dot+add": a bias; "dot+add+add+gelu", "contract+mul", …), the reader's
  steps computed on each finished sum before the store, each the scalar op its own
  kernel runs, in its type: the same bits as two launches;
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

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from xdsl.context import Context
from xdsl.dialects.builtin import BFloat16Type, Float32Type, ModuleOp, StringAttr, UnitAttr
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass

from presk import ops
from presk.dialects import kernel as K, realize as R
from presk.dialects.common import replace_module_body, verify_built
from presk.transforms.fuse_siblings import fuse_siblings
from presk.transforms.kernel_dedup import dedup_kernels

from .nests import (KernelConversionError, NestBuilder, _Input,
    _elementwise_operands, _name, _site, _title, buffer_type, build_contraction,
    build_elementwise, build_reduce, build_reduce_group, build_softmax, build_spread,
    build_sum_to, default_layout, default_nest_layout)


_T = TypeVar("_T")


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
        self.epilogues: dict[Operation, Operation] = {}  # reader → the product it finishes
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
        # A contraction + the one element-wise reader that takes it as its epilogue.
        for op in ops:
            reader = R.epilogue_of(op) if self.conv.epilogues else None
            if reader is not None:
                self.epilogues[reader] = op
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
                    isinstance(owner, R.SliceOp) or \
                    (isinstance(owner, R.FoldOp) and value is owner.result) or \
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
        """One op of the instance into the host: by its kind (`_HOST_LOWERINGS`), or a
        compute op into one kernel launch."""
        rule = _lookup(_HOST_LOWERINGS, op)
        if rule is not None:
            rule(self, op)
        elif R.is_compute(op):
            self.lower_compute(op)
        else:
            raise KernelConversionError(f"{_site(op)}: {op.name} has no kernel form")

    def lower_convert(self, op: R.ConvertOp) -> None:
        if op.result in self.dest:  # returned: convert into the output now
            self.buffer(op.result)
        # else pending or lazy: made where it is read

    def lower_constant(self, op: R.ConstantOp) -> None:
        site = _site(op)
        dst = self.target(op.result, site, _name(op))
        self.block.add_op(K.FillOp(dst, op.number, site))
        self.values[op.result] = dst

    def lower_slice(self, op: R.SliceOp) -> None:
        at = K.AtOp(self.buffer(op.operand), op.position)
        at.attributes["site"] = StringAttr(_site(op))
        self.block.add_op(at)
        self.values[op.result] = at.result

    def lower_call(self, op: R.CallOp) -> None:
        site = _site(op)
        args = [self.buffer(a) for a in op.arguments]
        outs = [self.target(r, site, _name(op)) for r in op.res]
        self.block.add_op(K.CallOp(op.callee_name, args + outs, site))
        self.values.update(zip(op.res, outs))

    def lower_return(self, op: R.ReturnOp) -> None:
        for value, out in zip(op.values, self.host.output_args):
            if self.dest.get(value) is out:
                continue
            self.block.add_op(K.CopyOp(self.buffer(value), out, _site(op)))

    def lower_fold(self, op: R.FoldOp) -> None:
        """A host `fold` over two scratch buffers; its stacked results are buffers made
        before the loop, iteration l's written into `at %s[l]` (the accumulator, when it
        is stacked too, copied there)."""
        site = _site(op)
        start, stop = op.bounds
        stacked = [self.buffer(s) for s in op.stacked]
        init = self.buffer(op.acc)
        t = init.type
        s0 = self.alloc(t, site)
        s1 = self.alloc(t, site)
        stacks = [self.target(r, site, _name(op)) for r in list(op.res)[1:]]
        fold = K.FoldOp(start, stop, init, (s0, s1), site, reverse=op.reverse is not None)
        self.block.add_op(fold)
        body = fold.body.block

        def at(buffer: SSAValue) -> SSAValue:
            view = K.AtOp(buffer, fold.index)
            body.add_op(view)
            return view.result
        views = [at(s) for s in stacked]
        outs: list[SSAValue] = [fold.dest] * (len(op.stack_list) + 1 -
                                              (op.acc_index in op.stack_list))
        copies = []
        for i, buffer in zip(op.stack_list, stacks):
            if i == op.acc_index:
                copies.append(buffer)
            else:
                outs[i] = at(buffer)
        body.add_op(K.CallOp(op.callee_name, [*views, fold.acc, *outs], site))
        for buffer in copies:
            body.add_op(K.CopyOp(fold.dest, at(buffer), site))
        self.values[op.result] = fold.result
        self.values.update(zip(list(op.res)[1:], stacks))

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
        """A compute op (or a group) → one kernel, built by its kind's builder
        (`_KERNEL_BUILDERS`; a reader finishing a contraction is its epilogue), and its launch."""
        site = _site(op)
        result = op.results[0]
        builder = _epilogue if op in self.epilogues else _lookup(_KERNEL_BUILDERS, op)
        if builder is None and R.is_elementwise(op):
            builder = _elementwise
        if builder is None:
            raise KernelConversionError(f"{site}: {op.name} has no kernel form")
        made = builder(self, op)
        nest = made.nest.finish(made.layout)
        if made.layout is None:  # not a contraction: split when large (no bits change)
            nest.layout = default_nest_layout(nest)
        kernel = self.conv.add_kernel(nest)
        args = made.nest.inputs + made.nest.outputs
        self.block.add_op(K.LaunchOp(kernel.sym_name.data, args, site, made.sites or [site],
                                     made.fused, _name(op)))
        self.values[result] = made.out

    def out(self, op: Operation) -> SSAValue:
        """Where the kernel computing `op`'s (first) result writes it."""
        return self.target(op.results[0], _site(op), _name(op))


# --------------------------------------------------------------------------------------
# The tables: how each kind of op lowers
# --------------------------------------------------------------------------------------


def _lookup(table: Mapping[type, _T], op: Operation) -> _T | None:
    """The entry for `op`'s class or the nearest base class the table names."""
    for cls in type(op).__mro__:
        if cls in table:
            return table[cls]
    return None


_HOST_LOWERINGS: dict[type[Operation], Callable[[_HostConversion, Any], None]] = {
    R.ConvertOp: _HostConversion.lower_convert,
    R.ConstantOp: _HostConversion.lower_constant,
    R.SliceOp: _HostConversion.lower_slice,
    R.CallOp: _HostConversion.lower_call,
    R.FoldOp: _HostConversion.lower_fold,
    R.StackOp: _HostConversion.lower_stack,
    R.ReturnOp: _HostConversion.lower_return,
}
"""The ops of an instance that are host ops (no kernel): by kind."""


@dataclass
class _Kernel:
    """What a builder made: the nest, the buffer it writes, and how it is launched."""

    nest: NestBuilder
    out: SSAValue
    layout: K.LayoutAttr | None = None
    sites: list[str] | None = None  # the sites it computes, when not only the op's
    fused: bool = False


def _group(hc: _HostConversion, op: R.GroupOp) -> _Kernel:
    nb = NestBuilder(f"fused {len(op.steps)} steps")
    inputs = {arg: hc.kernel_input(v) for arg, v in zip(op.body.block.args, op.inputs)}
    for v in op.inputs:
        nb.input(hc.kernel_input(v).buffer)
    out = hc.out(op)
    last = op.body.block.last_op
    assert isinstance(last, R.YieldOp)
    build_elementwise(nb, op.steps, last.value, inputs, out, op.results[0].type)
    return _Kernel(nb, out, sites=[_site(s) for s in op.steps], fused=True)


def _reduce_group(hc: _HostConversion, op: R.ReduceGroupOp) -> _Kernel:
    titles = ", ".join(_title(r) for r in op.reductions)
    nb = NestBuilder(f"fused {len(op.steps)} steps, {titles}")
    inputs = {arg: hc.kernel_input(v) for arg, v in zip(op.body.block.args, op.inputs)}
    for v in op.inputs:
        nb.input(hc.kernel_input(v).buffer)
    out = hc.out(op)
    build_reduce_group(nb, op, inputs, out)
    return _Kernel(nb, out, sites=[_site(s) for s in op.steps], fused=True)


def _epilogue(hc: _HostConversion, op: Operation) -> _Kernel:
    """The element-wise reader (an op or a group) of a contraction only it reads: one
    kernel, the reader's steps on each finished sum ("dot+add", "dot+add+gelu", …)."""
    product = hc.epilogues[op]
    if isinstance(op, R.GroupOp):
        steps, yielded = op.steps, op.root.results[0]
        stand_in = dict(zip(op.inputs, op.body.block.args))[product.result]  # inputs distinct
        inputs = {arg: hc.kernel_input(v) for arg, v in zip(op.body.block.args, op.inputs)
                  if v is not product.result}
    else:
        steps, yielded, stand_in = [op], op.results[0], product.result
        inputs = {v: hc.kernel_input(v) for v in _elementwise_operands(op)
                  if v is not product.result}
    kind = "dot" if isinstance(product, R.DotOp) else "contract"
    nb = NestBuilder("+".join([kind, *(_title(s) for s in steps)]))
    if isinstance(product, R.DotOp):
        lt, rt = product.lhs.type, product.rhs.type
        lhs_axes, rhs_axes, perm = [lt.rank - 1], [0], None
    else:
        lhs_axes, rhs_axes, perm = product.axes
        lt, rt = product.lhs.type, product.rhs.type
    out, fused = hc.out(op), _fused(product)
    build_contraction(nb, hc.kernel_input(product.lhs), hc.kernel_input(product.rhs), lt, rt,
                      lhs_axes, rhs_axes, perm, K.compute_type(product.result.type.element), out,
                      (steps, yielded, inputs, stand_in), fused=fused)
    return _Kernel(nb, out, default_layout(product, lt, rt, lhs_axes, rhs_axes, fused),
                   sites=[_site(product), *(_site(s) for s in steps)],
                   fused=isinstance(op, R.GroupOp))


def _dot(hc: _HostConversion, op: R.DotOp) -> _Kernel:
    nb = NestBuilder("dot")
    lt, rt = op.lhs.type, op.rhs.type
    out, fused = hc.out(op), _fused(op)
    build_contraction(nb, hc.kernel_input(op.lhs), hc.kernel_input(op.rhs), lt, rt,
                      [lt.rank - 1], [0], None, K.compute_type(op.result.type.element), out,
                      fused=fused)
    return _Kernel(nb, out, default_layout(op, lt, rt, [lt.rank - 1], [0], fused))


def _contract(hc: _HostConversion, op: R.ContractOp) -> _Kernel:
    nb = NestBuilder("contract")
    lhs_axes, rhs_axes, perm = op.axes
    out, fused = hc.out(op), _fused(op)
    build_contraction(nb, hc.kernel_input(op.lhs), hc.kernel_input(op.rhs), op.lhs.type,
                      op.rhs.type, lhs_axes, rhs_axes, perm,
                      K.compute_type(op.result.type.element), out, fused=fused)
    return _Kernel(nb, out, default_layout(op, op.lhs.type, op.rhs.type, lhs_axes, rhs_axes,
                                           fused))


def _fused(op: Operation) -> bool:
    """Whether the realization fused this contraction's multiply-adds (the recorder's
    `fma` attribute)."""
    return "fma" in op.attributes


def _one_source(build: Callable[[NestBuilder, Any, _Input, SSAValue], None]
                ) -> Callable[[_HostConversion, Any], _Kernel]:
    """The builder of an op over one operand: read it, then `build` the nest."""

    def builder(hc: _HostConversion, op: Any) -> _Kernel:
        nb = NestBuilder(_title(op))
        src = hc.kernel_input(op.operand)
        out = hc.out(op)
        build(nb, op, src, out)
        return _Kernel(nb, out)

    return builder


def _spread_nest(nb: NestBuilder, op: R.SpreadOp, src: _Input, out: SSAValue) -> None:
    divide = op.like.type.count // max(op.operand.type.count, 1) \
        if op.mean is not None else None
    build_spread(nb, op, src, op.place_list, op.result.type, out, divide)


def _broadcast_nest(nb: NestBuilder, op: R.BroadcastOp, src: _Input, out: SSAValue) -> None:
    build_spread(nb, op, src, op.place_list, op.result.type, out, None)


def _elementwise(hc: _HostConversion, op: Operation) -> _Kernel:
    nb = NestBuilder(_title(op))
    operands = _elementwise_operands(op)
    inputs = {v: hc.kernel_input(v) for v in operands}
    for v in operands:
        nb.input(inputs[v].buffer)
    out = hc.out(op)
    result = op.results[0]
    build_elementwise(nb, [op], result, inputs, out, result.type)
    return _Kernel(nb, out)


_KERNEL_BUILDERS: dict[type[Operation], Callable[[_HostConversion, Any], _Kernel]] = {
    R.GroupOp: _group,
    R.ReduceGroupOp: _reduce_group,
    R.DotOp: _dot,
    R.ContractOp: _contract,
    R.ReduceOp: _one_source(build_reduce),
    R.SoftmaxOp: _one_source(build_softmax),
    R.SumToOp: _one_source(build_sum_to),
    R.SpreadOp: _one_source(_spread_nest),
    R.BroadcastOp: _one_source(_broadcast_nest),
    R.UnaryOp: _elementwise,
    R.BinaryOp: _elementwise,
}
"""How each kind of compute op becomes one kernel (by its class or a base class)."""


def _is_kernel(op: Operation) -> bool:
    """An op that becomes a kernel launch (and so may read a widened buffer)."""
    return R.is_compute(op) and not isinstance(op, R.ReturnOp)


# --------------------------------------------------------------------------------------
# The module
# --------------------------------------------------------------------------------------


@dataclass
class RealizeToKernel:
    realize: ModuleOp
    epilogues: bool = True  # False: every contraction a kernel of its own (a reference)
    kernels: list[K.KernelOp] = field(default_factory=list)

    def add_kernel(self, kernel: K.KernelOp) -> K.KernelOp:
        """One more kernel, named k<n> in the order made (psk-kernel-dedup shares the
        same ones and numbers them by launch)."""
        kernel.sym_name = StringAttr(f"k{len(self.kernels)}")
        self.kernels.append(kernel)
        return kernel

    def convert(self) -> ModuleOp:
        hosts: list[K.HostOp] = []
        entry = R.entry_func(self.realize)
        for func in R.funcs(self.realize):
            outs = [buffer_type(t) for t in func.output_types]
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
        module = ModuleOp([*self.kernels, *hosts])
        for k, v in self.realize.attributes.items():
            module.attributes.setdefault(k, v)
        return module


def realize_to_kernel(module: ModuleOp, epilogues: bool = True,
                      siblings: bool = True) -> ModuleOp:
    """The PSK-Kernel module for a PSK-Realize one (fused or not), its kernels shared
    (convert-psk-realize-to-kernel, then psk-kernel-dedup), with `siblings` its launches
    that share a math call fused (psk-kernel-fuse-siblings), verified.
    `epilogues=False`: no contraction takes its reader as its epilogue (the tests'
    unfused reference)."""
    out = RealizeToKernel(module, epilogues).convert()
    dedup_kernels(out)
    if siblings:
        fuse_siblings(out)
    verify_built(out)
    return out


@dataclass(frozen=True)
class ConvertRealizeToKernelPass(ModulePass):
    """`convert-psk-realize-to-kernel`: the module's instances replaced by kernels and
    hosts."""

    name = "convert-psk-realize-to-kernel"

    epilogues: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        new = RealizeToKernel(op, self.epilogues).convert()
        new.verify()
        replace_module_body(op, new)
