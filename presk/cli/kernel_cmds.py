"""The subcommands on PSK-Kernel: `presk dump --stage kernel` and `presk run --engine kernel`.

The pipeline (presk/pipeline/record.py `kernel_passes`): the program's PSK-Core → (with
--grad psk-differentiate) → convert-psk-core-to-realize at the entry's dims under a
realization → psk-fuse → convert-psk-realize-to-kernel.

  dump_kernel(args) -> int      args: file, entry; optional dim, realize (None, a path,
                                @path or inline JSON); optional format ("listing"|"mlir"),
                                fuse (default True), grad (False), remat ("store")
  run_kernel_cmd(args) -> int   args as `presk run` (file, entry, dim, seed, weights,
                                inputs, out, grad, remat) plus realize
"""

from __future__ import annotations

import argparse

from ..pipeline import kernel_pipeline, load_core, parse_dims, run_kernel
from .common import UsageError, reported, warn
from .runs import prepare_run, print_run


@reported
def dump_kernel(args: argparse.Namespace) -> int:
    kernel_printed(args)
    return 0


def kernel_printed(args: argparse.Namespace):
    """The entry's PSK-Kernel, printed; its Pipeline (`presk explain` reads it)."""
    from ..emit.kernel_listing import format_listing
    if not getattr(args, "entry", None):
        raise UsageError("presk dump: --stage kernel needs --entry, e.g. --entry loss")
    module, _ = load_core(args.file, warn)
    dims = parse_dims(getattr(args, "dim", None) or [])
    pipe = kernel_pipeline(module, args.entry, dims, getattr(args, "realize", None),
                           getattr(args, "fuse", True), getattr(args, "grad", False),
                           getattr(args, "remat", "store"), getattr(args, "plan", None),
                           getattr(args, "fuse_reductions", False))
    if getattr(args, "format", "listing") == "mlir":
        print(pipe.kernel)
    else:
        print(format_listing(pipe.kernel, pipe.realization_name).rstrip("\n"))
    return pipe


@reported
def run_kernel_cmd(args: argparse.Namespace) -> int:
    """`presk run FILE --entry E --dim … --engine kernel [--realize …]`: print as `presk
    run` does, with the run's launches."""
    module, entry, params, values, pipe = prepare_run(args)
    run = run_kernel(module, args.entry, entry.dims, params, values,
                     getattr(args, "realize", None), grad=getattr(args, "grad", False),
                     remat=getattr(args, "remat", "store"),
                     cotangent=getattr(args, "seed_value", None),
                     plan=getattr(args, "plan", None), pipe=pipe)
    print_run(args, entry.dims, f"the kernel interpreter under "
              f"{run.pipeline.realization_name} ({run.stats.launches} launches)", run.result)
    return 0
