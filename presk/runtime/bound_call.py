"""A bound entry call as a Python callable that costs what a builtin's call costs.

`NativeEntry.bind` checks the arguments once and builds argv once; what is left a call
is the call itself. Through ctypes that is about 250 ns (a `functools.partial` of a
CFUNCTYPE: the arguments converted, the GIL released and taken back) — a quarter of the
tutorial's whole forward. A `BoundCall` is instead a ctypes structure

    function  the entry's address          argv     its argv (the arrays bound)
    arena     its arena                    release  1: release the GIL while it runs

whose `__call__` is a method descriptor (`PyDescr_NewMethod`, METH_NOARGS, as a C type's
method is) of one native function, made once a process:

    PyObject *presk_bound_call(PyObject *self, PyObject *unused)

It reads the structure through `self` (a ctypes instance's `b_ptr`, the word after the
object's header: checked against `ctypes.addressof` before it is relied on), calls the
entry, and returns None. About 45 ns a call. CPython refuses arguments (METH_NOARGS),
and refuses `self` of another type (the descriptor's check) before the native code runs.

The GIL: ctypes releases it for every call; here a call over `RELEASE_GIL_AT` elements
of inputs and outputs releases it, a smaller one holds it (taking it back costs tens of
nanoseconds, which a sub-microsecond call would feel). The C API functions it calls are
given to MCJIT by their addresses in this process (`register_c_api`).
"""

from __future__ import annotations

import ctypes
from functools import cache

RELEASE_GIL_AT = 1 << 14
"""Elements (of a bound call's inputs and outputs; of a training step's parameters,
presk/train/step_builtin.py) from which a native call releases the GIL while it runs:
tens of microseconds of work and more, where the ~40 ns of releasing and taking it back
are noise."""

C_API = ("Py_IncRef", "PyEval_SaveThread", "PyEval_RestoreThread")
"""The C API functions the bound call's native code calls (and `_Py_NoneStruct`)."""

SYMBOL = "presk_bound_call"

_TRAMPOLINE = f"""
declare ptr @PyEval_SaveThread()
declare void @PyEval_RestoreThread(ptr)
declare void @Py_IncRef(ptr)
@_Py_NoneStruct = external global i8

define ptr @{SYMBOL}(ptr %self, ptr %unused) {{
entry:
  %b_ptr = getelementptr inbounds i8, ptr %self, i64 {{offset}}
  %fields = load ptr, ptr %b_ptr
  %function = load ptr, ptr %fields
  %argv.at = getelementptr inbounds ptr, ptr %fields, i64 1
  %argv = load ptr, ptr %argv.at
  %arena.at = getelementptr inbounds ptr, ptr %fields, i64 2
  %arena = load ptr, ptr %arena.at
  %release.at = getelementptr inbounds i64, ptr %fields, i64 3
  %release = load i64, ptr %release.at
  %releases = icmp ne i64 %release, 0
  br i1 %releases, label %released, label %held
held:
  call void %function(ptr %argv, ptr %arena)
  br label %done
released:
  %thread = call ptr @PyEval_SaveThread()
  call void %function(ptr %argv, ptr %arena)
  call void @PyEval_RestoreThread(ptr %thread)
  br label %done
done:
  call void @Py_IncRef(ptr @_Py_NoneStruct)
  ret ptr @_Py_NoneStruct
}}
"""

METH_NOARGS = 0x4


@cache
def register_c_api(names: tuple[str, ...]) -> None:
    """Give MCJIT the addresses of these C API functions in this process (once)."""
    import llvmlite.binding as binding
    for name in names:
        binding.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name),
                                             ctypes.c_void_p).value)


class BoundCall(ctypes.Structure):
    """A bound entry call: `call()` runs the entry on the arrays it was bound to. Its
    `outputs` are the arrays it writes; `function`, `argv` and `arena` the addresses a
    native caller calls it with (presk/train/native_step.py)."""

    _fields_ = [("function", ctypes.c_void_p), ("argv", ctypes.c_void_p),
                ("arena", ctypes.c_void_p), ("release", ctypes.c_int64)]

    outputs: list
    keep: tuple

    def call_by_ctypes(self) -> None:
        """The same call through ctypes (where the native `__call__` is not installed)."""
        _ENTRY(self.function)(self.argv, self.arena)


_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


class MethodDef(ctypes.Structure):
    """CPython's PyMethodDef."""
    _fields_ = [("name", ctypes.c_char_p), ("meth", ctypes.c_void_p),
                ("flags", ctypes.c_int), ("doc", ctypes.c_char_p)]


def _buffer_offset() -> int | None:
    """The offset of a ctypes instance's buffer pointer (`b_ptr`) in its object, when it
    is the word after the object's header, as it has been in every CPython 3."""
    probe = BoundCall()
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    found = ctypes.c_void_p.from_address(id(probe) + offset).value
    return offset if found == ctypes.addressof(probe) else None


@cache
def install() -> bool:
    """Make `BoundCall.__call__` the native method (once a process); False where it
    cannot be (then `__call__` calls through ctypes)."""
    from ..emit.llvm import compile as compile_ir
    offset = _buffer_offset()
    if offset is None:
        BoundCall.__call__ = BoundCall.call_by_ctypes
        return False
    register_c_api(C_API)
    import llvmlite.binding as binding
    binding.add_symbol("_Py_NoneStruct", id(None))
    jit = compile_ir(_TRAMPOLINE.replace("{offset}", str(offset)))
    definition = MethodDef(b"__call__", jit.address(SYMBOL), METH_NOARGS,
                            b"Run the entry on the arrays it is bound to.")
    BoundCall.__call__ = _new_method(BoundCall, ctypes.addressof(definition))
    _KEEP.extend([jit, definition])  # the code and the definition: for the process
    return True


_KEEP: list[object] = []
_new_method = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.c_void_p)(
    ("PyDescr_NewMethod", ctypes.pythonapi))


def bound_call(function: int, argv: ctypes.Array, arena: int, elements: int,
               outputs: list, keep: tuple) -> BoundCall:
    """The call of the entry at `function` with `argv` and `arena`; `keep`: what it reads
    (its arrays, the loaded code), alive as long as it is."""
    install()
    call = BoundCall(function, ctypes.addressof(argv), arena, int(elements >= RELEASE_GIL_AT))
    call.outputs = outputs
    call.keep = (argv, *keep)
    return call
