"""presk/emit/llvm.py: an llvm-dialect module built here by hand, in the calling convention
of presk/kernel_abi/calling.py, translated, optimized at O2, compiled and called.

The entries compute out[i] = a[i] * b[i] + c[i] in f32 over 1000 elements through an
internal helper kernel with `noalias` buffers (the helper must be inlined and gone, the
loop vectorized, no FMA formed), and out[i] = bf16(2 * bf16→f32(x[i])) in bf16 (as i16
bits: neither xDSL's translation nor llvmlite.ir knows bfloat); results must equal
numpy's bit for bit.
"""

from __future__ import annotations

import ctypes
from typing import Callable, Sequence

import numpy as np
import pytest
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (DictionaryAttr, Float32Type, IntegerAttr, ModuleOp,
                                   UnitAttr, i16, i32, i64)
from xdsl.ir import Attribute, Block, Region, SSAValue

from presk.analysis.kernel_interpret import bf16_round, bf16_to_f32
from presk.kernel_abi.calling import BufferSig, EntrySig, entry_symbol
from presk.emit import llvm as native

N = 1000
PTR = llvm.LLVMPointerType()
F32 = Float32Type()
BF16 = i16  # xDSL's translation has no bfloat (nor has llvmlite.ir): bf16 is its bits
Body = Callable[[Block, Sequence[SSAValue]], SSAValue]


def _const(block: Block, value: int) -> SSAValue:
    op = llvm.ConstantOp(IntegerAttr(value, i64), i64)
    block.add_op(op)
    return op.result


def _gep(block: Block, ptr: SSAValue, index: SSAValue, pointee: Attribute) -> SSAValue:
    op = llvm.GEPOp(ptr, [llvm.GEP_USE_SSA_VAL], pointee, ssa_indices=[index],
                    inbounds=True)
    block.add_op(op)
    return op.result


def loop_function(name: str, n: int, elements: Sequence[Attribute], body: Body,
                  noalias: bool) -> llvm.FuncOp:
    """`void name(ptr x0, …, ptr out)`: for i < n: out[i] = body(x0[i], …); the last
    element type is the output's. Internal linkage (the llvm dialect's default)."""
    entry = Block(arg_types=[PTR] * len(elements))
    header, loop, done = Block(arg_types=[i64]), Block(), Block()
    zero, one, limit = _const(entry, 0), _const(entry, 1), _const(entry, n)
    entry.add_op(llvm.BrOp(header, zero))
    i = header.args[0]
    cmp = llvm.ICmpOp(i, limit, IntegerAttr(2, i64))  # slt
    header.add_ops([cmp, llvm.CondBrOp(cmp, loop, [], done, [])])
    values = []
    for arg, t in zip(entry.args[:-1], elements[:-1]):
        load = llvm.LoadOp(_gep(loop, arg, i, t), t)
        loop.add_op(load)
        values.append(load.dereferenced_value)
    result = body(loop, values)
    loop.add_op(llvm.StoreOp(result, _gep(loop, entry.args[-1], i, elements[-1])))
    nxt = llvm.AddOp(i, one)
    loop.add_ops([nxt, llvm.BrOp(header, nxt)])
    done.add_op(llvm.ReturnOp(None))
    fn = llvm.FuncOp(name, llvm.LLVMFunctionType([PTR] * len(elements)),
                     body=Region([entry, header, loop, done]))
    if noalias:
        fn.arg_attrs = llvm.ArrayAttr(
            [DictionaryAttr({"llvm.noalias": UnitAttr()})] * len(elements))
    return fn


def entry_function(sig: EntrySig, callee: str) -> llvm.FuncOp:
    """`void presk_entry_<host>(void **argv, void *arena)`: loads argv[k] for every
    argument and calls `callee` with them."""
    block = Block(arg_types=[PTR, PTR])
    ptrs = []
    for k in range(len(sig.args)):
        load = llvm.LoadOp(_gep(block, block.args[0], _const(block, k), PTR), PTR)
        block.add_op(load)
        ptrs.append(load.dereferenced_value)
    block.add_ops([llvm.CallOp(callee, *ptrs), llvm.ReturnOp(None)])
    return llvm.FuncOp(sig.symbol, llvm.LLVMFunctionType([PTR, PTR]),
                       linkage=llvm.LinkageAttr("external"), body=Region(block))


def _madd(block: Block, v: Sequence[SSAValue]) -> SSAValue:
    mul = llvm.FMulOp(v[0], v[1])
    add = llvm.FAddOp(mul, v[2])
    block.add_ops([mul, add])
    return add.res


def _i32(block: Block, value: int) -> SSAValue:
    op = llvm.ConstantOp(IntegerAttr(value, i32), i32)
    block.add_op(op)
    return op.result


def bf16_widen(block: Block, bits: SSAValue) -> SSAValue:
    """bf16 bits (i16) → f32, exactly: the bits shifted into the upper half."""
    ext = llvm.ZExtOp(bits, i32)
    shl = llvm.ShlOp(ext.results[0], _i32(block, 16))
    f = llvm.BitcastOp(shl, F32)
    block.add_ops([ext, shl, f])
    return f.results[0]


def bf16_narrow(block: Block, x: SSAValue) -> SSAValue:
    """f32 → bf16 bits (i16), to nearest even by integer arithmetic; a NaN keeps its
    sign and upper payload and is quieted (as `bf16_round`)."""
    u = llvm.BitcastOp(x, i32)
    block.add_op(u)
    upper = llvm.LShrOp(u.results[0], _i32(block, 16))
    odd = llvm.AndOp(upper.results[0], _i32(block, 1))
    block.add_ops([upper, odd])
    biased = llvm.AddOp(u.results[0], _i32(block, 0x7FFF))
    plus = llvm.AddOp(biased.results[0], odd.results[0])
    block.add_ops([biased, plus])
    rounded = llvm.LShrOp(plus.results[0], _i32(block, 16))
    quiet = llvm.OrOp(upper.results[0], _i32(block, 0x40))
    nan = llvm.FCmpOp(x, x, "uno")
    pick = llvm.SelectOp(nan, quiet, rounded)
    bits = llvm.TruncOp(pick, i16)
    block.add_ops([rounded, quiet, nan, pick, bits])
    return bits.results[0]


def _twice_bf16(block: Block, v: Sequence[SSAValue]) -> SSAValue:
    wide = bf16_widen(block, v[0])
    add = llvm.FAddOp(wide, wide)
    block.add_op(add)
    return bf16_narrow(block, add.res)


def madd_sig(n: int = N) -> EntrySig:
    buf = [BufferSig(name, "f32", (n,)) for name in ("a", "b", "c")]
    return EntrySig("madd", entry_symbol("madd"), tuple(buf),
                    (BufferSig("out", "f32", (n,)),), 0)


def bf16_sig(n: int = N) -> EntrySig:
    return EntrySig("twice", entry_symbol("twice"), (BufferSig("x", "bf16", (n,)),),
                    (BufferSig("out", "bf16", (n,)),), 128)


def test_module(n: int = N) -> tuple[ModuleOp, list[EntrySig]]:
    """The llvm-dialect module of both entries and their EntrySigs."""
    sigs = [madd_sig(n), bf16_sig(n)]
    m = ModuleOp([
        loop_function("kernel_madd", n, [F32] * 4, _madd, noalias=True),
        entry_function(sigs[0], "kernel_madd"),
        loop_function("kernel_twice", n, [BF16, BF16], _twice_bf16, noalias=True),
        entry_function(sigs[1], "kernel_twice"),
    ])
    m.verify()
    return m, sigs


test_module.__test__ = False  # a builder, not a test


def madd_inputs(n: int = N, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(n).astype(np.float32) for _ in range(3)]


def bf16_input(n: int = N, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = bf16_round(rng.standard_normal(n).astype(np.float32) * 1e3)
    x[:4] = [0x7F7F, 0x0001, 0x8000, 0x7FC0]  # max finite (doubles to inf), subnormal, -0, NaN
    return x


def madd_expected(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return a * b + c  # float32, rounded after the multiply: no FMA


def call(jit: native.JitModule, sig: EntrySig, arrays: Sequence[np.ndarray]) -> None:
    """Calls an entry the plain way (no presk.runtime), with an arena of its size."""
    argv = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    arena = np.empty(max(sig.arena_bytes, 1), dtype=np.uint8)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(jit.address(sig.symbol))
    fn(ctypes.addressof(argv), arena.ctypes.data)


@pytest.fixture(scope="module")
def compiled() -> tuple[native.JitModule, list[EntrySig]]:
    m, sigs = test_module()
    return native.compile(native.llvm_ir(m, [s.symbol for s in sigs])), sigs


def test_madd_bits_equal_numpy(compiled) -> None:
    jit, sigs = compiled
    a, b, c = madd_inputs()
    out = np.full(N, np.nan, dtype=np.float32)
    call(jit, sigs[0], [a, b, c, out])
    assert np.array_equal(out.view(np.uint32), madd_expected(a, b, c).view(np.uint32))


def test_bf16_load_store_bits(compiled) -> None:
    jit, sigs = compiled
    x = bf16_input()
    out = np.zeros(N, dtype=np.uint16)
    call(jit, sigs[1], [x, out])
    with np.errstate(over="ignore"):
        want = bf16_round(bf16_to_f32(x) * np.float32(2))
    assert np.array_equal(out, want)


def test_linkage_inlining_and_noalias(compiled) -> None:
    jit, sigs = compiled
    ir = jit.optimized_ir
    assert ir is not None
    for s in sigs:
        assert f"@{s.symbol}(" in ir
        jit.address(s.symbol)
    # the internal kernels are inlined and deleted
    assert "@kernel_madd" not in ir and "@kernel_twice" not in ir
    with pytest.raises(native.NativeCompileError, match="kernel_madd"):
        jit.address("kernel_madd")
    # noalias buffers: the loop is vectorized without a runtime overlap check
    assert "x float>" in ir
    assert "memcheck" not in ir


def test_no_fused_multiply_add(compiled) -> None:
    jit, _ = compiled
    ir, asm = jit.optimized_ir, jit.asm()
    assert ir is not None and asm is not None
    assert "fma" not in ir and "fmuladd" not in ir and "contract" not in ir
    assert not any(w in asm.lower() for w in ("vfmadd", "vfmsub", "vfnmadd", "vfnmsub"))


def test_compile_from_object_bytes(compiled) -> None:
    jit, sigs = compiled
    again = native.compile(jit.object_code)
    assert again.optimized_ir is None and again.asm() is None
    a, b, c = madd_inputs(seed=3)
    out = np.empty(N, dtype=np.float32)
    call(again, sigs[0], [a, b, c, out])
    assert np.array_equal(out.view(np.uint32), madd_expected(a, b, c).view(np.uint32))


def test_fast_math_is_refused() -> None:
    def fast(block: Block, v: Sequence[SSAValue]) -> SSAValue:
        op = llvm.FAddOp(v[0], v[1], llvm.FastMathAttr([llvm.FastMathFlag.ALLOW_CONTRACT]))
        block.add_op(op)
        return op.res

    fn = loop_function("k", 4, [F32] * 3, fast, noalias=False)
    fn.linkage = llvm.LinkageAttr("external")
    with pytest.raises(native.NativeCompileError, match="contract"):
        native.llvm_ir(ModuleOp([fn]), ["k"])


def test_missing_entry_is_refused() -> None:
    m, _ = test_module(4)
    with pytest.raises(native.NativeCompileError, match="presk_entry_nope"):
        native.llvm_ir(m, ["presk_entry_nope"])


def test_garbage_object_code_is_refused() -> None:
    with pytest.raises(native.NativeCompileError):
        native.compile(b"\x7fELF not really")


def test_host_target() -> None:
    host = native.host_target()
    assert host.cpu and host.triple and host.data_layout
    assert native.host_target() is host


def test_avx512_hosts_vectorize_in_512_bits() -> None:
    """On an AVX-512 host the target drops LLVM's 256-bit preference (every lane computes
    the same IEEE operations, so no bits move); elsewhere the features are the host's, and
    a preference the features already state is left as it is."""
    assert native.widest_vectors("+avx2,+avx512f,+fma") == "+avx2,+avx512f,+fma,-prefer-256-bit"
    assert native.widest_vectors("+avx2,-avx512f,+fma") == "+avx2,-avx512f,+fma"
    assert native.widest_vectors("+avx512f,-prefer-256-bit") == "+avx512f,-prefer-256-bit"
    host = native.host_target()
    assert ("-prefer-256-bit" in host.features.split(",")) == \
        ("+avx512f" in host.features.split(","))
