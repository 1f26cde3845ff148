"""convert-psk-kernel-to-std: PSK-Kernel → func/scf/arith and the `llvm` dialect's pointers.

After this pass and `STD_TO_LLVM_PIPELINE` (presk/conversion/std_to_llvm) a module is pure
`llvm` dialect, which `xdsl.backend.llvm.convert_module` translates. The calling convention
it implements is presk/kernel_abi/calling.py.

* A buffer becomes an `!llvm.ptr` to its first element, row-major (last axis contiguous);
  a bf16 buffer holds i16 bits. Between the two phases of the pass a buffer value is an
  `unrealized_conversion_cast` of a pointer, so every op still sees its buffer's shape;
  `reconcile-unrealized-casts` removes the casts.
* `kernel @kN` → `func.func @presk_kernel_kN(ptr…)`, every argument `llvm.noalias` unless
  a launch passes one buffer as an output and as another argument. `for` → `scf.for`
  (loop-carried scalars → iter_args), `load`/`store` → `llvm.getelementptr inbounds` at
  the flat offset Σ index·stride, then `llvm.load`/`llvm.store`. The arithmetic is IEEE
  and unfused: add sub mul div neg → arith; `min`/`max` are numpy's `minimum`/`maximum`
  (NaN from either side; of two equal values the second), written as compare + select;
  `cast` → `arith.extf`/`arith.truncf` (round to nearest even); `math` → the `math`
  dialect's op (convert-math-to-llvm makes it a call of the one math library,
  `presk_<fn>_<ty>`, or an exact intrinsic for sqrt and abs), `heaviside` as selects,
  softplus (which `math` lacks) a direct call of the library; the runtime appends the
  library's definitions (presk/emit/mathlib_llvm.py).
  A bf16 load widens the bits (`zext`, `shl 16`, `bitcast`); a bf16 store rounds to
  nearest even by bits, as `bf16_round` of presk/analysis/kernel_interpret.py does.
* `host @H` → `func.func @presk_host_H(ptr…, arena: ptr)`. The arena is static: `mark`
  and `release` vanish, each `alloc` is the arena pointer at an offset `ArenaPlan` fixes
  (64-byte aligned), a `call` passes the callee the arena at its base: the buffers placed
  by their lives (presk/kernel_abi/placement.py), not a stack of frames.
  `convert`, `copy` and `fill` are loops over the flat elements (f64 → bf16 rounds to odd
  in f32 first, so that the bf16 rounding is a single correct one) — a copy or an f64 →
  f32 conversion of HOST_SPLIT_BYTES or more, when the kernels split and the runtime is
  there, one call of `presk_host_copy` instead, its elements divided among the pool's
  parts (presk/runtime/presk_pool.c; the same conversion, the same bits); `at` is a GEP;
  `launch`/`call` are `func.call`s; `fold` is an `scf.for` carrying the accumulator's
  pointer, its destination alternating between the two scratch buffers.
* A blocked sum (`for … {partials = P}`, presk/summation.py) keeps its partials in a
  stack array, the iterations of a block an inner loop LLVM vectorizes:
  presk/conversion/kernel_to_std/blocked_sum.py, before the rest of phase 2.
* A kernel whose layout is `tiled` (a contraction) runs in register tiles:
  presk/conversion/kernel_to_std/tile_contraction.py, called from the kernel's rewrite. A
  kernel psk-kernel-split gave `parts` (presk/transforms/kernel_split.py, which runs
  first in the native pipeline) becomes a spawner running its parts on the worker pool
  (threads.py; the option `spawn=threads` starts a thread per part and launch instead);
  without that pass a split layout runs on the caller's thread.
* Each host marked `entry` gets `presk_entry_H(argv, arena)`, which loads the buffer
  pointers from `argv` and calls the host.
* The functions the module calls and does not define are declared (the math library's,
  `presk_scratch` or `malloc`/`free` for a tile's packed operand, `presk_pool_run` or
  `pthread_create`/`pthread_join`, `presk_host_copy`).

`entry_signatures(module)` (the PSK-Kernel module, before the pass) describes those
entries for the runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, scf
from xdsl.dialects.builtin import (ArrayAttr, DictionaryAttr, Float32Type, Float64Type,
    IntegerType, ModuleOp, StringAttr, UnitAttr, UnrealizedConversionCastOp, i16, i32, i64)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (GreedyRewritePatternApplier, PatternRewriteWalker,
    PatternRewriter, RewritePattern, op_type_rewrite_pattern)
from xdsl.rewriter import InsertPoint

from presk.conversion.std_to_llvm.callees import declare_external_callees
from presk.dialects import kernel as K
from presk.kernel_abi.arena import ArenaPlan, aliased_kernels
from presk.kernel_abi.placement import Layout, Target
from presk.kernel_abi.calling import entry_symbol, host_symbol, kernel_symbol
from presk.transforms.kernel_split import threads_of

from .blocked_sum import lower_blocked_sums
from .collapse_nest import collapse_elementwise_nests
from .threads import spawners
from .emitter import (ARITH_OPS, Emitter, INDEX, PTR, as_buffer, buffer_type_of,
    emit_before, lower_scalar_op, storage_type)


# --------------------------------------------------------------------------------------
# Phase 1: kernels and hosts become functions over pointers
# --------------------------------------------------------------------------------------


def _function(op: K.KernelOp | K.HostOp, symbol: str, arena: bool,
              arg_attrs: ArrayAttr | None, rewriter: PatternRewriter) -> func.FuncOp:
    types = [PTR] * (len(op.args) + arena)
    block = Block(arg_types=types)
    new = func.FuncOp(symbol, (types, []), Region(block), "private", arg_attrs=arg_attrs)
    e = Emitter(rewriter, InsertPoint.at_end(block))
    views = [e(UnrealizedConversionCastOp.get([p], [a.type]))
             for p, a in zip(block.args, op.args)]
    _move_body(op.body.block, block, views)
    block.add_op(func.ReturnOp())
    return new


def _move_body(old: Block, new: Block, values: Sequence[SSAValue]) -> None:
    """Move `old`'s ops to the end of `new`, its arguments replaced by `values` (the old
    block stays, empty, in the op the rewrite replaces)."""
    for arg, value in zip(old.args, values):
        arg.replace_all_uses_with(value)
    for inner in list(old.ops):
        inner.detach()
        new.add_op(inner)


@dataclass
class KernelToFunc(RewritePattern):
    """`psk_kernel.kernel` → `func.func @presk_kernel_…`, its buffers `noalias` unless
    `aliased` names it."""

    aliased: frozenset[str]
    scratch: str = "malloc"  # where a tile's packed operands live (tile_contraction.py)

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.KernelOp, rewriter: PatternRewriter, /):
        from .tile_contraction import tile_kernel
        name = op.sym_name.data
        attrs = None
        if name not in self.aliased:
            attrs = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()})] * len(op.args))
        new = _function(op, kernel_symbol(name), False, attrs, rewriter)
        if op.layout.kind.data == "tiled":
            tile_kernel(new.body.block, op.layout, rewriter, self.scratch)
        rewriter.replace(op, new, [])


class HostToFunc(RewritePattern):
    """`psk_kernel.host` → `func.func @presk_host_…(buffers…, arena)`; an entry host also
    gets its `presk_entry_…(argv, arena)`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.HostOp, rewriter: PatternRewriter, /):
        name = op.sym_name.data
        new = _function(op, host_symbol(name), True, None, rewriter)
        ops: list[Operation] = [new]
        if op.entry is not None:
            ops.append(_entry_function(name, len(op.args)))
        rewriter.replace(op, ops, [])


def _entry_function(host: str, n: int) -> func.FuncOp:
    block = Block(arg_types=[PTR, PTR])
    argv, arena = block.args
    ops: list[Operation] = []
    pointers = []
    for i in range(n):
        slot = llvm.GEPOp(argv, [i], PTR, inbounds=True)
        load = llvm.LoadOp(slot, PTR)
        ops += [slot, load]
        pointers.append(load.results[0])
    ops.append(func.CallOp(host_symbol(host), [*pointers, arena], []))
    ops.append(func.ReturnOp())
    block.add_ops(ops)
    return func.FuncOp(entry_symbol(host), ([PTR, PTR], []), Region(block))


# --------------------------------------------------------------------------------------
# Phase 2: the ops of a kernel's nest
# --------------------------------------------------------------------------------------


class ForToScf(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.ForOp, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        lower, upper, one = e.index(op.lower.data), e.index(op.upper.data), e.index(1)
        body = rewriter.move_region_contents_to_new_regions(op.body)
        rewriter.replace(op, scf.ForOp(lower, upper, one, list(op.inits), body))


class YieldToScf(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.YieldOp, rewriter: PatternRewriter, /):
        rewriter.replace(op, scf.YieldOp(*op.values))


class LoadToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.LoadOp, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        value = e.load(op.buffer, e.flat(buffer_type_of(op.buffer), list(op.indices)))
        rewriter.replace(op, [], [value])


class StoreToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.StoreOp, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        e.store(op.value, op.buffer, e.flat(buffer_type_of(op.buffer), list(op.indices)))
        rewriter.erase(op)


_SCALAR_OPS = (*ARITH_OPS, K.MinOp, K.MaxOp, K.NegOp, K.FmaOp, K.CastOp, K.ConstantOp,
               K.MathOp)


class ScalarToArith(RewritePattern):
    """+ − × ÷, negation, min and max, fma, casts, constants and math functions."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, _SCALAR_OPS):
            return
        t = op.operands[0].type if op.operands else op.results[0].type
        rewriter.replace(op, [], [lower_scalar_op(emit_before(op, rewriter), op, op.operands, t)])


# --------------------------------------------------------------------------------------
# Phase 2: the host's ops
# --------------------------------------------------------------------------------------


def _arena(op: Operation) -> SSAValue:
    f = op.parent_op()
    while not isinstance(f, func.FuncOp):
        assert f is not None, "a host op outside a host"
        f = f.parent_op()
    return f.body.block.args[-1]


def _arena_at(e: Emitter, op: Operation, offset: int) -> SSAValue:
    """The arena pointer `offset` bytes on. The offset is an i64 operand: a GEP's
    constant indices are i32, and an arena past 2 GiB (a large batch) would wrap."""
    arena = _arena(op)
    if offset == 0:
        return arena
    return e(llvm.GEPOp(arena, [llvm.GEP_USE_SSA_VAL], IntegerType(8),
                        ssa_indices=[e.int(offset, i64)], inbounds=True))


@dataclass
class ArenaToPointers(RewritePattern):
    """`alloc` at its fixed offset; `mark` and `release` vanish; a `call` runs its
    callee's layout at its base, which for a call in a fold may differ between the even
    and the odd iterations (presk/kernel_abi/placement.py): then an `scf.if` on the
    iteration's parity picks one."""

    offsets: dict[Operation, int]
    calls: dict[Operation, tuple[Target, Target]]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if isinstance(op, K.ReleaseOp):
            mark = op.mark.owner
            rewriter.erase(op)
            if isinstance(mark, K.MarkOp) and not mark.result.uses:
                rewriter.erase(mark)
        elif isinstance(op, K.MarkOp) and not op.result.uses:
            rewriter.erase(op)
        elif isinstance(op, K.AllocOp):
            e = emit_before(op, rewriter)
            p = _arena_at(e, op, self.offsets[op])
            rewriter.replace(op, [], [as_buffer(e, p, op.result.type)])
        elif isinstance(op, K.CallOp):
            e = emit_before(op, rewriter)
            args = [e.ptr(a) for a in op.arguments]
            even, odd = self.calls[op]
            if even == odd:
                _call_layout(e, op, args, even)
            else:
                branches = [Region(Block()), Region(Block())]
                for region, t in zip(branches, (odd, even)):
                    b = Emitter(rewriter, InsertPoint.at_end(region.block))
                    _call_layout(b, op, args, t)
                    b(scf.YieldOp())
                e(scf.IfOp(_odd_iteration(e, op), [], *branches))
            rewriter.erase(op)


def _call_layout(e: Emitter, op: K.CallOp, args: list[SSAValue], t: Target) -> None:
    e(func.CallOp(host_symbol(t.layout), [*args, _arena_at(e, op, t.base)], []))


def _odd_iteration(e: Emitter, call: K.CallOp) -> SSAValue:
    """Whether the fold around `call` runs an odd iteration (counted from its first): the
    fold's index less its lower bound, bit 0 (the fold may already be an `scf.for`)."""
    loop = call.parent_op()
    if isinstance(loop, K.FoldOp) and loop.reverse is not None:
        index, lower = e.index(loop.upper.data - 1), loop.index  # steps: upper − 1 − l
    elif isinstance(loop, K.FoldOp):
        index, lower = loop.index, e.index(loop.lower.data)
    else:
        assert isinstance(loop, scf.ForOp), "a call with two layouts is in a fold"
        index, lower = loop.body.block.args[0], loop.lb
    step = e(arith.SubiOp(index, lower))
    return e(arith.CmpiOp(e(arith.AndIOp(step, e.index(1))), e.index(0), "ne"))


class LaunchToCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.LaunchOp, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        args = [e.ptr(a) for a in op.arguments]
        rewriter.replace(op, func.CallOp(kernel_symbol(op.callee_name), args, []))


HOST_COPY = "presk_host_copy"
"""The runtime's copy or f64 → f32 conversion divided among the pool's parts
(presk/runtime/presk_pool.c)."""

HOST_SPLIT_BYTES = 1 << 18
"""Bytes a host's `copy` or f64 → f32 `convert` writes from which it runs on the pool
when the module's kernels split (`ElementwiseHostOps.parts` > 1): on the scaled Tower's
value and gradient (B = 1024) the host's copies of saved values (17 MB) and conversions of
the batch were 2-3 ms a call on the calling thread alone while the workers waited."""


@dataclass
class ElementwiseHostOps(RewritePattern):
    """`convert`, `copy` and `fill`: one loop over the flat elements — or, for a copy or
    an f64 → f32 conversion of HOST_SPLIT_BYTES or more when `parts` > 1, one call of the
    runtime's `presk_host_copy`, the elements divided among `parts` of the worker pool
    (each element written once, by the same conversion: the same bits)."""

    parts: int = 1

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        if self._on_pool(op):
            self._host_copy(e, op)
        elif isinstance(op, K.ConvertOp):
            src, dst = op.source, op.dest
            e.loop(buffer_type_of(dst).size,
                   lambda b, i: b.store(_converted(b, b.load(src, i), buffer_type_of(src),
                                                   buffer_type_of(dst)), dst, i))
        elif isinstance(op, K.CopyOp):
            src, dst = op.source, op.dest
            t = storage_type(buffer_type_of(dst))
            e.loop(buffer_type_of(dst).size, lambda b, i: b(llvm.StoreOp(
                b(llvm.LoadOp(b.element_ptr(src, i), t)), b.element_ptr(dst, i))))
        elif isinstance(op, K.FillOp):
            dst = op.dest
            e.loop(buffer_type_of(dst).size, lambda b, i: b(llvm.StoreOp(
                _fill_constant(b, op.number, buffer_type_of(dst)), b.element_ptr(dst, i))))
        else:
            return
        rewriter.erase(op)

    def _on_pool(self, op: Operation) -> bool:
        if self.parts < 2 or not isinstance(op, (K.ConvertOp, K.CopyOp)):
            return False
        src, dst = buffer_type_of(op.source), buffer_type_of(op.dest)
        if isinstance(op, K.ConvertOp) and not (
                K.type_name(src.element) == "f64" and K.type_name(dst.element) == "f32"):
            return False
        return dst.bytes >= HOST_SPLIT_BYTES

    def _host_copy(self, e: Emitter, op: Operation) -> None:
        dst = buffer_type_of(op.dest)
        narrow = int(isinstance(op, K.ConvertOp))
        size = dst.bytes // max(1, dst.size)
        e(llvm.CallOp(HOST_COPY, e.ptr(op.dest), e.ptr(op.source), e.int(dst.size, i64),
                      e.int(size, i32), e.int(narrow, i32), e.int(self.parts, i32)))


def _converted(e: Emitter, x: SSAValue, src: K.BufferType, dst: K.BufferType) -> SSAValue:
    """x (src's compute type) into dst's compute type, rounding once to nearest even."""
    s, d = K.type_name(src.element), K.type_name(dst.element)
    if d == "f64":
        return x if isinstance(x.type, Float64Type) else e(arith.ExtFOp(x, Float64Type()))
    if d == "f32":
        return e(arith.TruncFOp(x, Float32Type())) if s == "f64" else x
    # bf16: the store rounds an f32 to nearest even; from f64, f32 rounded to odd first.
    return e.f64_to_f32_odd(x) if s == "f64" else x


def _fill_constant(e: Emitter, value: float, t: K.BufferType) -> SSAValue:
    from presk.analysis.kernel_interpret import element_name, to_storage
    stored = to_storage(np.array(value), element_name(t.element))
    if stored.dtype == np.uint16:
        return e.int(int(stored), i16)
    return e.float(float(stored), t.element)


class AtToGEP(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.AtOp, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        inner = op.result.type.size  # type: ignore[attr-defined]
        index = op.dynamic[0] if op.dynamic else e.index(op.index.data)  # type: ignore[union-attr]
        offset = e(arith.MuliOp(index, e.index(inner)))
        p = e.element_ptr(op.source, offset)
        rewriter.replace(op, [], [as_buffer(e, p, op.result.type)])


class FoldToScf(RewritePattern):
    """`fold` → `scf.for` over [lower, upper) carrying the accumulator's pointer; the k-th
    iteration run (k = l − lower; a `reverse` fold runs l = upper − 1 − k) writes scratch
    k mod 2."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.FoldOp, rewriter: PatternRewriter, /):
        e = emit_before(op, rewriter)
        t = op.result.type
        s0, s1, init = e.ptr(op.scratch0), e.ptr(op.scratch1), e.ptr(op.init)
        block = Block(arg_types=[INDEX, PTR])
        loop = scf.ForOp(e.index(op.lower.data), e.index(op.upper.data), e.index(1),
                         [init], Region(block))
        rewriter.insert(loop, InsertPoint.before(op))
        b = Emitter(rewriter, InsertPoint.at_end(block))
        l, acc = block.args
        step = b(arith.SubiOp(l, b.index(op.lower.data)))
        even = b(arith.CmpiOp(b(arith.AndIOp(step, b.index(1))), b.index(0), "eq"))
        dest = b(arith.SelectOp(even, s0, s1))
        if op.reverse is not None:
            l = b(arith.SubiOp(b.index(op.upper.data - 1), step))
        values = [l, as_buffer(b, acc, t), as_buffer(b, dest, t)]
        _move_body(op.body.block, block, values)
        block.add_op(scf.YieldOp(dest))
        rewriter.replace(op, [], [as_buffer(e, loop.results[0], t)])


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------


def _walk(patterns: list[RewritePattern], module: ModuleOp) -> None:
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns),
                         apply_recursively=False).rewrite_module(module)


def _layouts_as_hosts(module: ModuleOp, plan: ArenaPlan
                      ) -> tuple[dict[Operation, int], dict[Operation, tuple[Target, Target]]]:
    """A copy of the host for each layout that is not a host's own (a fold's callee at
    even or odd iterations), named after the layout; every alloc's offset and every
    call's targets, keyed by the ops of the hosts and of the copies."""
    offsets: dict[Operation, int] = {}
    calls: dict[Operation, tuple[Target, Target]] = {}

    def take(layout: Layout, host: K.HostOp) -> None:
        for op in K.host_ops(host):
            if isinstance(op, K.AllocOp):
                offsets[op] = layout.offsets[op]
            elif isinstance(op, K.CallOp):
                calls[op] = layout.calls[op]

    for name, host in plan.hosts.items():
        take(plan.layouts[name], host)
    for layout in plan.variants():
        host = plan.hosts[layout.host]
        copy = host.clone()
        copy.sym_name = StringAttr(layout.name)
        copy.entry = None
        module.body.block.insert_op_after(copy, host)
        mapping = dict(zip(K.host_ops(host), K.host_ops(copy)))
        take(Layout(layout.name, layout.host,
                    offsets={mapping[o]: n for o, n in layout.offsets.items()},
                    calls={mapping[o]: t for o, t in layout.calls.items()}), copy)
    return offsets, calls


@dataclass(frozen=True)
class ConvertKernelToStdPass(ModulePass):
    """PSK-Kernel → func, scf, arith and llvm pointers (see the module's docstring)."""

    name = "convert-psk-kernel-to-std"

    spawn: str = "pool"
    """How a split kernel's parts start: `pool` or `threads` (threads.py)."""

    scratch: str = "malloc"
    """Where a tile's packed operands live: `pool` (the runtime's per-thread blocks,
    `presk_scratch`) or `malloc` (malloc'd and freed by each launch: no runtime library)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.spawn not in ("pool", "threads"):
            raise ValueError(f"spawn is `pool` or `threads`, not `{self.spawn}`")
        if self.scratch not in ("pool", "malloc"):
            raise ValueError(f"scratch is `pool` or `malloc`, not `{self.scratch}`")
        plan = ArenaPlan(op)
        # host copies join the pool when the runtime is there and the kernels split
        parts = threads_of(op) if self.scratch == "pool" and self.spawn == "pool" else 1
        offsets, calls = _layouts_as_hosts(op, plan)
        aliased = aliased_kernels(op)
        threads = spawners(op, kernel_symbol, self.spawn)
        _walk([KernelToFunc(aliased, self.scratch), HostToFunc()], op)
        op.body.block.add_ops(threads)
        lower_blocked_sums(op)
        collapse_elementwise_nests(op)
        _walk([ForToScf(), YieldToScf(), LoadToLLVM(), StoreToLLVM(), ScalarToArith(),
               LaunchToCall(), ArenaToPointers(offsets, calls),
               ElementwiseHostOps(parts), AtToGEP(), FoldToScf()], op)
        declare_external_callees(op)
