"""The pipeline: the library every command, the solver, the bounds, training and the tests
call, below the command line (cli/). It is the registered passes (passes.py) run in order:

    load.py    a .psk program elaborated and lowered to PSK-Core, or an .mlir file parsed
    record.py  psk-differentiate, convert-psk-core-to-realize, psk-fuse,
               convert-psk-realize-to-kernel (`recording_passes`, `kernel_pipeline`)
    call.py    an entry's input buffers, the kernel interpreter (`run_kernel`), native
               code (`compile_call`, `run_native`: runtime/compile.py `lowering_passes`)
    export.py  the C program of an entry with the native run's data (`export_c`)
    memory.py  what one call needs in memory (`memory_report`, `presk memory`)

Failures are errors.py's InvalidInput and InvalidProgram, with the text to print; the
command line maps them to its exit codes 2 and 1. Nothing here imports xDSL at import
time, so that `presk check` stays light.
"""

from .call import (
    EntryCall, KernelRun, NativeRun, compile_call, entry_call, entry_inputs, native_passes,
    output_names, record_call, run_kernel, run_native,
)
from .errors import InvalidInput, InvalidProgram, PipelineError
from .load import (
    draw_arguments, elaborate_program, load_core, lower_to_core, parse_dims, parse_mlir,
    prepare, prepare_entry, reached,
)
from .passes import PRESK_DIALECTS, PRESK_PASSES, make_pass, pipeline_text, run_passes
from .record import (
    Pipeline, differentiate, differentiate_passes, kernel_passes, kernel_pipeline,
    load_realization, record_entry, recording_passes,
)

__all__ = [
    "EntryCall", "InvalidInput", "InvalidProgram", "KernelRun", "NativeRun", "Pipeline",
    "PipelineError", "PRESK_DIALECTS", "PRESK_PASSES", "compile_call", "differentiate",
    "differentiate_passes", "draw_arguments", "elaborate_program", "entry_call", "entry_inputs",
    "kernel_passes", "kernel_pipeline", "load_core", "load_realization", "lower_to_core",
    "make_pass", "native_passes", "output_names", "parse_dims", "parse_mlir",
    "pipeline_text", "prepare", "prepare_entry", "reached", "record_call", "record_entry",
    "recording_passes", "run_kernel", "run_native", "run_passes",
]
