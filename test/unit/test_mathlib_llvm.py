"""The mathlib's LLVM emitter computes the same bits as its numpy evaluator.

Every function in f32 and f64 is emitted by `mathlib_llvm.to_llvm` (xDSL llvm dialect),
compiled by presk/emit/llvm.py (`convert_module`, O2 for the host CPU by llvmlite's new
pass manager, object code loaded by MCJIT) and called through ctypes on the
mathlib test's points; every result must have the bits of `mathlib.evaluate`. Each function
is reached through a wrapper `void w(T *x, T *y) { *y = f(*x); }` so that the argument and
the result never pass through a Python float (which would quiet signalling NaNs), and
directly as `T f(T)` on the non-NaN points. The optimized IR must hold no fma/fmuladd,
the host assembly no fused multiply-add instruction. pow takes two arguments: its wrapper
is `void w(T *x, T *y, T *r) { *r = pow(*x, *y); }`, its points the mathlib test's
`pow_points` (about 5 400 pairs here).
"""

from __future__ import annotations

import ctypes
import platform
import re
from functools import lru_cache

import numpy as np
import pytest

from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.ir import Block, Region

from presk.emit import llvm as native
from presk.emit import mathlib
from presk.emit.mathlib_llvm import (PERMUTES, _Cases, _forms, declare_all, has_wide_pick, symbol,
                                     to_llvm, vector_symbol)
from presk.emit.wide_loops import PARTS
from test_mathlib import arguments

CASES = [(f, t) for f in mathlib.FUNCTIONS for t in mathlib.TYPES]
N_PER_PART = 1000  # points(fn, ty, 1000): about 4 000 points per function and type


def _wrapper(fn: str, ty: str) -> llvm.FuncOp:
    """`void wrap_<fn>_<ty>(T *x0, …, T *y) { *y = f(*x0, …); }`."""
    n = mathlib.arity(fn)
    F = llvm.LLVMFunctionType([llvm.LLVMPointerType()] * (n + 1))
    T = to_llvm(fn, ty).function_type.output
    block = Block(arg_types=[llvm.LLVMPointerType()] * (n + 1))
    xs = [llvm.LoadOp(block.args[i], T) for i in range(n)]
    y = llvm.CallOp(symbol(fn, ty), *xs, return_type=T)
    block.add_ops([*xs, y, llvm.StoreOp(y, block.args[n]), llvm.ReturnOp(None)])
    return llvm.FuncOp(f"wrap_{fn}_{ty}", F, linkage=llvm.LinkageAttr("external"),
                       body=Region(block))


def module() -> ModuleOp:
    m = ModuleOp([_wrapper(fn, ty) for fn, ty in CASES])
    added = declare_all(m)  # finds the callees
    assert sorted(added) == sorted(symbol(fn, ty) for fn, ty in CASES)
    assert declare_all(m) == []  # idempotent
    m.verify()
    return m


@lru_cache(maxsize=1)
def jit() -> tuple[native.JitModule, str, str]:
    """(loaded module, optimized LLVM IR text, host assembly) of all functions and
    wrappers, compiled by presk/emit/llvm.py."""
    entries = [f"wrap_{fn}_{ty}" for fn, ty in CASES] + [symbol(fn, ty) for fn, ty in CASES]
    code = native.compile(native.llvm_ir(module(), entries))
    ir, asm = code.optimized_ir, code.asm()
    assert ir is not None and asm is not None
    return code, ir, asm


def _ctype(ty: str):
    return ctypes.c_float if ty == "f32" else ctypes.c_double


def test_one_instruction_per_op_and_no_fast_math():
    for fn, ty in CASES:
        f = to_llvm(fn, ty)
        p = mathlib.program(fn, ty)
        counts = {}
        for ins in p.instrs:
            counts[ins.op] = counts.get(ins.op, 0) + 1
        ops = list(f.body.walk())
        n_float = sum(isinstance(o, (llvm.FAddOp, llvm.FSubOp, llvm.FMulOp, llvm.FDivOp))
                      for o in ops)
        # pow2's conversion to an integer adds one exact fadd (1.5·2^mbits) of its own
        assert n_float == sum(counts.get(k, 0) for k in ("add", "sub", "mul", "div")) + \
            counts.get("pow2", 0)
        assert sum(isinstance(o, llvm.FCmpOp) for o in ops) == sum(
            counts.get(k, 0) for k in ("lt", "le", "gt", "ge", "eq", "ne")) + 2 * counts.get(
            "pow2", 0)
        for o in ops:
            fm = getattr(o, "fastmathFlags", None)
            assert fm is None or not fm.data, (fn, ty, o.name)
        assert f.sym_name.data == f"presk_{fn}_{ty}"
        assert f.linkage.linkage.data == "external"


def test_optimized_ir_and_machine_code_have_no_fma():
    _, ir, asm = jit()
    assert "fma" not in ir and "fmuladd" not in ir
    # nor does the backend fuse (no contract flags; the host may well have FMA)
    assert not any(w in asm.lower() for w in ("vfmadd", "vfmsub", "vfnmadd", "vfnmsub"))
    for fn, ty in CASES:
        assert f"@{symbol(fn, ty)}(" in ir


@pytest.mark.parametrize("fn,ty", CASES)
def test_native_computes_the_same_bits_as_evaluate(fn: str, ty: str) -> None:
    code, _, _ = jit()
    ti = mathlib.TI[ty]
    xs = arguments(fn, ty, N_PER_PART)
    # signalling NaNs and NaN payloads of both signs, too (for pow: in either argument,
    # with 2 and with 1 in the other: pow(1, NaN) is 1)
    nan_bits = (np.array([0x7FA00001, 0xFFC12345, 0x7F800001, 0xFFFFFFFF], dtype=np.uint32)
                if ty == "f32" else
                np.array([0x7FF4000000000001, 0xFFF8123456789ABC, 0x7FF0000000000001,
                          0xFFFFFFFFFFFFFFFF], dtype=np.uint64)).view(ti.dtype)
    if len(xs) == 1:
        xs = (np.concatenate([xs[0], nan_bits]),)
    else:
        other = np.array([2, 2, 2, 2, 1, 1, 1, 1], dtype=ti.dtype)
        both = np.concatenate([nan_bits, nan_bits])
        xs = (np.concatenate([xs[0], both, other]), np.concatenate([xs[1], other, both]))
    x = xs[0]
    assert len(x) > 3000
    want = mathlib.evaluate(fn, ty, *xs)

    ct = _ctype(ty)
    n = len(xs)
    wrap = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * (n + 1))(
        code.address(f"wrap_{fn}_{ty}"))
    got = np.zeros_like(x)
    size = x.itemsize
    addrs, ga = [a.ctypes.data for a in xs], got.ctypes.data
    for i in range(len(x)):
        wrap(*(a + i * size for a in addrs), ga + i * size)
    differ = want.view(ti.uint) != got.view(ti.uint)
    assert not differ.any(), (fn, ty, [a[differ][:5] for a in xs], want[differ][:5],
                              got[differ][:5])

    # the scalar entry point itself, on the points a Python float carries exactly
    direct = ctypes.CFUNCTYPE(ct, *[ct] * n)(code.address(symbol(fn, ty)))
    ok = ~np.any([np.isnan(a) for a in xs], axis=0)
    got2 = np.array([direct(*(float(a[i]) for a in xs)) for i in np.flatnonzero(ok)],
                    dtype=ti.dtype)
    w2 = want[ok]
    same = (w2.view(ti.uint) == got2.view(ti.uint)) | (np.isnan(w2) & np.isnan(got2))
    assert same.all(), (fn, ty, [a[ok][~same][:5] for a in xs], w2[~same][:5],
                        got2[~same][:5])


@pytest.mark.parametrize("ty", mathlib.TYPES)
def test_pow2_truncates_as_evaluate_and_c(ty: str) -> None:
    """pow2's conversion to an integer (llvm.trunc, an exact add of 1.5·2^mbits, the
    bits less the constant's: it vectorizes, llvm.fptosi.sat did not) gives evaluate's
    bits on every k: integers across and past [emin, emax], halves and other
    non-integers of both signs (truncated toward zero, as C's cast), ±0, ±inf, NaN."""
    ti = mathlib.TI[ty]
    b = mathlib.Builder("pow2probe", ty)
    p = b.p
    p.result = b.pow2(b.x).i
    whole = np.arange(ti.emin - 40, ti.emax + 40, dtype=np.float64)
    ks = np.concatenate([whole, whole + 0.5, whole - 0.25, whole + 0.999,
                         [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(ti.dtype)
    want = mathlib.evaluate(p, ty, ks)
    m = ModuleOp([to_llvm(p, ty)])
    code = native.compile(native.llvm_ir(m, [symbol("pow2probe", ty)]))
    ct = _ctype(ty)
    f = ctypes.CFUNCTYPE(ct, ct)(code.address(symbol("pow2probe", ty)))
    got = np.array([f(float(k)) for k in ks], dtype=ti.dtype)
    assert (got.view(ti.uint) == want.view(ti.uint)).all(), ks[got != want][:5]


WIDE = [(f, t) for f, t in CASES if has_wide_pick(f, t)]


def _vector_wrapper(fn: str, ty: str, lanes: int) -> llvm.FuncOp:
    """`void wrapv_<fn>_<ty>(<lanes x T> *x, <lanes x T> *y) { *y = f_v(*x); }`."""
    V = VectorType(to_llvm(fn, ty).function_type.output, [lanes])
    block = Block(arg_types=[llvm.LLVMPointerType()] * 2)
    x = llvm.LoadOp(block.args[0], V, alignment=4)  # numpy's arrays: not on 64 bytes
    y = llvm.CallOp(vector_symbol(fn, ty, lanes), x, return_type=V)
    block.add_ops([x, y, llvm.StoreOp(y, block.args[1], alignment=4), llvm.ReturnOp(None)])
    return llvm.FuncOp(f"wrapv_{fn}_{ty}", llvm.LLVMFunctionType([llvm.LLVMPointerType()] * 2),
                       linkage=llvm.LinkageAttr("external"), body=Region(block))


def test_only_erf_picks_among_many_constants() -> None:
    assert WIDE == [("erf", "f32"), ("erf", "f64")]


ISA = native.vector_isa(native.host_target())
RUNS = {"avx512": ("avx512", "avx2"), "avx2": ("avx2",), None: ()}[ISA]
"""The instruction sets whose variants this host runs (an AVX-512 host runs AVX2's)."""
WIDTHS = [(isa, b, 1) for isa in RUNS for b in native.VARIANT_BITS[isa]] + \
    [(isa, native.VARIANT_BITS[isa][0], k) for isa in RUNS for k in PARTS]


def _cases_of_chunks(cases: _Cases, fn: str, ty: str, x: np.ndarray, lanes: int) -> set[int]:
    """Which of `cases`' branches the chunks of `lanes` points take: the first level at
    or above the largest piece index among a chunk's lanes (len(levels): the general
    case)."""
    p = mathlib.program(fn, ty)
    bounds = [float(mathlib._const_value(p.instrs[p.instrs[c].args[1]].const, mathlib.TI[ty]))
              for c in cases.conds]
    index = np.full(len(x), len(bounds))  # NaN: past them
    for i, bound in reversed(list(enumerate(bounds))):
        index[np.abs(x) < bound] = i
    worst = index.reshape(-1, lanes).max(axis=1)
    levels = np.array([*cases.levels, len(bounds)])
    return set(np.searchsorted(levels, worst).tolist())  # the first level holding them


@pytest.mark.skipif(ISA is None, reason="no vector variants on this host (AVX2 or AVX-512)")
@pytest.mark.parametrize("isa, bits, parts", WIDTHS, ids=lambda v: str(v))
@pytest.mark.parametrize("fn,ty", WIDE)
def test_the_vector_variant_computes_the_same_bits_as_evaluate(fn: str, ty: str, isa: str,
                                                               bits: int, parts: int) -> None:
    """erf's vector variants for each instruction set this host runs (its pieces'
    coefficients picked by a permute where the width has one; `parts` vectors side by
    side, presk/emit/wide_loops.py) on the mathlib test's points and NaN payloads, their
    lanes at a time, against `evaluate` — and on the same points sorted, so that every
    one of `_Cases`' branches runs where the instruction set has them: whole chunks in
    the first piece, in the first two, and mixed."""
    lanes = bits // (64 if ty == "f64" else 32)
    m = ModuleOp([_vector_wrapper(fn, ty, lanes * parts),
                  to_llvm(fn, ty, lanes=lanes, parts=parts, isa=isa)])
    code = native.compile(native.llvm_ir(m, [f"wrapv_{fn}_{ty}"]))
    ti = mathlib.TI[ty]
    x = arguments(fn, ty, N_PER_PART)[0]
    pieces = [0.75, 1.5, 2.25, 3.0, 4.0, 6.0]
    edges = np.array([np.nextafter(ti.dtype(p), ti.dtype(d)) for p in pieces
                      for d in (0, 10)] + pieces, dtype=ti.dtype)
    nan = np.array([np.nan], dtype=ti.dtype)
    x = np.concatenate([x, edges, -edges, nan])
    x = np.concatenate([x, np.zeros(-len(x) % (lanes * parts), dtype=ti.dtype)])
    x = np.concatenate([x, np.sort(x)])
    cases = _Cases.of(_forms(mathlib.program(fn, ty)), isa)
    assert (cases is None) == (not _Cases.LEVELS[isa])
    if cases is not None:
        assert _cases_of_chunks(cases, fn, ty, x, lanes * parts) == \
            set(range(len(cases.levels) + 1))
    want = mathlib.evaluate(fn, ty, x)
    got = np.empty_like(x)
    wrap = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(
        code.address(f"wrapv_{fn}_{ty}"))
    for i in range(0, len(x), lanes * parts):
        wrap(x.ctypes.data + i * x.itemsize, got.ctypes.data + i * x.itemsize)
    differ = want.view(ti.uint) != got.view(ti.uint)
    assert not differ.any(), (fn, ty, x[differ][:5], want[differ][:5], got[differ][:5])
    permutes = PERMUTES[isa].get((ty, lanes))
    assert (permutes is not None and permutes in code.optimized_ir) == (permutes is not None)
    # the cases' tests, one a level
    assert code.optimized_ir.count("br i1 ") >= (0 if cases is None else len(cases.levels))


SCALAR_ERF_CALL = re.compile(r"call [^@\n]*double @presk_erf_f64\(")  # `call fastcc …`


@pytest.mark.skipif(ISA is None, reason="no vector variants on this host (AVX2 or AVX-512)")
def test_a_loop_calling_erf_runs_its_vector_variant_inlined() -> None:
    """The loop vectorizer maps erf's calls to its variants (the vector function ABI
    attribute: the host's widest vector and the narrower ones down to 128 bits), and
    `optimize`'s second always-inliner pass inlines the variant into the loop: no call of
    erf is left, scalar or vector, and the loop runs on the widest vector's lanes."""
    lanes = [bits // 64 for bits in native.VARIANT_BITS[ISA]]
    _, ir, _ = jit()
    mapping = ",".join(f"_ZGV_LLVM_N{n}v_presk_erf_f64(presk_erf_f64_v{n})" for n in lanes)
    assert f'"vector-function-abi-variant"="{mapping}"' \
        in native.llvm_ir(module(), [f"wrap_{fn}_{ty}" for fn, ty in CASES])
    from presk.analysis import entry as E
    from presk.pipeline import entry_call, load_core
    from presk.runtime.compile import native_program
    core, _ = load_core("tutorial/04_mlp.psk")
    prepared = E.prepare(core, "loss", {"B": 16})
    call = entry_call(core, "loss", prepared.dims, E.weights(prepared, 0, None),
                      E.inputs(prepared, 0, None), None, True, False)
    optimized = native_program(call.pipeline.kernel, cache=False).jit.optimized_ir
    body = optimized[optimized.index("define"):]
    assert not re.search(rf"call [^@\n]*@presk_erf_f64_v{lanes[0]}\(", body)
    assert not SCALAR_ERF_CALL.search(body)
    assert f"fcmp olt <{lanes[0]} x double>" in body


@pytest.mark.skipif(ISA is None, reason="no vector variants on this host (AVX2 or AVX-512)")
def test_a_row_shorter_than_the_vectors_runs_a_narrower_variant() -> None:
    """The tutorial's forward under --fuse-reductions at B = 4: RMSNorm and gelu fused,
    gelu's erf in a loop over a row of 4 f64 elements, fewer than a 512-bit vector's 8
    (AVX2's one vector). It runs on the 256-bit variant, inlined: no call of the scalar
    erf per element (it was one, and the forward took 1.75 µs a call against the unfused
    0.74); on AVX-512 its picks permute (`vpermpd` ymm)."""
    from presk.analysis import entry as E
    from presk.pipeline import entry_call, load_core
    from presk.runtime.compile import native_program
    core, _ = load_core("tutorial/07_train.psk")
    prepared = E.prepare(core, "loss", {"B": 4})
    call = entry_call(core, "loss", prepared.dims, E.weights(prepared, 0, None),
                      E.inputs(prepared, 0, None), None, True, False, fuse_reductions=True)
    optimized = native_program(call.pipeline.kernel, cache=False).jit.optimized_ir
    body = optimized[optimized.index("define"):]
    assert not SCALAR_ERF_CALL.search(body)
    assert ("permvar.df.256" in body) == (ISA == "avx512")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64's assembly")
def test_a_loops_constants_are_memory_operands_not_spilled_registers() -> None:
    """Native code is position-independent in the small code model (emit/llvm.py
    `HostTarget.machine`): a constant of the pool is a RIP-relative operand. In MCJIT's
    default (large) model each takes a `movabs` of its address, and a loop over erf's
    picked coefficients hoisted them into registers and spilled them to the stack."""
    from presk.analysis import entry as E
    from presk.pipeline import entry_call, load_core
    from presk.runtime.compile import native_program
    core, _ = load_core("tutorial/04_mlp.psk")
    prepared = E.prepare(core, "loss", {"B": 16})
    call = entry_call(core, "loss", prepared.dims, E.weights(prepared, 0, None),
                      E.inputs(prepared, 0, None), None, True, True)
    asm = native_program(call.pipeline.kernel, cache=False).jit.asm()
    assert ".LCPI" in asm and "(%rip)" in asm
    assert "$.LCPI" not in asm  # no constant's address as an immediate (`movabsq $.LCPI…`)
