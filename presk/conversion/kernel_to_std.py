"""convert-psk-kernel-to-std: PSK-Kernel → func/scf/arith and the `llvm` dialect's pointers.

After this pass and `STD_TO_LLVM_PIPELINE` (presk/conversion/std_to_llvm) a module is pure
`llvm` dialect, which `xdsl.backend.llvm.convert_module` translates. The calling convention
it implements is presk/conversion/native_abi.py.

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
  in f32 first, so that the bf16 rounding is a single correct one); `at` is a GEP;
  `launch`/`call` are `func.call`s; `fold` is an `scf.for` carrying the accumulator's
  pointer, its destination alternating between the two scratch buffers.
* A kernel whose layout is `tiled` (a contraction) runs in register tiles:
  presk/conversion/tile_contraction.py, called from the kernel's rewrite; one whose layout
  has `split = [0, n]` runs on n threads: presk/conversion/split_kernel.py, first.
* Each host marked `entry` gets `presk_entry_H(argv, arena)`, which loads the buffer
  pointers from `argv` and calls the host.
* The functions the module calls and does not define are declared (the math library's,
  `malloc`/`free` for a tile's packed operand, `pthread_create`/`pthread_join`).

`entry_signatures(module)` (the PSK-Kernel module, before the pass) describes those
entries for the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func, llvm, math, scf
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    UnitAttr,
    UnrealizedConversionCastOp,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint

from presk import ops
from presk.conversion.native_abi import ARENA_ALIGN, BufferSig, EntrySig, entry_symbol
from presk.conversion.std_to_llvm.callees import declare_external_callees
from presk.dialects import kernel as K

PTR = llvm.LLVMPointerType()
INDEX = IndexType()


class NativeLoweringError(Exception):
    """A PSK-Kernel module the native lowering cannot take (a math function the library
    lacks, an element type it does not store)."""


def kernel_symbol(name: str) -> str:
    return f"presk_kernel_{name}"


def host_symbol(name: str) -> str:
    return f"presk_host_{name}"


def _storage_type(t: K.BufferType) -> Attribute:
    """What one element of the buffer is in memory: f64, f32, or the bits of a bf16."""
    return i16 if K.type_name(t.element) == "bf16" else t.element


def strides(shape: Sequence[int]) -> list[int]:
    """Row-major strides in elements (the last axis contiguous)."""
    out, n = [], 1
    for s in reversed(shape):
        out.append(n)
        n *= s
    return out[::-1]


def _align(n: int) -> int:
    return -(-n // ARENA_ALIGN) * ARENA_ALIGN


# --------------------------------------------------------------------------------------
# Emitting: a tiny builder that inserts before a point
# --------------------------------------------------------------------------------------


class _Emit:
    """Insert ops before `at`, returning their single results."""

    def __init__(self, rewriter: PatternRewriter, at: InsertPoint):
        self.rewriter = rewriter
        self.at = at

    def __call__(self, op: Operation) -> SSAValue:
        self.rewriter.insert(op, self.at)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def index(self, n: int) -> SSAValue:
        return self(arith.ConstantOp(IntegerAttr(n, INDEX)))

    def int(self, n: int, t: IntegerType) -> SSAValue:
        return self(arith.ConstantOp(IntegerAttr(n, t)))

    def float(self, x: float, t: Attribute) -> SSAValue:
        if isinstance(t, Float32Type):
            x = float(np.float32(x))
        return self(arith.ConstantOp(FloatAttr(x, t)))

    def ptr(self, buffer: SSAValue) -> SSAValue:
        """The pointer a buffer value stands for."""
        owner = buffer.owner
        if isinstance(owner, UnrealizedConversionCastOp) and owner.inputs[0].type == PTR:
            return owner.inputs[0]
        return self(UnrealizedConversionCastOp.get([buffer], [PTR]))

    def element_ptr(self, buffer: SSAValue, offset: SSAValue) -> SSAValue:
        """The address of element `offset` (an index) of `buffer`."""
        t = buffer.type
        assert isinstance(t, K.BufferType)
        off = self(arith.IndexCastOp(offset, i64))
        return self(llvm.GEPOp(self.ptr(buffer), [llvm.GEP_USE_SSA_VAL], _storage_type(t),
                               ssa_indices=[off], inbounds=True))

    def flat(self, buffer_type: K.BufferType, indices: Sequence[SSAValue]) -> SSAValue:
        """Σ index·stride, row-major."""
        total: SSAValue | None = None
        for i, stride in zip(indices, strides(buffer_type.shape)):
            term = i if stride == 1 else self(arith.MuliOp(i, self.index(stride)))
            total = term if total is None else self(arith.AddiOp(total, term))
        return total if total is not None else self.index(0)

    # ---- loads and stores in the buffer's storage ----
    def load(self, buffer: SSAValue, offset: SSAValue) -> SSAValue:
        """Element `offset` of `buffer` as its compute type (bf16 widened to f32)."""
        t = buffer.type
        assert isinstance(t, K.BufferType)
        raw = self(llvm.LoadOp(self.element_ptr(buffer, offset), _storage_type(t)))
        return self.bf16_to_f32(raw) if _storage_type(t) == i16 else raw

    def store(self, value: SSAValue, buffer: SSAValue, offset: SSAValue) -> None:
        t = buffer.type
        assert isinstance(t, K.BufferType)
        if _storage_type(t) == i16:
            value = self.f32_to_bf16(value)
        self(llvm.StoreOp(value, self.element_ptr(buffer, offset)))

    def bf16_to_f32(self, bits: SSAValue) -> SSAValue:
        wide = self(arith.ExtUIOp(bits, i32))
        return self(arith.BitcastOp(self(arith.ShLIOp(wide, self.int(16, i32))),
                                    Float32Type()))

    def f32_to_bf16(self, x: SSAValue) -> SSAValue:
        """Round to nearest even by bits; a NaN stays a quiet NaN with its sign."""
        u = self(arith.BitcastOp(x, i32))
        upper = self(arith.ShRUIOp(u, self.int(16, i32)))
        odd = self(arith.AndIOp(upper, self.int(1, i32)))
        biased = self(arith.AddiOp(self(arith.AddiOp(u, self.int(0x7FFF, i32))), odd))
        rounded = self(arith.ShRUIOp(biased, self.int(16, i32)))
        nan = self(arith.CmpfOp(x, x, "uno"))
        quiet = self(arith.OrIOp(upper, self.int(0x40, i32)))
        return self(arith.TruncIOp(self(arith.SelectOp(nan, quiet, rounded)), i16))

    def f64_to_f32_odd(self, x: SSAValue) -> SSAValue:
        """f64 → f32 rounded to odd (an inexact result truncated toward zero with its last
        bit set): rounding that to bf16 is the correct rounding of x."""
        t = self(arith.TruncFOp(x, Float32Type()))
        back = self(arith.ExtFOp(t, Float64Type()))
        finite = self(arith.CmpfOp(self(arith.SubfOp(x, x)), self.float(0.0, x.type), "oeq"))
        inexact = self(arith.AndIOp(self(arith.CmpfOp(back, x, "une")), finite))
        fabs = lambda v: self(llvm.CallIntrinsicOp("llvm.fabs.f64", [v], [v.type]))  # noqa: E731
        away = self(arith.CmpfOp(fabs(back), fabs(x), "ogt"))
        bits = self(arith.BitcastOp(t, i32))
        toward_zero = self(arith.SelectOp(away, self(arith.SubiOp(bits, self.int(1, i32))),
                                          bits))
        odd = self(arith.OrIOp(toward_zero, self.int(1, i32)))
        return self(arith.BitcastOp(self(arith.SelectOp(inexact, odd, bits)), Float32Type()))

    def loop(self, n: int, body: Callable[[_Emit, SSAValue], None]) -> None:
        """for i in [0, n): body(emit-inside, i)."""
        block = Block(arg_types=[INDEX])
        self(scf.ForOp(self.index(0), self.index(n), self.index(1), [], Region(block)))
        block.add_op(scf.YieldOp())
        body(_Emit(self.rewriter, InsertPoint.before(block.last_op)), block.args[0])


def _buffer(v: SSAValue) -> K.BufferType:
    assert isinstance(v.type, K.BufferType)
    return v.type


def _as_buffer(e: _Emit, ptr: SSAValue, t: Attribute) -> SSAValue:
    return e(UnrealizedConversionCastOp.get([ptr], [t]))


# --------------------------------------------------------------------------------------
# Phase 1: kernels and hosts become functions over pointers
# --------------------------------------------------------------------------------------


def _function(op: K.KernelOp | K.HostOp, symbol: str, arena: bool,
              arg_attrs: ArrayAttr | None, rewriter: PatternRewriter) -> func.FuncOp:
    types = [PTR] * (len(op.args) + arena)
    block = Block(arg_types=types)
    new = func.FuncOp(symbol, (types, []), Region(block), "private", arg_attrs=arg_attrs)
    e = _Emit(rewriter, InsertPoint.at_end(block))
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

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.KernelOp, rewriter: PatternRewriter, /):
        from presk.conversion.tile_contraction import tile_kernel
        name = op.sym_name.data
        attrs = None
        if name not in self.aliased:
            attrs = ArrayAttr([DictionaryAttr({"llvm.noalias": UnitAttr()})] * len(op.args))
        new = _function(op, kernel_symbol(name), False, attrs, rewriter)
        if op.layout.kind.data == "tiled":
            tile_kernel(new.body.block, op.layout, rewriter)
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


def _emit(op: Operation, rewriter: PatternRewriter) -> _Emit:
    return _Emit(rewriter, InsertPoint.before(op))


class ForToScf(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.ForOp, rewriter: PatternRewriter, /):
        e = _emit(op, rewriter)
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
        e = _emit(op, rewriter)
        value = e.load(op.buffer, e.flat(_buffer(op.buffer), list(op.indices)))
        rewriter.replace(op, [], [value])


class StoreToLLVM(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.StoreOp, rewriter: PatternRewriter, /):
        e = _emit(op, rewriter)
        e.store(op.value, op.buffer, e.flat(_buffer(op.buffer), list(op.indices)))
        rewriter.erase(op)


_ARITH: dict[type, type] = {
    K.AddOp: arith.AddfOp, K.SubOp: arith.SubfOp, K.MulOp: arith.MulfOp,
    K.DivOp: arith.DivfOp,
}


def lower_scalar_op(e: _Emit, op: Operation, args: Sequence[SSAValue], t: Attribute
                    ) -> SSAValue:
    """The arith/llvm form of a kernel's scalar op on lowered operands `args` of type `t`
    (a scalar type, or for + − × ÷, min, max and negation a vector of it)."""
    if type(op) in _ARITH:
        return e(_ARITH[type(op)](args[0], args[1]))
    if isinstance(op, (K.MinOp, K.MaxOp)):
        a, b = args
        # numpy: (a < b or a is NaN) ? a : b  — NaN from either side, ties give b.
        better = e(arith.CmpfOp(a, b, "olt" if isinstance(op, K.MinOp) else "ogt"))
        take_a = e(arith.OrIOp(better, e(arith.CmpfOp(a, a, "uno"))))
        return e(arith.SelectOp(take_a, a, b))
    if isinstance(op, K.NegOp):
        return e(arith.NegfOp(args[0]))
    if isinstance(op, K.CastOp):
        to = op.result.type
        return e(arith.ExtFOp(args[0], to) if isinstance(to, Float64Type)
                 else arith.TruncFOp(args[0], to))
    if isinstance(op, K.ConstantOp):
        return e.float(op.number, op.result.type)
    if isinstance(op, K.MathOp):
        return _math(e, op.fn.data, list(args), op.result.type)
    raise NativeLoweringError(f"{op.name} is not a scalar op of a kernel")


_SCALAR_OPS = (*_ARITH, K.MinOp, K.MaxOp, K.NegOp, K.CastOp, K.ConstantOp, K.MathOp)


class ScalarToArith(RewritePattern):
    """+ − × ÷, negation, min and max, casts, constants and math functions."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if not isinstance(op, _SCALAR_OPS):
            return
        t = op.operands[0].type if op.operands else op.results[0].type
        rewriter.replace(op, [], [lower_scalar_op(_emit(op, rewriter), op, op.operands, t)])


# the table's functions the `math` dialect has (presk/ops: a row's `math_op`)
_MATH_OPS: dict[str, type[Operation]] = {
    f.name: getattr(math, f.compute.math_op) for f in ops.ROWS
    if isinstance(f.compute, (ops.Exact, ops.Library)) and f.compute.math_op is not None}


def _math(e: _Emit, fn: str, args: list[SSAValue], t: Attribute) -> SSAValue:
    """A math function: an op of the `math` dialect (convert-math-to-llvm makes it a call
    of the one math library, or an exact intrinsic), selects (heaviside), or a call of the
    library's functions that `math` lacks (softplus)."""
    from presk.emit import mathlib  # the list of functions only
    ty = K.type_name(t)
    if fn in _MATH_OPS:
        return e(_MATH_OPS[fn](*args))
    if fn == "heaviside":
        return _heaviside(e, args[0], args[1])
    if fn in mathlib.FUNCTIONS:
        return e(llvm.CallOp(f"presk_{fn}_{ty}", *args, return_type=t))
    raise NativeLoweringError(f"the math library has no `{fn}` ({ty})")


def _heaviside(e: _Emit, x: SSAValue, h: SSAValue) -> SSAValue:
    """1 where x > 0, 0 where x < 0, h where x = 0, and numpy's canonical quiet NaN (+, no
    payload) where x is any NaN, as np.heaviside."""
    t = x.type
    one, zero = e.float(1.0, t), e.float(0.0, t)
    at_zero = e(arith.SelectOp(e(arith.CmpfOp(x, x, "uno")), e.float(float("nan"), t), h))
    neg = e(arith.SelectOp(e(arith.CmpfOp(x, zero, "olt")), zero, at_zero))
    return e(arith.SelectOp(e(arith.CmpfOp(x, zero, "ogt")), one, neg))


# --------------------------------------------------------------------------------------
# Phase 2: the host's ops
# --------------------------------------------------------------------------------------


def _arena(op: Operation) -> SSAValue:
    f = op.parent_op()
    while not isinstance(f, func.FuncOp):
        assert f is not None, "a host op outside a host"
        f = f.parent_op()
    return f.body.block.args[-1]


def _arena_at(e: _Emit, op: Operation, offset: int) -> SSAValue:
    """The arena pointer `offset` bytes on. The offset is an i64 operand: a GEP's
    constant indices are i32, and an arena past 2 GiB (a large batch) would wrap."""
    arena = _arena(op)
    if offset == 0:
        return arena
    return e(llvm.GEPOp(arena, [llvm.GEP_USE_SSA_VAL], IntegerType(8),
                        ssa_indices=[e.int(offset, i64)], inbounds=True))


@dataclass
class ArenaToPointers(RewritePattern):
    """`alloc` at its fixed offset; `mark` and `release` vanish; a `call` hands its
    callee the arena past the live buffers."""

    offsets: dict[Operation, int]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        if isinstance(op, K.ReleaseOp):
            mark = op.mark.owner
            rewriter.erase(op)
            if isinstance(mark, K.MarkOp) and not mark.result.uses:
                rewriter.erase(mark)
        elif isinstance(op, K.MarkOp) and not op.result.uses:
            rewriter.erase(op)
        elif isinstance(op, K.AllocOp):
            e = _emit(op, rewriter)
            p = _arena_at(e, op, self.offsets[op])
            rewriter.replace(op, [], [_as_buffer(e, p, op.result.type)])
        elif isinstance(op, K.CallOp):
            e = _emit(op, rewriter)
            args = [e.ptr(a) for a in op.arguments] + [_arena_at(e, op, self.offsets[op])]
            rewriter.replace(op, func.CallOp(host_symbol(op.callee_name), args, []))


class LaunchToCall(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.LaunchOp, rewriter: PatternRewriter, /):
        e = _emit(op, rewriter)
        args = [e.ptr(a) for a in op.arguments]
        rewriter.replace(op, func.CallOp(kernel_symbol(op.callee_name), args, []))


class ElementwiseHostOps(RewritePattern):
    """`convert`, `copy` and `fill`: one loop over the flat elements."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter, /):
        e = _emit(op, rewriter)
        if isinstance(op, K.ConvertOp):
            src, dst = op.source, op.dest
            e.loop(_buffer(dst).size,
                   lambda b, i: b.store(_converted(b, b.load(src, i), _buffer(src),
                                                   _buffer(dst)), dst, i))
        elif isinstance(op, K.CopyOp):
            src, dst = op.source, op.dest
            t = _storage_type(_buffer(dst))
            e.loop(_buffer(dst).size, lambda b, i: b(llvm.StoreOp(
                b(llvm.LoadOp(b.element_ptr(src, i), t)), b.element_ptr(dst, i))))
        elif isinstance(op, K.FillOp):
            dst = op.dest
            e.loop(_buffer(dst).size, lambda b, i: b(llvm.StoreOp(
                _fill_constant(b, op.number, _buffer(dst)), b.element_ptr(dst, i))))
        else:
            return
        rewriter.erase(op)


def _converted(e: _Emit, x: SSAValue, src: K.BufferType, dst: K.BufferType) -> SSAValue:
    """x (src's compute type) into dst's compute type, rounding once to nearest even."""
    s, d = K.type_name(src.element), K.type_name(dst.element)
    if d == "f64":
        return x if isinstance(x.type, Float64Type) else e(arith.ExtFOp(x, Float64Type()))
    if d == "f32":
        return e(arith.TruncFOp(x, Float32Type())) if s == "f64" else x
    # bf16: the store rounds an f32 to nearest even; from f64, f32 rounded to odd first.
    return e.f64_to_f32_odd(x) if s == "f64" else x


def _fill_constant(e: _Emit, value: float, t: K.BufferType) -> SSAValue:
    from presk.analysis.kernel_interpret import element_name, to_storage
    stored = to_storage(np.array(value), element_name(t.element))
    if stored.dtype == np.uint16:
        return e.int(int(stored), i16)
    return e.float(float(stored), t.element)


class AtToGEP(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.AtOp, rewriter: PatternRewriter, /):
        e = _emit(op, rewriter)
        inner = op.result.type.size  # type: ignore[attr-defined]
        index = op.dynamic[0] if op.dynamic else e.index(op.index.data)  # type: ignore[union-attr]
        offset = e(arith.MuliOp(index, e.index(inner)))
        p = e.element_ptr(op.source, offset)
        rewriter.replace(op, [], [_as_buffer(e, p, op.result.type)])


class FoldToScf(RewritePattern):
    """`fold` → `scf.for` over [lower, upper) carrying the accumulator's pointer; iteration
    l writes scratch (l − lower) mod 2."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: K.FoldOp, rewriter: PatternRewriter, /):
        e = _emit(op, rewriter)
        t = op.result.type
        s0, s1, init = e.ptr(op.scratch0), e.ptr(op.scratch1), e.ptr(op.init)
        block = Block(arg_types=[INDEX, PTR])
        loop = scf.ForOp(e.index(op.lower.data), e.index(op.upper.data), e.index(1),
                         [init], Region(block))
        rewriter.insert(loop, InsertPoint.before(op))
        b = _Emit(rewriter, InsertPoint.at_end(block))
        l, acc = block.args
        step = b(arith.SubiOp(l, b.index(op.lower.data)))
        even = b(arith.CmpiOp(b(arith.AndIOp(step, b.index(1))), b.index(0), "eq"))
        dest = b(arith.SelectOp(even, s0, s1))
        values = [l, _as_buffer(b, acc, t), _as_buffer(b, dest, t)]
        _move_body(op.body.block, block, values)
        block.add_op(scf.YieldOp(dest))
        rewriter.replace(op, [], [_as_buffer(e, loop.results[0], t)])


# --------------------------------------------------------------------------------------
# The arena, planned statically
# --------------------------------------------------------------------------------------


class ArenaPlan:
    """Where each `alloc` lives in its host's arena and where each `call`'s callee
    starts; `peak[host]` the bytes a host needs, its callees' included: the buffers placed
    by their lives (presk/kernel_abi/placement.py), not a stack of frames. A host the
    entry does not reach is placed from a run of its own."""

    def __init__(self, module: ModuleOp):
        from presk.kernel_abi.lives import record_host
        from presk.kernel_abi.placement import place
        self.hosts = K.hosts(module)
        self.offsets: dict[Operation, int] = {}
        self.peak: dict[str, int] = {}
        order = sorted(self.hosts.values(), key=lambda h: h.entry is None)
        for host in order:
            if host.sym_name.data not in self.peak:
                plan = place(record_host(module, host))
                for name, need in plan.need.items():
                    self.peak.setdefault(name, need)
                for op, offset in plan.offsets.items():
                    self.offsets.setdefault(op, offset)
        for host in self.hosts.values():  # an alloc or call no run reaches (a fold of none)
            for op in K.host_ops(host):
                if isinstance(op, (K.AllocOp, K.CallOp)):
                    self.offsets.setdefault(op, 0)


def aliased_kernels(module: ModuleOp) -> frozenset[str]:
    """Kernels some launch passes one buffer as an output and as another argument: their
    pointers may not be `noalias`."""
    out = set()
    for op in module.walk():
        if isinstance(op, K.LaunchOp):
            kernel = op.target()
            n_in = len(kernel.input_args)
            args = list(op.arguments)
            for j in range(n_in, len(args)):
                if any(args[j] is a for i, a in enumerate(args) if i != j):
                    out.add(op.callee_name)
    return frozenset(out)


def entry_signatures(module: ModuleOp) -> list[EntrySig]:
    """The entries the lowered module exports, for the runtime."""
    plan = ArenaPlan(module)
    sigs = []
    for name, host in plan.hosts.items():
        if host.entry is None:
            continue
        bufs = [BufferSig(n, K.type_name(a.type.element), a.type.shape)  # type: ignore
                for n, a in zip(host.arg_name_list, host.args)]
        n_in = len(host.input_args)
        sigs.append(EntrySig(name, entry_symbol(name), tuple(bufs[:n_in]), tuple(bufs[n_in:]),
                             _align(plan.peak[name])))
    return sigs


# --------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------


def _walk(patterns: list[RewritePattern], module: ModuleOp) -> None:
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns),
                         apply_recursively=False).rewrite_module(module)


@dataclass(frozen=True)
class ConvertKernelToStdPass(ModulePass):
    """PSK-Kernel → func, scf, arith and llvm pointers (see the module's docstring)."""

    name = "convert-psk-kernel-to-std"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from presk.conversion.split_kernel import split_kernels
        plan = ArenaPlan(op)
        aliased = set(aliased_kernels(op))
        spawners = split_kernels(op, kernel_symbol, aliased)
        _walk([KernelToFunc(frozenset(aliased)), HostToFunc()], op)
        op.body.block.add_ops(spawners)
        _walk([ForToScf(), YieldToScf(), LoadToLLVM(), StoreToLLVM(), ScalarToArith(),
               LaunchToCall(), ArenaToPointers(plan.offsets),
               ElementwiseHostOps(), AtToGEP(), FoldToScf()], op)
        declare_external_callees(op)
