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

from .common import UsageError


def add_to_dump(parser: argparse.ArgumentParser) -> None:
    have = set(parser._option_string_actions)  # noqa: SLF001 — argparse has no public query
    if "--dim" not in have:
        parser.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                            help="with --stage realize: a dim's value, e.g. --dim B=4")
    if "--realize" not in have:
        parser.add_argument("--realize", metavar="REALIZATION",
                            help="with --stage realize: the realization (a path, @path or "
                            "inline JSON, format presk-realization/1); absent: all f64")
    if "--no-fuse" not in have:
        parser.add_argument("--no-fuse", dest="fuse", action="store_false", default=True,
                            help="with --stage realize: do not group element-wise ops")
    if "--fuse-limit" not in have:
        parser.add_argument("--fuse-limit", dest="fuse_limit", type=int, default=8,
                            metavar="N", help="with --stage realize: at most N steps a group")


def realize_module(args: argparse.Namespace) -> tuple[Any, Any, list[str]]:
    """The Core module, the recorded (and fused) Realize module, the reached functions."""
    from ..analysis.realization import RealizationError, load_realization
    from ..conversion.core_to_realize import RecordError, record
    from .core_cmds import load_core, parse_dims, reached

    if not args.entry:
        raise UsageError("presk dump: --stage realize needs --entry, e.g. --entry loss")
    try:
        realization = load_realization(getattr(args, "realize", None))
    except RealizationError as exc:
        raise UsageError(f"presk: {exc}") from None
    core, _ = load_core(args.file)
    order = reached(core, args.entry)
    dims = parse_dims(getattr(args, "dim", None) or [])
    try:
        module = record(core, args.entry, dims, realization)
    except (RecordError, RealizationError) as exc:
        raise UsageError(f"presk: {exc}") from None
    if getattr(args, "fuse", True):
        from ..transforms.fuse import fuse_module
        fuse_module(module, getattr(args, "fuse_limit", 8))
        module.verify()
    return core, module, order


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
