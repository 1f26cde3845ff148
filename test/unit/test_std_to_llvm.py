"""Standard dialects → llvm → native code: the std_to_llvm passes end to end.

Two functions written in scf/arith/memref/func are lowered by xDSL's convert-scf-to-cf and
memref→ptr→llvm passes and ours (presk/conversion/std_to_llvm), translated by
`xdsl.backend.llvm.convert_module`, optimized at O2 for the host CPU by llvmlite's new pass
manager, JIT-compiled with MCJIT and called through ctypes; each result is compared with
numpy computing the same thing. Also: the translation refuses nothing the passes leave,
and index types are gone everywhere.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import numpy as np
import pytest

from xdsl.context import Context
from xdsl.dialects import get_all_dialects
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.parser import Parser

from presk.conversion.std_to_llvm import (
    ConvertArithToLLVMPass,
    ConvertCfToLLVMPass,
    ConvertFuncToLLVMPass,
    ConvertIndexToLLVMPass,
)

# A sum of squares over a memref (the loop's index addresses the buffer), a polynomial
# by Horner in a loop whose coefficients are sitofp of the counter, and a call between
# them: select, cmpf, negf, fptosi, extf/truncf and integer compares on the way.
SOURCE = """
func.func @sumsq(%a: memref<?xf64>, %n: index, %out: memref<1xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (f64) {
    %v = memref.load %a[%i] : memref<?xf64>
    %sq = arith.mulf %v, %v : f64
    %s = arith.addf %acc, %sq : f64
    scf.yield %s : f64
  }
  memref.store %r, %out[%c0] : memref<1xf64>
  return
}

func.func @horner(%x: f64, %n: i64) -> f64 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %nn = arith.index_cast %n : i64 to index
  %z = arith.constant 0.0 : f64
  %r = scf.for %i = %c0 to %nn step %c1 iter_args(%acc = %z) -> (f64) {
    %ii = arith.index_cast %i : index to i64
    %one = arith.constant 1 : i64
    %k = arith.addi %ii, %one : i64
    %fk = arith.sitofp %k : i64 to f64
    %t = arith.mulf %acc, %x : f64
    %u = arith.addf %t, %fk : f64
    scf.yield %u : f64
  }
  return %r : f64
}

func.func @clamp_abs(%x: f64, %lim: f32) -> f64 {
  %neg = arith.negf %x : f64
  %lt = arith.cmpf olt, %x, %neg : f64
  %a = arith.select %lt, %neg, %x : f64
  %l = arith.extf %lim : f32 to f64
  %gt = arith.cmpf ogt, %a, %l : f64
  %b = arith.select %gt, %l, %a : f64
  %three = arith.constant 3 : i64
  %n = func.call @horner(%b, %three) : (f64, i64) -> f64
  %f = arith.truncf %n : f64 to f32
  %g = arith.extf %f : f32 to f64
  %i = arith.fptosi %g : f64 to i32
  %h = arith.sitofp %i : i32 to f64
  %d = arith.subf %g, %h : f64
  %q = arith.divf %d, %l : f64
  %w = arith.addf %h, %q : f64
  return %w : f64
}
"""


def _ctx() -> Context:
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx


def lower(source: str) -> ModuleOp:
    from xdsl.transforms.convert_memref_to_ptr import ConvertMemRefToPtr
    from xdsl.transforms.convert_ptr_to_llvm import ConvertPtrToLLVMPass
    from xdsl.transforms.convert_ptr_type_offsets import ConvertPtrTypeOffsetsPass
    from xdsl.transforms.convert_scf_to_cf import ConvertScfToCf
    from xdsl.transforms.reconcile_unrealized_casts import ReconcileUnrealizedCastsPass

    ctx = _ctx()
    module = Parser(ctx, source).parse_module()
    for p in (
        ConvertScfToCf(),
        ConvertMemRefToPtr(lower_func=True),
        ConvertPtrTypeOffsetsPass(),
        ConvertPtrToLLVMPass(),
        ConvertIndexToLLVMPass(),
        ConvertArithToLLVMPass(),
        ConvertCfToLLVMPass(),
        ConvertFuncToLLVMPass(),
        ReconcileUnrealizedCastsPass(),
    ):
        p.apply(ctx, module)
    module.verify()
    return module


@lru_cache(maxsize=1)
def jit():
    """The module lowered, O2 for the host CPU, MCJIT: (engine, LLVM IR text)."""
    import llvmlite.binding as llvm

    from xdsl.backend.llvm.convert import convert_module

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    ir_text = str(convert_module(lower(SOURCE), fallback_target_triple=None))
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=2,
    )
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    pto = llvm.PipelineTuningOptions(speed_level=2)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    engine.run_static_constructors()
    return engine, ir_text


def _fn(name: str, restype, *argtypes):
    engine, _ = jit()
    return ctypes.CFUNCTYPE(restype, *argtypes)(engine.get_function_address(name))


def test_no_index_and_only_llvm_ops_remain():
    module = lower(SOURCE)
    for op in module.walk():
        if op is module:
            continue
        assert op.dialect_name() == "llvm", op.name
        for v in (*op.results, *(a for r in op.regions for b in r.blocks for a in b.args)):
            assert not isinstance(v.type, IndexType), op.name
    funcs = {op.sym_name.data: op for op in module.ops}
    assert set(funcs) == {"sumsq", "horner", "clamp_abs"}
    assert all(f.linkage.linkage.data == "external" for f in funcs.values())


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_sum_of_squares_native_equals_numpy(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal(max(n, 1))
    out = np.zeros(1)
    p = ctypes.POINTER(ctypes.c_double)
    fn = _fn("sumsq", None, p, ctypes.c_int64, p)
    fn(a.ctypes.data_as(p), n, out.ctypes.data_as(p))
    expect = 0.0
    for v in a[:n]:  # the loop's order, so bit for bit
        expect = expect + v * v
    assert out[0] == expect
    assert out[0] == pytest.approx(np.sum(a[:n] ** 2), rel=1e-12)


@pytest.mark.parametrize("x", [0.0, 0.5, -1.25, 2.0])
@pytest.mark.parametrize("n", [0, 1, 5, 12])
def test_horner_native_equals_numpy(x, n):
    fn = _fn("horner", ctypes.c_double, ctypes.c_double, ctypes.c_int64)
    # acc = acc*x + k for k = 1..n: the polynomial with coefficients 1..n, highest first.
    expect = np.float64(0.0)
    for k in range(1, n + 1):
        expect = expect * np.float64(x) + np.float64(k)
    assert fn(x, n) == expect
    assert fn(x, n) == pytest.approx(np.polyval(np.arange(1, n + 1, dtype=np.float64), x) if n else 0.0)


@pytest.mark.parametrize("x", [-3.0, -0.75, 0.0, 0.3, 1.9, 5.0])
@pytest.mark.parametrize("lim", [0.5, 1.5, 4.0])
def test_select_compare_casts_call_native_equals_numpy(x, lim):
    fn = _fn("clamp_abs", ctypes.c_double, ctypes.c_double, ctypes.c_float)
    l = np.float64(np.float32(lim))
    b = min(abs(np.float64(x)), l)
    acc = np.float64(0.0)
    for k in (1, 2, 3):
        acc = acc * b + np.float64(k)
    g = np.float64(np.float32(acc))
    i = np.float64(np.trunc(g))
    expect = i + (g - i) / l
    assert fn(x, lim) == expect
