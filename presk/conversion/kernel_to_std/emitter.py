"""The emitter of the native lowering: a small builder that inserts func/arith/llvm ops
before a point and returns their results (`Emitter`), with what every lowering of
PSK-Kernel shares: a buffer as a pointer, element addresses at row-major offsets, loads
and stores in the buffer's storage (bf16 as i16 bits, rounded to nearest even by bits),
loops, and the arith/math form of a kernel's scalar ops (`lower_scalar_op`).

convert-psk-kernel-to-std (convert.py), the register tiles (tile_contraction.py) and the
native optimizer updates (presk/train/native_optim.py) all build with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import arith, llvm, math, scf
from xdsl.dialects.builtin import (Float32Type, Float64Type, FloatAttr, IndexType,
    IntegerAttr, IntegerType, UnrealizedConversionCastOp, VectorType, i16, i32, i64)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from presk import ops
from presk.dialects import kernel as K
from presk.kernel_abi.calling import strides


PTR = llvm.LLVMPointerType()
INDEX = IndexType()


class NativeLoweringError(Exception):
    """A PSK-Kernel module the native lowering cannot take (a math function the library
    lacks, an element type it does not store)."""


def storage_type(t: K.BufferType) -> Attribute:
    """What one element of the buffer is in memory: f64, f32, or the bits of a bf16."""
    return i16 if K.type_name(t.element) == "bf16" else t.element


# --------------------------------------------------------------------------------------
# Emitting: a tiny builder that inserts before a point
# --------------------------------------------------------------------------------------


class Emitter:
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
        return self(llvm.GEPOp(self.ptr(buffer), [llvm.GEP_USE_SSA_VAL], storage_type(t),
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
        raw = self(llvm.LoadOp(self.element_ptr(buffer, offset), storage_type(t)))
        return self.bf16_to_f32(raw) if storage_type(t) == i16 else raw

    def store(self, value: SSAValue, buffer: SSAValue, offset: SSAValue) -> None:
        t = buffer.type
        assert isinstance(t, K.BufferType)
        if storage_type(t) == i16:
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

    def loop(self, n: int, body: Callable[[Emitter, SSAValue], None]) -> None:
        """for i in [0, n): body(emit-inside, i)."""
        block = Block(arg_types=[INDEX])
        self(scf.ForOp(self.index(0), self.index(n), self.index(1), [], Region(block)))
        block.add_op(scf.YieldOp())
        body(Emitter(self.rewriter, InsertPoint.before(block.last_op)), block.args[0])


def buffer_type_of(v: SSAValue) -> K.BufferType:
    assert isinstance(v.type, K.BufferType)
    return v.type


def as_buffer(e: Emitter, ptr: SSAValue, t: Attribute) -> SSAValue:
    return e(UnrealizedConversionCastOp.get([ptr], [t]))


def emit_before(op: Operation, rewriter: PatternRewriter) -> Emitter:
    return Emitter(rewriter, InsertPoint.before(op))


ARITH_OPS: dict[type, type] = {
    K.AddOp: arith.AddfOp, K.SubOp: arith.SubfOp, K.MulOp: arith.MulfOp,
    K.DivOp: arith.DivfOp,
}


def lower_scalar_op(e: Emitter, op: Operation, args: Sequence[SSAValue], t: Attribute
                    ) -> SSAValue:
    """The arith/llvm form of a kernel's scalar op on lowered operands `args` of type `t`
    (a scalar type, or for + − × ÷, fma, min, max and negation a vector of it)."""
    if type(op) in ARITH_OPS:
        return e(ARITH_OPS[type(op)](args[0], args[1]))
    if isinstance(op, (K.MinOp, K.MaxOp)):
        a, b = args
        # numpy: (a < b or a is NaN) ? a : b  — NaN from either side, ties give b.
        better = e(arith.CmpfOp(a, b, "olt" if isinstance(op, K.MinOp) else "ogt"))
        take_a = e(arith.OrIOp(better, e(arith.CmpfOp(a, a, "uno"))))
        return e(arith.SelectOp(take_a, a, b))
    if isinstance(op, K.NegOp):
        return e(arith.NegfOp(args[0]))
    if isinstance(op, K.FmaOp):
        return e(llvm.CallIntrinsicOp(f"llvm.fma.{_mangled(t)}", list(args), [t]))
    if isinstance(op, K.CastOp):
        to = op.result.type
        return e(arith.ExtFOp(args[0], to) if isinstance(to, Float64Type)
                 else arith.TruncFOp(args[0], to))
    if isinstance(op, K.ConstantOp):
        return e.float(op.number, op.result.type)
    if isinstance(op, K.MathOp):
        return _math(e, op.fn.data, list(args), op.result.type)
    raise NativeLoweringError(f"{op.name} is not a scalar op of a kernel")


def _mangled(t: Attribute) -> str:
    """LLVM's overload suffix of a float type or vector: `f32`, `v16f32`."""
    if isinstance(t, VectorType):
        return f"v{t.get_shape()[0]}{_mangled(t.element_type)}"
    return "f64" if isinstance(t, Float64Type) else "f32"


# the table's functions the `math` dialect has (presk/ops: a row's `math_op`)
_MATH_OPS: dict[str, type[Operation]] = {
    f.name: getattr(math, f.compute.math_op) for f in ops.ROWS
    if isinstance(f.compute, (ops.Exact, ops.Library)) and f.compute.math_op is not None}


def _math(e: Emitter, fn: str, args: list[SSAValue], t: Attribute) -> SSAValue:
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


def _heaviside(e: Emitter, x: SSAValue, h: SSAValue) -> SSAValue:
    """1 where x > 0, 0 where x < 0, h where x = 0, and numpy's canonical quiet NaN (+, no
    payload) where x is any NaN, as np.heaviside."""
    t = x.type
    one, zero = e.float(1.0, t), e.float(0.0, t)
    at_zero = e(arith.SelectOp(e(arith.CmpfOp(x, x, "uno")), e.float(float("nan"), t), h))
    neg = e(arith.SelectOp(e(arith.CmpfOp(x, zero, "olt")), zero, at_zero))
    return e(arith.SelectOp(e(arith.CmpfOp(x, zero, "ogt")), one, neg))
