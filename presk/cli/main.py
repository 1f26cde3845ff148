"""`presk`: the user's command. Each subcommand is a pipeline of the compiler's stages.

Exit codes: 0 success, 1 a mistake in the user's program (diagnostics on stderr), 2 a bad
command line or an unreadable input (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, NoReturn

from ..gc_pause import tune_process
from . import (
    bounds_cmds, core_cmds, data_cmd, export_cmds, fpcore_cmd, precision_cmds, realize_cmds,
    sensitivity_cmds, solve_cmds, train_cmds,
)
from .common import (
    UsageError, add_plan_argument, elaborate_or_report, exit_code, printable_streams,
    relative_budget, reported,
)
from .print_pipeline import add_flag, print_pipeline


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line and exit code 2, not a usage block."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see `{self.prog} --help`)")


def _diagnostics_line(program) -> str:
    n = len(program.diagnostics)
    return "Diagnostics: none" if n == 0 else f"Diagnostics: 0 errors, {n} warning{'s' * (n > 1)}"


def cmd_check(args: argparse.Namespace) -> int:
    if args.precision:
        return bounds_cmds.check_precision(args)
    program = elaborate_or_report(args.file)
    if args.summary:
        from ..frontend.summary import check_summary
        print(check_summary(program))
        print()
    print(_diagnostics_line(program))
    return 0


def cmd_dump(args: argparse.Namespace) -> int:
    if getattr(args, "print_pipeline", False):
        return print_pipeline(args)
    if args.stage in ("core", "vjp"):
        return core_cmds.dump_core(args)
    if args.stage == "opt":
        from .optimize_cmds import dump_opt
        return reported(dump_opt)(args)
    if args.stage == "realize":
        return realize_cmds.dump_realize(args)
    if args.stage == "kernel":
        from .kernel_cmds import dump_kernel
        return dump_kernel(args)
    if args.stage == "sensitivity":
        from .sensitivity_cmds import dump_sensitivity
        return dump_sensitivity(args)
    if args.entry or args.format != "listing":
        raise UsageError("presk dump: --entry and --format apply to --stage core, opt, vjp, "
                         "realize, kernel and sensitivity")
    program = elaborate_or_report(args.file)
    from ..frontend.summary import elab_listing
    print(elab_listing(program))
    return 0


def _add_check(sub: Any) -> None:
    p = sub.add_parser("check", help="parse and elaborate a program, report diagnostics")
    p.add_argument("file", help="the program's main .psk file")
    p.add_argument("--summary", action="store_true",
                   help="print types, regularity, effects, the training run, assertions and "
                   "parameter counts")
    bounds_cmds.add_to_check(p)
    p.set_defaults(run=cmd_check)


def _add_dump(sub: Any) -> None:
    p = sub.add_parser("dump", help="print the program at a stage of the compiler")
    p.add_argument("file", help="the program's main .psk file")
    p.add_argument("--stage", required=True,
                   choices=["elab", "core", "opt", "vjp", "realize", "kernel", "sensitivity"],
                   help="elab: the elaborated program and its module instances; core: the "
                   "program in PSK-Core; opt: PSK-Core after the e-graph optimizer, and the rewrites it "
                   "used (with --entry: measured on its f64 run at --dim, --seed); vjp: the entry's reverse sweep; realize: the entry "
                   "recorded at --dim values under --realize, with its fusion groups; kernel: "
                   "its loop nests and host; sensitivity: ‖∂L/∂v‖₁ at each site")
    p.add_argument("--budget", type=relative_budget, metavar="B",
                   help="with --stage opt: the relative error budget the accuracy term "
                   "counts bits against (docs/egraph.md)")
    p.add_argument("--entry", help="with --stage core: only the functions this one reaches; "
                   "with --stage vjp: the function to differentiate")
    p.add_argument("--format", choices=["listing", "mlir"], default="listing",
                   help="with --stage core or vjp: the listing (default) or the MLIR text")
    p.add_argument("--remat", choices=["store", "recompute"], default="store",
                   help="with --stage vjp or kernel --grad: what the forward sweep keeps for "
                   "the reverse one")
    p.add_argument("--grad", action="store_true",
                   help="with --stage kernel: the entry's value and gradient (`E.value_vjp`, "
                   "as `presk run --grad --engine kernel` runs it)")
    realize_cmds.add_to_dump(p)
    sensitivity_cmds.add_to_dump(p)
    from .optimize_cmds import add_profile
    add_profile(p)
    p.add_argument("--no-times", action="store_true",
                   help="with --stage opt: leave out the optimizer's own seconds "
                   "(saturation, extraction), which change from run to run")
    add_plan_argument(p)
    add_flag(p)
    p.set_defaults(run=cmd_dump)


def _add_memory(sub: Any) -> None:
    from .memory_cmd import add_memory  # the command's module imports nothing heavy at top
    add_memory(sub)


def _add_profile(sub: Any) -> None:
    from .profile_cmd import add_profile
    add_profile(sub)


def _add_explain(sub: Any) -> None:
    from .explain_cmd import add_explain
    add_explain(sub)


def _add_plan(sub: Any) -> None:
    from .plan_cmd import add_plan
    add_plan(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="presk", description="The Presk compiler.")
    from .. import __version__
    parser.add_argument("--version", action="version", version=f"presk {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for add in (_add_check, _add_dump, core_cmds.add_run, core_cmds.add_init,
                precision_cmds.add_calibrate, solve_cmds.add_solve, export_cmds.add_export,
                _add_memory, _add_profile, _add_plan, _add_explain, train_cmds.add_train, data_cmd.add_parser, fpcore_cmd.add_import_fpcore):
        add(sub)
    # `presk explain` runs each section's command line through this same parser; handed to
    # it here so that the explain package never imports this module (which imports it).
    parser.set_defaults(parse_presk=parser.parse_args)
    return parser


def main(argv: list[str] | None = None) -> int:
    printable_streams()
    tune_process()  # presk/gc_pause.py: this process is ours

    def run() -> int:
        args = build_parser().parse_args(argv)
        command: Callable[[argparse.Namespace], int] = reported(args.run)
        return command(args)
    return exit_code(run, "presk")


if __name__ == "__main__":
    sys.exit(main())
