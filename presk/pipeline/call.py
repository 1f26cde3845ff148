"""Calling a recorded entry: its input buffers, the kernel interpreter, native code.

The entry is recorded down to PSK-Kernel (record.py `kernel_pipeline`); `presk run
--engine kernel` interprets its loop nests, `--engine native` (the default) compiles it
(runtime/compile.py `lowering_passes`, then LLVM) — or takes its object code from the
on-disk cache — and calls it on the same input buffers, so the two print the same bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..limits import require_memory
from .errors import InvalidInput, InvalidProgram
from .record import Pipeline, kernel_passes, kernel_pipeline

if TYPE_CHECKING:
    from xdsl.passes import ModulePass


def entry_inputs(realize_module, params: dict[str, Any], values: dict[str, Any]) -> list:
    """The entry host's input buffers: each argument of the Realize entry (`θ.w` from
    `params["w"]`, `batch.0` from `values`) rounded to nearest even into its type."""
    import numpy as np

    from ..analysis.kernel_interpret import element_name, to_storage
    from ..dialects import realize as R
    entry = R.entry_func(realize_module)
    out = []
    for name, arg in zip(entry.arg_name_list, entry.args):
        if name in values:
            value = values[name]
        else:
            head, _, path = name.partition(".")
            if path not in params:
                raise InvalidInput(f"presk: no value for the entry's argument `{name}`")
            value = params[path]
        t = arg.type
        array = np.asarray(value, dtype=np.float64)
        if array.shape != t.sizes:
            raise InvalidInput(f"presk: `{name}` has shape {list(array.shape)}, the entry "
                               f"takes {list(t.sizes)}")
        out.append(to_storage(array, element_name(t.element)))
    return out


def output_names(realize_module) -> list[str]:
    """The names of the recorded entry's outputs: `result` (`result.0`, … for several),
    or those the recording gave (`result`, `grad.<path>`)."""
    from ..dialects import realize as R
    func = R.entry_func(realize_module)
    if func.result_names is not None:
        return [n.data for n in func.result_names]
    n = len(func.function_type.outputs.data)
    return ["result"] if n == 1 else [f"result.{i}" for i in range(n)]


@dataclass
class EntryCall:
    """What calling an entry host takes and gives: its input buffers (as stored) and the
    names of its outputs (`result`, `grad.<path>`)."""

    pipeline: Pipeline
    host: str
    inputs: list[Any]
    output_names: list[str]

    def flatten(self, outputs: Sequence[Any]) -> dict[str, Any]:
        """The outputs by name, as float64."""
        from ..analysis.kernel_interpret import to_f64
        return {n: to_f64(o) for n, o in zip(self.output_names, outputs)}


def record_call(core_module, entry: str, dims: dict[str, int], realization=None,
                fuse: bool = True, grad: bool = False, remat: str = "store", plan=None,
                held: int = 0, fuse_reductions: bool = False) -> Pipeline:
    """Record `entry` down to PSK-Kernel, and refuse (ResourceError) a call whose buffers
    and arena, with `held` bytes of its arguments (the f64 arrays drawn or read for it,
    alive beside its buffers), exceed the memory there is. Recording reads only shapes:
    call this before drawing the arguments, so that a call too big is refused at once."""
    from ..kernel_abi.arena import entry_signatures
    pipe = kernel_pipeline(core_module, entry, dims, realization, fuse, grad, remat, plan,
                           fuse_reductions)
    what = "its buffers and arena" + (", and its arguments in f64" if held else "")
    for sig in entry_signatures(pipe.kernel):
        require_memory(sig.call_bytes + held, f"a call of `{sig.host}` ({what})")
    return pipe


def entry_call(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
               values: dict[str, Any], realization=None, fuse: bool = True,
               grad: bool = False, remat: str = "store", cotangent=None,
               plan=None, pipe: Pipeline | None = None,
               fuse_reductions: bool = False) -> EntryCall:
    """Record `entry` (with `grad`: its value and gradient, the seed `cotangent`, 1 when
    None) down to PSK-Kernel — or take `pipe`, recorded so by `record_call` — and prepare
    the entry host's inputs."""
    from ..dialects import realize as R
    if pipe is None:  # before a buffer is converted or allocated
        pipe = record_call(core_module, entry, dims, realization, fuse, grad, remat, plan,
                           fuse_reductions=fuse_reductions)
    func = R.entry_func(pipe.realize)
    if grad:
        values = {**values, func.arg_name_list[-1]: 1.0 if cotangent is None else cotangent}
    inputs = entry_inputs(pipe.realize, params, values)
    return EntryCall(pipe, func.func_name, inputs, output_names(pipe.realize))


# ---- the kernel interpreter ----

@dataclass
class KernelRun:
    result: dict[str, Any]  # path (`result`, `result.0`) → float64 array (0-d for a scalar)
    outputs: list[Any]  # the entry host's output buffers as stored (bf16 as uint16 bits)
    stats: Any  # presk.analysis.kernel_interpret.Stats
    pipeline: Pipeline


def run_kernel(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
               values: dict[str, Any], realization=None, fuse: bool = True,
               trace=None, grad: bool = False, remat: str = "store",
               cotangent=None, plan=None, pipe: Pipeline | None = None) -> KernelRun:
    """Run `entry` through the kernel interpreter: the result by path, as float64. With
    `grad`, its value and gradient (the seed `cotangent`, 1 when None): `result` and
    `grad.<path>`, as `presk run --engine f64 --grad` names them."""
    from ..analysis.kernel_interpret import KernelInterpreter
    call = entry_call(core_module, entry, dims, params, values, realization, fuse, grad,
                      remat, cotangent, plan, pipe)
    interp = KernelInterpreter(call.pipeline.kernel, trace=trace)
    outputs = interp.run(call.host, call.inputs)
    return KernelRun(call.flatten(outputs), outputs, interp.stats, call.pipeline)


# ---- native code ----

def native_passes(entry: str, dims: dict[str, int], realization=None, grad: bool = False,
                  remat: str = "store", plan: str | None = None,
                  fuse_reductions: bool = False) -> list[ModulePass]:
    """Every pass `run_native` runs: the recording, then PSK-Kernel → the llvm dialect."""
    from ..runtime.compile import lowering_passes
    return [*kernel_passes(entry, dims, realization, True, grad, remat, plan,
                           fuse_reductions),
            *lowering_passes()]


@dataclass
class NativeRun:
    result: dict[str, Any]  # name (`result`, `grad.<path>`) → float64 array
    outputs: list[Any]  # the entry's output buffers as stored (bf16 as uint16 bits)
    call: EntryCall
    program: Any  # presk.runtime.NativeProgram
    entry: Any  # presk.runtime.NativeEntry


def compile_call(call: EntryCall, cache: bool = True):
    """The native program of a prepared entry and its callable entry; a lowering or
    compilation failure is an InvalidProgram (one line)."""
    from ..conversion.kernel_to_std import NativeLoweringError
    from ..runtime import NativeCompileError
    from ..runtime.compile import native_program
    try:
        program = native_program(call.pipeline.kernel, cache=cache)
    except (NativeLoweringError, NativeCompileError) as exc:
        raise InvalidProgram(f"presk: error: the native backend cannot compile "
                             f"`{call.host}`: {exc}") from None
    return program, program.entry(call.host)


def run_native(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
               values: dict[str, Any], realization=None, grad: bool = False,
               remat: str = "store", cache: bool = True, cotangent=None,
               plan=None, pipe: Pipeline | None = None,
               fuse_reductions: bool = False) -> NativeRun:
    """Run `entry` (with `grad`: its value and gradient, the seed `cotangent`, 1 when
    None) as machine code."""
    call = entry_call(core_module, entry, dims, params, values, realization, True, grad,
                      remat, cotangent, plan, pipe, fuse_reductions)
    program, native = compile_call(call, cache)
    outputs = native(call.inputs)
    return NativeRun(call.flatten(outputs), outputs, call, program, native)
