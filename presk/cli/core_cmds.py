"""The subcommands that work on PSK-Core: `dump --stage core`, `run`, `init`.

Their heavy imports (xDSL, gmpy2) happen here, when one of them runs, never for `check`.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..pipeline import differentiate, load_core, parse_dims, prepare, prepare_entry, reached
from .common import (FUSE_REDUCTIONS_HELP, UsageError, add_dim_argument, add_entry_arguments,
                    add_plan_argument, output_file, reported, warn)
from .optimize_cmds import add_opt
from .print_pipeline import add_flag, print_pipeline
from .runs import cotangent_seed, print_header, save, show


# ---- presk dump --stage core ----

# Operations that only move values between structures, not compute on reals.
STRUCTURE = ("psk_core.get", "psk_core.tuple", "psk_core.tree", "psk_core.field")


def count_ops(module, names: list[str]) -> tuple[int, int]:
    """The operations of these functions (returns aside), and those that are not structure."""
    from ..dialects import core as C
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    ops = [o for n in names for o in funcs[n].body.block.ops if not isinstance(o, C.ReturnOp)]
    return len(ops), sum(o.name not in STRUCTURE for o in ops)


@reported
def dump_vjp(args: argparse.Namespace) -> int:
    if not args.entry:
        raise UsageError("presk dump: --stage vjp needs --entry, e.g. --entry loss")
    module, _ = load_core(args.file, warn)
    forward = reached(module, args.entry)
    differentiate(module, [args.entry], args.remat)
    if args.format == "mlir":
        print(module)
        return 0
    from ..emit.core_listing import format_module
    names = [n for n in reached(module, args.entry + ".vjp") if n not in forward]
    (ops, work), (before, before_work) = count_ops(module, names), count_ops(module, forward)
    print(f"The vjp of {args.entry} under --remat {args.remat}: {len(names)} functions, "
          f"{ops} operations, {ops / before:.2f}× the {before} of the {len(forward)} functions "
          f"of the forward; without structure ({', '.join(o.split('.')[1] for o in STRUCTURE)})"
          f" {work}, {work / before_work:.2f}× the forward's {before_work}.\n")
    print(format_module(module, names).rstrip("\n"))
    return 0


@reported
def dump_core(args: argparse.Namespace) -> int:
    if args.stage == "vjp":
        return dump_vjp(args)
    module, program = load_core(args.file, warn)
    if args.format == "mlir":
        print(module)
        return 0
    from ..emit.core_listing import format_module
    names = None
    if args.entry:
        names = reached(module, args.entry)
        total = _program_function_count(module, program)
        print(f"The functions {args.entry} reaches ({len(names)} of the program's {total}):\n")
    text = format_module(module, names)
    print(text.rstrip("\n"))
    return 0


def _program_function_count(module, program) -> int:
    """The program's functions: its own, one initializer per module, three per optimizer."""
    from ..dialects import core as C
    funcs = sum(isinstance(op, C.FuncOp) for op in module.ops)
    if program is None:
        return funcs
    optimizers = sum(len(f.optimizers) for f in program.files)
    return funcs + len(program.modules()) + 3 * optimizers


# ---- presk run, presk init ----

@reported
def cmd_run(args: argparse.Namespace) -> int:
    if args.bits is not None and args.engine != "mpfr":
        raise UsageError(f"presk run: --bits applies to --engine mpfr, not {args.engine}")
    if (args.measure or args.profile) and args.engine != "native":
        raise UsageError("presk run: --measure and --profile apply to --engine native")
    if args.time and args.engine != "native":
        raise UsageError("presk run: --time applies to --engine native")
    if args.cotangent is not None and not args.grad:
        raise UsageError("presk run: --cotangent applies to --grad")
    if args.plan and args.engine in ("f64", "mpfr"):
        raise UsageError(f"presk run: --plan applies to --engine native or kernel, not "
                         f"{args.engine}")
    if args.realize and args.engine in ("f64", "mpfr"):
        raise UsageError(f"presk run: --realize applies to --engine native or kernel, not "
                         f"{args.engine}")
    if getattr(args, "print_pipeline", False):
        return print_pipeline(args)
    if args.engine == "native":
        from .native_cmds import run_native_cmd
        return run_native_cmd(args)
    if args.engine == "kernel":
        from .kernel_cmds import run_kernel_cmd
        return run_kernel_cmd(args)
    from ..analysis import entry as E
    from ..analysis.interpret import Interpreter
    from ..analysis.numbers import number_system
    from .optimize_cmds import load_core_opt
    module, _ = load_core_opt(args)
    differentiate(module, [args.entry] if args.grad else [], args.remat)
    entry, params, values = prepare_entry(module, args.entry, parse_dims(args.dim), args.seed,
                                          args.weights, args.inputs)
    numbers = number_system(None if args.engine == "f64" else args.bits or 128)
    seed = cotangent_seed(entry, args) if args.grad else None
    arguments = E.arguments(entry, numbers, params, values)
    interpreter = Interpreter(module, numbers)
    if args.grad:
        with numbers.context():
            dy = numbers.constant(float(seed)) if seed.shape == () else numbers.array(seed)
        result, *grads = interpreter.run(args.entry + ".value_vjp", arguments + [dy],
                                         entry.dims)
        flat = E.flatten_result(result)
        flat.update(E.flatten_gradient(entry, grads[0]))
    else:
        flat = E.flatten_result(interpreter.run(args.entry, arguments, entry.dims))
    print_header(args, entry.dims, numbers.name)
    for path, value in flat.items():
        print(f"  {path} = {show(value)}")
    if args.out:
        save({k: numbers.to_f64(v) for k, v in flat.items()}, args.out)
        print(f"  written to {args.out}")
    return 0


@reported
def cmd_init(args: argparse.Namespace) -> int:
    from ..analysis import entry as E
    module, program = load_core(args.file, warn)
    dims = parse_dims(args.dim)
    if args.entry is None:
        args.entry, dims = _objective(args.file, program, dims)
    entry = prepare(module, args.entry, dims)
    if not entry.fields:
        raise UsageError(f"presk: `{args.entry}` takes no parameter tree")
    tensors = E.weights(entry, args.seed, None)
    save(tensors, args.output)
    reals = sum(int(v.size) for v in tensors.values())
    print(f"presk init: {len(tensors)} tensors, {reals} reals, seed {args.seed}, "
          f"into {args.output}")
    return 0


def _objective(path: str, program, dims: dict[str, int]) -> tuple[str, dict[str, int]]:
    """The entry `presk init` takes without --entry: the objective of the file's training
    run (at the run's batch dims, unless --dim gives them)."""
    runs = program.main.trainings if program is not None else {}
    if len(runs) != 1:
        what = "no `training` run" if not runs else f"several runs ({', '.join(runs)})"
        raise UsageError(f"presk init: {path} has {what}: name the entry with --entry")
    run = next(iter(runs.values()))
    return run.objective.name, dims or dict(run.dims)


def add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="run an entry: native code, the kernel interpreter, f64 "
                       "or exactly (MPFR)")
    p.add_argument("file", help="a .psk program or a PSK-Core .mlir file")
    add_entry_arguments(p, "run", required=True)
    p.add_argument("--engine", choices=["native", "kernel", "f64", "mpfr"], default="native",
                   help="native (machine code compiled through LLVM, the default), kernel "
                   "(the loop nests of PSK-Kernel interpreted: the same bits), f64 (IEEE "
                   "binary64 on PSK-Core) or mpfr (exact)")
    add_plan_argument(p)
    p.add_argument("--measure", action="store_true",
                   help="with --engine native: each kernel timed beside the machine "
                   "profile's prediction, the call and the host's share, u and ρ")
    p.add_argument("--profile", metavar="PROFILE",
                   help="with --measure: the profile (default: this machine's, from "
                   "`presk profile calibrate`)")
    p.add_argument("--realize", metavar="REALIZATION",
                   help="with --engine native or kernel: the realization (a path, @path or "
                   "inline JSON, format presk-realization/1); absent: all f64")
    p.add_argument("--time", action="store_true",
                   help="with --engine native: also the time per call (median of repeats) "
                   "and the compile time")
    p.add_argument("--bits", type=_bits, help="with --engine mpfr: the precision (default 128)")
    p.add_argument("--seed", type=int, default=0, help="seed of initial weights and inputs")
    p.add_argument("--weights", help="a safetensors file of parameters keyed by path")
    p.add_argument("--inputs", help="a safetensors file of inputs keyed by argument path "
                   "(`batch.0`); absent ones are drawn from the seed")
    p.add_argument("--out", type=output_file,
                   help="write the result to this safetensors file")
    p.add_argument("--grad", action="store_true",
                   help="also the gradient in the entry's first argument (`grad.<path>`): "
                   "of the result when it is ℝ[], of ⟨cotangent, result⟩ for a tensor result")
    p.add_argument("--cotangent", metavar="C",
                   help="with --grad: the cotangent c the gradient of Σ c·result is taken "
                   "with: a number (every element), or a safetensors file holding `result` "
                   "of the result's shape; required for a tensor result (default 1 for ℝ[])")
    p.add_argument("--remat", choices=["store", "recompute"], default="store",
                   help="with --grad: what the forward sweep keeps for the reverse one")
    p.add_argument("--fuse-reductions", action="store_true",
                   help="with --engine native or kernel: " + FUSE_REDUCTIONS_HELP)
    add_opt(p)
    add_flag(p)
    p.set_defaults(run=cmd_run)


def add_init(sub: Any) -> None:
    p = sub.add_parser("init", help="write an entry's initial weights (safetensors)")
    p.add_argument("file", help="a .psk program or a PSK-Core .mlir file")
    p.add_argument("--entry", help="the function whose parameter tree it is (default: the "
                   "objective of the file's training run)")
    add_dim_argument(p)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, type=output_file,
                   help="the safetensors file to write")
    p.set_defaults(run=cmd_init)


def _bits(text: str) -> int:
    if not text.isdigit() or not 2 <= int(text) <= 1 << 20:
        raise argparse.ArgumentTypeError(f"{text!r} is not a precision in bits (2 or more)")
    return int(text)
