"""`presk profile calibrate [-o profile.json] [--quick]` and `presk profile show FILE`:
the machine profile (presk/analysis/profile.py) — measured and fitted here
(presk/pipeline/profile.py), or read and printed as the reference's "Machine" and "Layout
model" tables."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .common import UsageError


def cmd_show(args: argparse.Namespace) -> int:
    from ..analysis.profile import ProfileError, load_profile, render_profile
    try:
        profile = load_profile(args.file)
    except ProfileError as exc:
        raise UsageError(str(exc) if str(exc).startswith("presk") else f"presk: {exc}") \
            from None
    sys.stdout.write(render_profile(profile))
    return 0


class _Bar:
    """A rich progress bar on stderr: the nests compiled, then timed."""

    def __enter__(self) -> _Bar:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn)
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
        self.progress.__enter__()
        self.task = self.progress.add_task("recording the calibration's nests", total=None)
        return self

    def __call__(self, what: str, done: int, total: int) -> None:
        words = {"compiling": f"compiling {total} points (one module)",
                 "timing": "timing each point"}[what]
        self.progress.update(self.task, description=words, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from ..analysis.artifact import check_output, write_atomic
    from ..analysis.profile import render_profile
    from ..pipeline.profile import cached_profile_path, calibrate
    if args.out:
        try:
            check_output(args.out)
        except OSError as exc:
            raise UsageError(f"presk: {args.out}: cannot write ({exc.strerror})") from None
    with _Bar() as bar:
        profile, took = calibrate(args.quick, bar)
    text = json.dumps(profile.to_json(), indent=2, ensure_ascii=False) + "\n"
    cached = cached_profile_path(profile.machine)
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(cached, text)
    if args.out:
        write_atomic(args.out, text)
    m = profile.model
    print(f"presk profile calibrate: {m.points} points timed in {took:.1f} s"
          f"{' (--quick)' if args.quick else ''}; on {m.held_out} held out of the fit: "
          f"u = {m.u:.3f} (median), {m.u90:.3f} (90th percentile), ρ = {m.rho:.3f}")
    print(f"  kept for this CPU in {cached}" + (f"; written to {args.out}" if args.out
                                               else ""))
    sys.stdout.write(render_profile(profile))
    return 0


def add_profile(sub: Any) -> None:
    p = sub.add_parser("profile", help="the machine profile the layout plan is priced by")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", parser_class=type(p))
    verbs.required = True
    show = verbs.add_parser("show", help="print a profile's Machine and Layout model tables")
    show.add_argument("file", help="a presk-profile/2 file (or @file, or inline JSON)")
    show.set_defaults(run=cmd_show)
    cal = verbs.add_parser("calibrate", help="time PSK-Kernel nests across the layout "
                           "space on this machine and fit the cost model's constants")
    cal.add_argument("-o", "--out", help="also write the profile here (it is always kept "
                     "for this CPU under the cache directory, ~/.cache/presk/profiles/)")
    cal.add_argument("--quick", action="store_true",
                     help="fewer sizes and tiles: seconds, not minutes, and a rougher fit")
    cal.set_defaults(run=cmd_calibrate)
