"""`presk import-fpcore FILE.fpcore -o FILE.psk [--ranges FILE.ranges.json]`: FPBench's
straight-line FPCore as a .psk program and its precondition's box as ranges
(presk/frontend/fpcore.py; the ranges' format is docs/artifacts.md's `presk-ranges/1`).

What cannot be imported is one line (`file:line:col: …`) and exit 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .common import UsageError


def add_import_fpcore(sub: Any) -> None:
    p = sub.add_parser("import-fpcore", help="translate FPCore (FPBench) programs into a "
                       ".psk file and their preconditions into ranges (presk-ranges/1)")
    p.add_argument("file", help="the .fpcore file")
    p.add_argument("-o", "--out", required=True, metavar="FILE.psk", help="the program to write")
    p.add_argument("--ranges", metavar="FILE",
                   help="where the ranges go (default: beside the program, "
                   "<stem>.ranges.json; with several FPCores <stem>.<name>.ranges.json)")
    p.set_defaults(run=cmd_import_fpcore)


def cmd_import_fpcore(args: argparse.Namespace) -> int:
    from ..analysis.artifact import write_atomic
    from ..analysis.ranges import RangesError, RangeSpec, save_ranges
    from ..frontend.fpcore import FPCoreError, to_psk, translate

    try:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"presk import-fpcore: {args.file}: cannot read "
                         f"({getattr(exc, 'strerror', None) or exc})") from None
    try:
        cores = translate(text, args.file)
    except FPCoreError as exc:
        raise UsageError(f"presk import-fpcore: {exc}") from None
    stem = os.path.splitext(args.out)[0]
    try:
        write_atomic(args.out, to_psk(cores, os.path.basename(args.file)))
        written = [args.out]
        for c in cores:
            place = args.ranges if args.ranges and len(cores) == 1 else \
                f"{stem}.ranges.json" if len(cores) == 1 else f"{stem}.{c.name}.ranges.json"
            save_ranges(RangeSpec(c.name, {a: list(r) for a, r in c.ranges.items()}), place)
            written.append(place)
    except OSError as exc:
        raise UsageError(f"presk import-fpcore: {args.out}: cannot write "
                         f"({exc.strerror or exc})") from None
    except RangesError as exc:
        raise UsageError(f"presk import-fpcore: {exc}") from None
    for c in cores:
        if c.dropped:
            print(f"presk import-fpcore: `{c.title}`: the conjuncts of :pre at "
                  + ", ".join(c.dropped) + " bound no single argument and were dropped (the "
                  "ranges' box holds the set they describe)", file=sys.stderr)
    print(f"presk import-fpcore: {len(cores)} FPCore(s) → " + ", ".join(written))
    return 0
