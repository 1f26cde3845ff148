"""The export targets' recordings.

The PyTorch target under a realization (`pytorch_realized`): the entry recorded as
`presk run` records it, and the type of every value it computes read off the recorded
PSK-Realize module by Core site — what presk/emit/pytorch.py casts to.

The C target: an entry recorded exactly as `run_native` records it (call.py
`entry_call`), run once as native code, and written as a C program
(presk/emit/c_program.py) with that run's data — its split kernels' parts run on the
worker pool, as in native code (presk/runtime/presk_pool.c, copied into the program): `inputs/<file>.bin` (what the native
entry read, in each buffer's storage type) and `expected/<file>.bin` (what it wrote), so
that `make -C DIR check` compares the C with the native backend bit for bit.

Every file is written atomically (a temporary file in DIR, then a rename).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..analysis.artifact import write_atomic
from .call import EntryCall, compile_call, entry_call


@dataclass
class CExport:
    files: dict[str, str]  # relative path → text (sources) — data files not included
    data: dict[str, bytes]  # relative path → bytes (inputs/, expected/)
    shape: Any  # presk.emit.c_program.Shape
    realization_name: str
    call: EntryCall  # the recorded entry: its inputs as stored
    entry: Any  # presk.emit.c_program.EntryC: the C names of its buffers and files


def _little_endian(array) -> bytes:
    import numpy as np
    a = np.ascontiguousarray(array)
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def write_into(root: str, relative: str, content: str | bytes) -> None:
    """DIR/relative (its folder created), written atomically."""
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, content)


def _split(kernel_module):
    """The kernel module as native code runs it: when a kernel's layout splits it, a copy
    whose split kernels have their parts (psk-kernel-split), with the worker pool's C
    files; else the module itself and no files."""
    from ..runtime.compile import splits
    from ..runtime.pool import source_files
    from ..transforms.kernel_split import split_kernels
    if not splits(kernel_module):
        return kernel_module, None
    module = kernel_module.clone()
    split_kernels(module)
    return module, source_files()


def export_c(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
             values: dict[str, Any], out_dir: str, realization=None, grad: bool = False,
             remat: str = "store", plan=None, pipe=None) -> CExport:
    """Record, run natively, and write the C program with the run's data into out_dir
    (an OSError or presk.emit.c_program.CExportError passes through)."""
    from ..emit.c_program import c_sources, entry_c, program_shape
    call = entry_call(core_module, entry, dims, params, values, realization, True, grad,
                      remat, plan=plan, pipe=pipe)
    _, native = compile_call(call)
    outputs = native(call.inputs)
    kernel, pool = _split(call.pipeline.kernel)
    files = c_sources(kernel, call.output_names, pool)
    names = entry_c(kernel, call.output_names)
    data = {f"inputs/{f}.bin": _little_endian(a) for (f, _), a in zip(names.inputs, call.inputs)}
    data |= {f"expected/{f}.bin": _little_endian(a)
             for (f, _), a in zip(names.outputs, outputs)}
    for relative, content in [*files.items(), *data.items()]:
        write_into(out_dir, relative, content)
    return CExport(files, data, program_shape(kernel), call.pipeline.realization_name, call,
                   names)


def pytorch_realized(core_module, entry: str, dims: dict[str, int], realization):
    """The realization as the PyTorch export applies it (presk.emit.pytorch.Realized): the
    storage type of each site of the recorded entry (the value of the last op of the site
    that is no convert, in every instance; a site recorded in several types is left out —
    the export then converts where it is read) and of each parameter by path."""
    from ..dialects import core as C
    from ..dialects import realize as R
    from ..emit.pytorch import Realized
    from .load import prepare
    from .record import record_entry
    prepared = prepare(core_module, entry, dims)
    realize, real = record_entry(core_module, entry, dims, realization, fuse=False)
    types: dict[str, set[str]] = {}
    for func in realize.ops:
        last: dict[str, str] = {}
        for op in func.walk():
            site = op.attributes.get("site")
            if site is None or isinstance(op, R.ConvertOp) or not op.results \
                    or not isinstance(op.results[0].type, R.RTensorType):
                continue
            last[site.data] = R.element_name(op.results[0].type.element)
        for s, e in last.items():
            types.setdefault(s, set()).add(e)
    tree = next((t for t in prepared.func.function_type.inputs.data
                 if isinstance(t, C.ParamsAttr)), None)
    return Realized(entry, real.types_name(), tree.module_name if tree is not None else "",
                    {s: next(iter(e)) for s, e in sorted(types.items()) if len(e) == 1},
                    {f.path: real.param_type(f.path) for f in prepared.fields})
