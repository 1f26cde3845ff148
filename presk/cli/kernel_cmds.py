"""The subcommands on PSK-Kernel: `presk dump --stage kernel` and `presk run --engine kernel`.

The pipeline: the program's PSK-Core → `record` (convert-psk-core-to-realize) at the
entry's dims under a realization → `psk-fuse` → convert-psk-realize-to-kernel. Heavy
imports happen inside the functions, never for `presk check`.

Python API:
  kernel_pipeline(core_module, entry, dims, realization=None, fuse=True, grad=False,
                  remat="store") -> Pipeline
  run_kernel(core_module, entry, dims, params, values, realization=None, fuse=True,
             trace=None, grad=False, remat="store") -> KernelRun
                                with grad: `result` and `grad.<path>` (the seed is 1)
  dump_kernel(args) -> int      args: file, entry, dim (["B=4"]), realize (None, a path,
                                @path or inline JSON); optional format ("listing"|"mlir"),
                                fuse (default True), grad (False), remat ("store")
  run_kernel_cmd(args) -> int   args as `presk run` (file, entry, dim, seed, weights,
                                inputs, out, grad, remat) plus realize
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, Sequence

from .common import ProgramError, UsageError


@dataclass
class Pipeline:
    realize: Any  # the PSK-Realize module (fused unless fuse=False)
    kernel: Any  # the PSK-Kernel module
    realization_name: str  # `all-f64`, `f64+9sites+4params`


def _realization(spec):
    """A Realization from None, a path, `@path`, inline JSON, or a Realization."""
    from ..analysis.realization import Realization, RealizationError, load_realization
    if spec is None or isinstance(spec, Realization):
        return spec or Realization()
    try:
        return load_realization(spec)
    except RealizationError as exc:
        raise UsageError(f"presk: {exc}") from None


def kernel_pipeline(core_module, entry: str, dims: dict[str, int], realization=None,
                    fuse: bool = True, grad: bool = False, remat: str = "store") -> Pipeline:
    """Record `entry` at `dims` under `realization` (None: all f64; a Realization, a path,
    `@path` or inline JSON), fuse, and convert to PSK-Kernel. With `grad`, what is recorded
    is `entry.value_vjp` of a differentiated copy of the module (psk-differentiate under
    `remat`): inputs the entry's, then the cotangent seed; outputs `result` and
    `grad.<path>` (presk.conversion.core_to_realize.record_value_and_gradient)."""
    from ..analysis.realization import RealizationError
    from ..conversion.core_to_realize import RecordError, record, record_value_and_gradient
    from ..conversion.realize_to_kernel import KernelConversionError, realize_to_kernel
    from ..transforms.fuse import fuse_module
    real = _realization(realization)
    try:
        if grad:
            from .core_cmds import differentiate
            module = core_module.clone()
            differentiate(module, [entry], remat)
            realize = record_value_and_gradient(module, entry, dims, real)
        else:
            realize = record(core_module, entry, dims, real)
    except (RecordError, RealizationError) as exc:
        raise UsageError(f"presk: {exc}") from None
    if fuse:
        fuse_module(realize)
    try:
        kernel = realize_to_kernel(realize)
    except KernelConversionError as exc:
        print(f"presk: error: {exc}", file=sys.stderr)
        raise ProgramError() from None
    return Pipeline(realize, kernel, real.summary())


# ---- presk dump --stage kernel ----

def dump_kernel(args: argparse.Namespace) -> int:
    from ..emit.kernel_listing import format_listing
    from .core_cmds import load_core, parse_dims
    if not getattr(args, "entry", None):
        raise UsageError("presk dump: --stage kernel needs --entry, e.g. --entry loss")
    module, _ = load_core(args.file)
    dims = parse_dims(getattr(args, "dim", None) or [])
    pipe = kernel_pipeline(module, args.entry, dims, getattr(args, "realize", None),
                           getattr(args, "fuse", True), getattr(args, "grad", False),
                           getattr(args, "remat", "store"))
    if getattr(args, "format", "listing") == "mlir":
        print(pipe.kernel)
    else:
        print(format_listing(pipe.kernel, pipe.realization_name).rstrip("\n"))
    return 0


# ---- presk run --engine kernel ----

@dataclass
class KernelRun:
    result: dict[str, Any]  # path (`result`, `result.0`) → float64 array (0-d for a scalar)
    outputs: list[Any]  # the entry host's output buffers as stored (bf16 as uint16 bits)
    stats: Any  # presk.analysis.kernel_interpret.Stats
    pipeline: Pipeline


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
                raise UsageError(f"presk: no value for the entry's argument `{name}`")
            value = params[path]
        t = arg.type
        array = np.asarray(value, dtype=np.float64)
        if array.shape != t.sizes:
            raise UsageError(f"presk: `{name}` has shape {list(array.shape)}, the entry takes "
                             f"{list(t.sizes)}")
        out.append(to_storage(array, element_name(t.element)))
    return out


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


def entry_call(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
               values: dict[str, Any], realization=None, fuse: bool = True,
               grad: bool = False, remat: str = "store") -> EntryCall:
    """Record `entry` (with `grad`: its value and gradient, the seed 1) down to PSK-Kernel
    and prepare the entry host's inputs."""
    from ..dialects import realize as R
    pipe = kernel_pipeline(core_module, entry, dims, realization, fuse, grad, remat)
    func = R.entry_func(pipe.realize)
    if grad:
        values = {**values, func.arg_name_list[-1]: 1.0}
    inputs = entry_inputs(pipe.realize, params, values)
    return EntryCall(pipe, func.func_name, inputs, output_names(pipe.realize))


def output_names(realize_module) -> list[str]:
    """The names of the recorded entry's outputs: `result` (`result.0`, … for several),
    or those the recording gave (`result`, `grad.<path>`)."""
    from ..dialects import realize as R
    func = R.entry_func(realize_module)
    if func.result_names is not None:
        return [n.data for n in func.result_names]
    n = len(func.function_type.outputs.data)
    return ["result"] if n == 1 else [f"result.{i}" for i in range(n)]


def run_kernel(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
               values: dict[str, Any], realization=None, fuse: bool = True,
               trace=None, grad: bool = False, remat: str = "store") -> KernelRun:
    """Run `entry` through the kernel interpreter: the result by path, as float64. With
    `grad`, its value and gradient (the seed 1): `result` and `grad.<path>`, as `presk run
    --engine f64 --grad` names them."""
    from ..analysis.kernel_interpret import KernelInterpreter
    call = entry_call(core_module, entry, dims, params, values, realization, fuse, grad,
                      remat)
    interp = KernelInterpreter(call.pipeline.kernel, trace=trace)
    outputs = interp.run(call.host, call.inputs)
    return KernelRun(call.flatten(outputs), outputs, interp.stats, call.pipeline)


def prepare_run(args: argparse.Namespace):
    """The Core module, the prepared entry, its parameters and inputs for `presk run`."""
    from ..analysis import entry as E
    from ..analysis.weights import WeightsError
    from .core_cmds import _entry, load_core
    module, _ = load_core(args.file)
    entry = _entry(args, module)
    try:
        params = E.weights(entry, args.seed, getattr(args, "weights", None))
        values = E.inputs(entry, args.seed, getattr(args, "inputs", None))
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None
    return module, entry, params, values


def print_run(args: argparse.Namespace, dims: dict[str, int], where: str,
              result: dict[str, Any]) -> None:
    """`loss at B = 4 in <where>:` and one line per output, as `presk run` prints; `--out`."""
    from .core_cmds import _save, _show
    text = ", ".join(f"{k} = {v}" for k, v in dims.items())
    print(f"{args.entry}{' at ' + text if text else ''} in {where}:")
    for path, value in result.items():
        print(f"  {path} = {_show(value)}")
    if getattr(args, "out", None):
        _save(dict(result), args.out)
        print(f"  written to {args.out}")


def run_kernel_cmd(args: argparse.Namespace) -> int:
    """`presk run FILE --entry E --dim … --engine kernel [--realize …]`: print as `presk
    run` does, with the run's launches."""
    module, entry, params, values = prepare_run(args)
    run = run_kernel(module, args.entry, entry.dims, params, values,
                     getattr(args, "realize", None), grad=getattr(args, "grad", False),
                     remat=getattr(args, "remat", "store"))
    print_run(args, entry.dims, f"the kernel interpreter under "
              f"{run.pipeline.realization_name} ({run.stats.launches} launches)", run.result)
    return 0
