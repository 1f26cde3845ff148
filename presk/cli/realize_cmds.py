"""`presk dump FILE --stage realize --entry E --dim B=4 [--realize @r.json] [--no-fuse]`:
the entry recorded in PSK-Realize, its fusion groups, and why each element-wise value
reaches memory (§7 of the reference).

`add_to_dump(parser)` adds the options this stage reads to the `dump` subparser (those
not there already): `--dim NAME=N` (repeatable, dest `dim`), `--realize SPEC` (dest
`realize`: a path, `@path` or inline JSON; absent = all f64), `--no-fuse` (dest `fuse`,
default True) and `--fuse-limit N` (dest `fuse_limit`, default 8). `dump_realize(args)`
reads `file`, `entry`, `dim`, `realize`, `fuse`, and optionally `fuse_limit` and
`format` ("mlir" prints the IR instead of the listing).
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import FUSE_REDUCTIONS_HELP, UsageError, add_dim_argument, reported, warn


def add_to_dump(parser: argparse.ArgumentParser) -> None:
    have = set(parser._option_string_actions)  # noqa: SLF001 — argparse has no public query
    if "--dim" not in have:
        add_dim_argument(parser, "with --stage realize: a dim's value, e.g. --dim B=4")
    if "--realize" not in have:
        parser.add_argument("--realize", metavar="REALIZATION",
                            help="with --stage realize: the realization (a path, @path or "
                            "inline JSON, format presk-realization/1); absent: all f64")
    if "--no-fuse" not in have:
        parser.add_argument("--no-fuse", dest="fuse", action="store_false", default=True,
                            help="with --stage realize: do not group element-wise ops")
    if "--fuse-reductions" not in have:
        parser.add_argument("--fuse-reductions", dest="fuse_reductions", action="store_true",
                            help="with --stage realize or kernel: " + FUSE_REDUCTIONS_HELP)
    if "--fuse-limit" not in have:
        parser.add_argument("--fuse-limit", dest="fuse_limit", type=int, default=8,
                            metavar="N", help="with --stage realize: at most N steps a group")


def realize_module(args: argparse.Namespace) -> tuple[Any, Any, list[str]]:
    """The Core module, the recorded (and fused) Realize module, the reached functions."""
    from ..pipeline import load_core, load_realization, parse_dims, reached, record_entry

    if not args.entry:
        raise UsageError("presk dump: --stage realize needs --entry, e.g. --entry loss")
    realization = load_realization(getattr(args, "realize", None))
    core, _ = load_core(args.file, warn)
    order = reached(core, args.entry)
    dims = parse_dims(getattr(args, "dim", None) or [])
    fuse = getattr(args, "fuse", True)
    module, _ = record_entry(core, args.entry, dims, realization, fuse,
                             fuse_limit=getattr(args, "fuse_limit", 8),
                             fuse_reductions=getattr(args, "fuse_reductions", False))
    if fuse:
        module.verify()
    return core, module, order


@reported
def dump_realize(args: argparse.Namespace) -> int:
    core, module, order = realize_module(args)
    if getattr(args, "format", "listing") == "mlir":
        print(module)
        return 0
    from ..dialects import realize as R
    from ..emit.realize_listing import format_report
    runs = R.instance_runs(module)
    dims = R.entry_func(module).dim_values
    at = " at " + ", ".join(f"{k} = {v}" for k, v in dims.items()) if dims else ""
    print(f"{args.entry}{at}: {len(runs)} recordings of "
          f"{len({f.source_func for f in R.funcs(module)})} functions\n")
    print(format_report(module, core, order, getattr(args, "fuse_limit", 8)).rstrip("\n"))
    return 0
