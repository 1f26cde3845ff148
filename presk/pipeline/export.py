"""The C target: an entry recorded exactly as `run_native` records it (call.py
`entry_call`), run once as native code, and written as a C program
(presk/emit/c_program.py) with that run's data: `inputs/<file>.bin` (what the native
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


def export_c(core_module, entry: str, dims: dict[str, int], params: dict[str, Any],
             values: dict[str, Any], out_dir: str, realization=None, grad: bool = False,
             remat: str = "store", plan=None) -> CExport:
    """Record, run natively, and write the C program with the run's data into out_dir
    (an OSError or presk.emit.c_program.CExportError passes through)."""
    from ..emit.c_program import c_sources, entry_c, program_shape
    call = entry_call(core_module, entry, dims, params, values, realization, True, grad,
                      remat, plan=plan)
    _, native = compile_call(call)
    outputs = native(call.inputs)
    kernel = call.pipeline.kernel
    files = c_sources(kernel, call.output_names)
    names = entry_c(kernel, call.output_names)
    data = {f"inputs/{f}.bin": _little_endian(a) for (f, _), a in zip(names.inputs, call.inputs)}
    data |= {f"expected/{f}.bin": _little_endian(a)
             for (f, _), a in zip(names.outputs, outputs)}
    for relative, content in [*files.items(), *data.items()]:
        write_into(out_dir, relative, content)
    return CExport(files, data, program_shape(kernel), call.pipeline.realization_name, call,
                   names)
