"""One training step as a Python builtin function: the native step program's entry behind
CPython's fast calling convention (METH_FASTCALL), for a caller that steps one at a time.

A ctypes call converts and checks each argument and result in Python (about 100 ns with
none, 210 ns with two), and a method around it that writes the control words and reads
the loss costs about 300 ns more: a third of a tutorial step. The step module therefore
also defines

    PyObject *presk_entry_<step>_py(PyObject *capsule, PyObject *const *args, Py_ssize_t n)

which `builtin` makes a builtin function (`PyCFunction_NewEx` over a `PyMethodDef`), its
`self` a capsule holding the address of an int64 state array (`STATE`):

  argv      the step's argv (NativeStep's: its own losses and lrs bound)
  ctl       the step's control words (`CTL` of native_step.py: steps, t0, first, ...)
  armed     the address of the order object the fast path accepts; 0: none
  places    the bound order's length
  fallback  the address of the Python callable for every other call

A call `step()` (n = 0, armed) makes the next step: one step at ctl's t0 and first, then
t0 + 1 and the order's next batch (its first again after its last whole batch). A call
`step(t0, first, order)` with the armed order, two ints C's `long long` holds (t0 ≠ −1)
and a batch inside the order sets t0 and first and does the same. Anything else — another
order, a keyword, a float, a batch past the order's end, no step to go on from — goes to
the fallback with the same arguments, which checks them in Python, raises or binds and
arms, and calls again. The loss is returned as a Python float (`PyFloat_FromDouble`).

The builtin holds the GIL while a small step runs (as numpy does for small arrays: taking
it back costs tens of nanoseconds); a step over `RELEASE_GIL_AT` parameters releases it
(`PyEval_SaveThread`) for the native call. The functions of CPython's C API it calls are
given to MCJIT by their addresses in this process (`register_c_api`).
"""

from __future__ import annotations

import ctypes
from typing import Callable

from xdsl.builder import Builder
from xdsl.dialects import arith, func, llvm, scf
from xdsl.dialects.builtin import f64, i1, i64
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from ..conversion.kernel_to_std import PTR, Emitter
from ..runtime.bound_call import RELEASE_GIL_AT, MethodDef
from ..runtime.bound_call import register_c_api as register

STATE = ("argv", "ctl", "armed", "places", "fallback")

C_API: dict[str, tuple[tuple[Attribute, ...], Attribute | None]] = {
    "PyCapsule_GetPointer": ((PTR, PTR), PTR),
    "PyLong_AsLongLong": ((PTR,), i64),
    "PyErr_Clear": ((), None),
    "PyFloat_FromDouble": ((f64,), PTR),
    "PyObject_Vectorcall": ((PTR, PTR, i64, PTR), PTR),
    "PyEval_SaveThread": ((), PTR),
    "PyEval_RestoreThread": ((PTR,), None),
}
"""The C API functions the entry calls: name → (argument types, result type or None)."""

METH_FASTCALL = 0x80


def declarations() -> list[llvm.FuncOp]:
    """External declarations of `C_API` for the module that holds the entry."""
    return [llvm.FuncOp(name, llvm.LLVMFunctionType(list(args), result),
                        linkage=llvm.LinkageAttr("external"))
            for name, (args, result) in C_API.items()]


def register_c_api() -> None:
    """Give MCJIT the addresses of `C_API`'s functions in this process (once)."""
    register(tuple(C_API))


# --------------------------------------------------------------------------------------
# The entry
# --------------------------------------------------------------------------------------


def _emitter(block: Block) -> Emitter:
    return Emitter(Builder(InsertPoint.at_end(block)), InsertPoint.at_end(block))


def _slot(e: Emitter, ptr: SSAValue, j: int, element: Attribute) -> SSAValue:
    """The address of element j (a constant) of type `element` from `ptr`."""
    return e(llvm.GEPOp(ptr, [j], element, inbounds=True))


def _get(e: Emitter, ptr: SSAValue, j: int, element: Attribute = i64) -> SSAValue:
    return e(llvm.LoadOp(_slot(e, ptr, j, element), element))


def _set(e: Emitter, value: SSAValue, ptr: SSAValue, j: int) -> None:
    e(llvm.StoreOp(value, _slot(e, ptr, j, value.type)))


def scf_if(e: Emitter, cond: SSAValue, types: list[Attribute],
           then: Callable[[Emitter], list[SSAValue]],
           otherwise: Callable[[Emitter], list[SSAValue]]) -> list[SSAValue]:
    """scf.if: each branch's values yielded."""
    regions = []
    for branch in (then, otherwise):
        block = Block()
        b = _emitter(block)
        b(scf.YieldOp(*branch(b)))
        regions.append(Region(block))
    op = scf.IfOp(cond, types, *regions)
    e(op)
    return list(op.results)


def _cmp(e: Emitter, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
    return e(arith.CmpiOp(a, b, predicate))


def _all(e: Emitter, *conds: SSAValue) -> SSAValue:
    out = conds[0]
    for c in conds[1:]:
        out = e(arith.AndIOp(out, c))
    return out


def python_entry(symbol: str, step: str, batch: int, ctl: dict[str, int], losses_slot: int,
                 release_gil: bool) -> func.FuncOp:
    """`symbol`: the builtin's function for the step entry `step(argv, arena)`; `ctl`: the
    control words' indices (steps, t0, first), `losses_slot`: the argv slot of the
    losses."""
    block = Block(arg_types=[PTR, PTR, i64])
    capsule, args, nargs = block.args
    e = _emitter(block)
    null = e(llvm.IntToPtrOp(e.int(0, i64)))
    state = e(llvm.CallOp("PyCapsule_GetPointer", capsule, null, return_type=PTR))
    s = {k: _get(e, state, j) for j, k in enumerate(STATE)}
    control = e(llvm.IntToPtrOp(s["ctl"]))
    armed = _cmp(e, "ne", s["armed"], e.int(0, i64))

    def given(b: Emitter) -> list[SSAValue]:
        """`step(t0, first, order)` with three arguments: whether they are the fast
        path's (then t0 and first written to ctl)."""
        order = b(llvm.PtrToIntOp(_get(b, args, 2, PTR), i64))
        return scf_if(b, _cmp(b, "eq", order, s["armed"]), [i1],
                      lambda c: numbers(c, order), lambda c: [c.int(0, i1)])

    def numbers(b: Emitter, order: SSAValue) -> list[SSAValue]:
        t0, first = (b(llvm.CallOp("PyLong_AsLongLong", _get(b, args, j, PTR),
                                   return_type=i64)) for j in (0, 1))
        # read again: a conversion may run Python (`__index__`), which may rebind or run
        armed_now = _cmp(b, "eq", _get(b, state, STATE.index("armed")), order)
        end = b(arith.AddiOp(first, b.int(batch, i64)))
        inside = _all(b, armed_now, _cmp(b, "ne", t0, b.int(-1, i64)),
                      _cmp(b, "sge", first, b.int(0, i64)),
                      _cmp(b, "sle", end, _get(b, state, STATE.index("places"))))

        def accept(c: Emitter) -> list[SSAValue]:
            _set(c, t0, control, ctl["t0"])
            _set(c, first, control, ctl["first"])
            return []

        def refuse(c: Emitter) -> list[SSAValue]:
            c(llvm.CallOp("PyErr_Clear"))  # a conversion's error: the fallback raises its own
            return []
        scf_if(b, inside, [], accept, refuse)
        return [inside]

    def bare(b: Emitter) -> list[SSAValue]:
        return [_all(b, armed, _cmp(b, "eq", nargs, b.int(0, i64)))]

    three = _all(e, armed, _cmp(e, "eq", nargs, e.int(3, i64)))
    fast = scf_if(e, three, [i1], given, bare)[0]

    def go(b: Emitter) -> list[SSAValue]:
        argv = b(llvm.IntToPtrOp(s["argv"]))
        _set(b, b.int(1, i64), control, ctl["steps"])
        saved = b(llvm.CallOp("PyEval_SaveThread", return_type=PTR)) if release_gil else None
        b(llvm.CallOp(step, argv, null))
        if saved is not None:
            b(llvm.CallOp("PyEval_RestoreThread", saved))
        loss = _get(b, _get(b, argv, losses_slot, PTR), 0, f64)
        _set(b, b(arith.AddiOp(_get(b, control, ctl["t0"]), b.int(1, i64))), control, ctl["t0"])
        nxt = b(arith.AddiOp(_get(b, control, ctl["first"]), b.int(batch, i64)))
        ends = _cmp(b, "sgt", b(arith.AddiOp(nxt, b.int(batch, i64))), s["places"])
        _set(b, b(arith.SelectOp(ends, b.int(0, i64), nxt)), control, ctl["first"])
        return [b(llvm.CallOp("PyFloat_FromDouble", loss, return_type=PTR))]

    def fall(b: Emitter) -> list[SSAValue]:
        return [b(llvm.CallOp("PyObject_Vectorcall", b(llvm.IntToPtrOp(s["fallback"])), args,
                              nargs, null, return_type=PTR))]
    e(func.ReturnOp(scf_if(e, fast, [PTR], go, fall)[0]))
    return func.FuncOp(symbol, ([PTR, PTR, i64], [PTR]), Region(block))


# --------------------------------------------------------------------------------------
# The builtin
# --------------------------------------------------------------------------------------


_LIVE: dict[int, tuple] = {}
"""Per builtin (keyed by its definition's address): its definition and the owner of what
its native code reads (the state, the argv, the loaded program, the fallback's object).
Dropped by the capsule's destructor, when the builtin is freed: the owner never refers to
its builtins, so nothing here makes a cycle."""

_API = ctypes.pythonapi
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", _API))
_capsule_context = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_SetContext", _API))
_function_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.py_object,
                                  ctypes.c_void_p)(("PyCFunction_NewEx", _API))
_get_context = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(("PyCapsule_GetContext",
                                                                    _API))


@ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
def _released(capsule: int) -> None:
    """The capsule's destructor: its builtin is gone."""
    _LIVE.pop(_get_context(capsule), None)


def builtin(address: int, state: int, owner: object, name: str,
            doc: str) -> Callable[..., float]:
    """The builtin function (METH_FASTCALL) of the entry at `address`, its `self` a
    capsule of `state` (the address of `STATE`'s int64 fields). `owner` holds everything
    the native code reads, the state included: it lives as long as the builtin."""
    definition = MethodDef(name.encode(), address, METH_FASTCALL, doc.encode())
    key = ctypes.addressof(definition)
    _LIVE[key] = (definition, owner)
    capsule = _capsule_new(state, None, ctypes.cast(_released, ctypes.c_void_p))
    _capsule_context(capsule, key)
    return _function_new(key, capsule, None)
