"""`presk export FILE --target c|pytorch -o DIR`: the program for where Python is not (a C
program that computes the native bits) and for the ecosystem users already have (a
PyTorch module).

Each target lives in its own module and is imported only when asked for:
  c        presk/cli/export_c.py        run(args) -> int
  pytorch  presk/cli/export_pytorch.py  run(args) -> int
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from .common import add_plan_argument, add_recording_arguments
from .optimize_cmds import add_opt
from .print_pipeline import add_flag, print_pipeline

TARGETS = {"c": "export_c", "pytorch": "export_pytorch"}


def cmd_export(args: argparse.Namespace) -> int:
    if getattr(args, "print_pipeline", False):
        return print_pipeline(args)
    module = importlib.import_module(f"{__package__}.{TARGETS[args.target]}")
    return module.run(args)


def add_export(sub: Any) -> None:
    p = sub.add_parser("export", help="write the program as C (the native bits) or as a "
                       "PyTorch module")
    p.add_argument("file", help="the program's main .psk file (or a PSK-Core .mlir file)")
    p.add_argument("--target", required=True, choices=sorted(TARGETS),
                   help="c: a C program of one entry at --dim values under --realize; "
                   "pytorch: one Python module per .psk file")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="the directory to write (created; files in it are replaced)")
    t = p.add_argument_group("with --target pytorch")
    t.add_argument("--train", action="store_true",
                   help="also DIR/train.py, the file's training run for torchrun (DDP), and "
                   "DIR/init.safetensors, its initial weights at --seed")
    c = p.add_argument_group("with --target c (--realize, --entry, --dim also with pytorch)")
    add_recording_arguments(c, "export")
    add_plan_argument(c)
    c.add_argument("--threads", type=int, metavar="N",
                   help="the workers a large contraction's default layout splits among, "
                   "run by the program's worker pool (default: PRESK_THREADS, else this "
                   "machine's cores; 1: one thread, no pool)")
    c.add_argument("--seed", type=int, default=0,
                   help="seed of the weights and inputs `make check` runs on")
    c.add_argument("--weights", help="a safetensors file of parameters keyed by path")
    c.add_argument("--inputs", help="a safetensors file of inputs keyed by argument path")
    add_flag(p)
    add_opt(p)
    p.set_defaults(run=cmd_export)
