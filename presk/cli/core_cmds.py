"""The subcommands that work on PSK-Core: `dump --stage core`, `run`, `init`.

Their heavy imports (xDSL, gmpy2) happen here, when one of them runs, never for `check`.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from .common import ProgramError, UsageError, elaborate_or_report


def load_core(path: str):
    """A PSK-Core module from a .psk program (elaborated and lowered) or an .mlir file."""
    if path.endswith(".mlir"):
        return parse_mlir(path), None
    from ..frontend.lower import LoweringError, lower_program
    program = elaborate_or_report(path)
    try:
        return lower_program(program), program
    except LoweringError as exc:
        print(f"{path}: error: {exc}", file=sys.stderr)
        raise ProgramError() from None


def parse_mlir(path: str, all_stages: bool = False):
    """An MLIR file: PSK-Core (and with `all_stages` also PSK-Realize and PSK-Kernel),
    verified; a syntax or verifier error is a diagnostic (exit 1), an unreadable file one
    line (exit 2)."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError, VerifyException

    from ..dialects.core import Core
    try:
        text = open(path, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"presk: {path}: cannot read ({exc})") from None
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Core)
    if all_stages:
        from ..dialects.kernel import Kernel
        from ..dialects.realize import Realize
        ctx.load_dialect(Realize)
        ctx.load_dialect(Kernel)
    try:
        module = Parser(ctx, text, name=path).parse_module()
        module.verify()
    except ParseError as exc:
        print(_parse_error_text(exc), file=sys.stderr)
        raise ProgramError() from None
    except VerifyException as exc:
        print(f"{path}: error: {exc}", file=sys.stderr)
        raise ProgramError() from None
    return module


def _parse_error_text(exc) -> str:
    """`file:line:col: error: message`, the line, carets under the span: the form of every
    diagnostic, where xDSL's own text names the file twice and puts the message last."""
    from xdsl.utils.exceptions import MultipleSpansParseError
    from xdsl.utils.lexer import Span

    span = exc.span
    # xDSL reports an unknown op at the token after its name; point at the name.
    unknown = re.fullmatch(r"Operation (\S+) is not registered", exc.msg)
    if unknown is not None:
        start = span.input.content.rfind(unknown.group(1), 0, span.start)
        if start >= 0:
            span = Span(start, start + len(unknown.group(1)), span.input)
    context = span.print_with_context().splitlines()[1:]  # its first line is the location
    lines = [f"{span.get_location()}: error: {exc.msg}", *context]
    if isinstance(exc, MultipleSpansParseError):
        if exc.ref_text:
            lines.append(exc.ref_text.rstrip("\n"))
        for ref, msg in exc.refs:
            lines.append(ref.print_with_context(msg).rstrip("\n"))
    return "\n".join(lines)


def parse_dims(items: list[str]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in items:
        m = re.fullmatch(r"\s*(\w+)\s*=\s*(\d+)\s*", item)
        if m is None:
            raise UsageError(f"presk: --dim {item}: expected NAME=N, e.g. --dim B=4")
        if int(m.group(2)) == 0:
            # An empty axis has no mean and no max: the interpreter would fail on it.
            raise UsageError(f"presk: --dim {item}: a dim is 1 or more")
        dims[m.group(1)] = int(m.group(2))
    return dims


# ---- presk dump --stage core ----

def reached(module, entry: str) -> list[str]:
    """The functions `entry` reaches through calls and folds, in the module's order."""
    from ..dialects import core as C
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    if entry not in funcs:
        raise UsageError(f"presk: --entry {entry}: no such function (the functions: "
                         + ", ".join(funcs) + ")")
    seen, todo = {entry}, [entry]
    while todo:
        for op in funcs[todo.pop()].body.block.ops:
            callee_attr = op.attributes.get("callee")
            if callee_attr is not None:
                callee = callee_attr.root_reference.data
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
    return [name for name in funcs if name in seen]


def differentiate(module, entries: list[str], remat: str) -> None:
    """Replace every grad, and differentiate `entries`: psk-differentiate."""
    from ..transforms.differentiate import DifferentiationError, Differentiator
    try:
        Differentiator(module, remat).run(entries)
    except DifferentiationError as exc:
        print(f"presk: error: {exc}", file=sys.stderr)
        raise ProgramError() from None


# Operations that only move values between structures, not compute on reals.
STRUCTURE = ("psk_core.get", "psk_core.tuple", "psk_core.tree", "psk_core.field")


def count_ops(module, names: list[str]) -> tuple[int, int]:
    """The operations of these functions (returns aside), and those that are not structure."""
    from ..dialects import core as C
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    ops = [o for n in names for o in funcs[n].body.block.ops if not isinstance(o, C.ReturnOp)]
    return len(ops), sum(o.name not in STRUCTURE for o in ops)


def dump_vjp(args: argparse.Namespace) -> int:
    if not args.entry:
        raise UsageError("presk dump: --stage vjp needs --entry, e.g. --entry loss")
    module, _ = load_core(args.file)
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


def dump_core(args: argparse.Namespace) -> int:
    if args.stage == "vjp":
        return dump_vjp(args)
    module, program = load_core(args.file)
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

def _entry(args: argparse.Namespace, module):
    from ..analysis import entry as E
    from ..analysis.weights import WeightsError
    try:
        return E.prepare(module, args.entry, parse_dims(args.dim))
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None


def _save(tensors, path: str) -> None:
    """Write a safetensors file; a path that cannot be written is one line, exit code 2."""
    from ..analysis.weights import WeightsError, save_tensors
    try:
        save_tensors(tensors, path)
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None


def cmd_run(args: argparse.Namespace) -> int:
    if args.bits is not None and args.engine != "mpfr":
        raise UsageError(f"presk run: --bits applies to --engine mpfr, not {args.engine}")
    if args.engine == "native":
        from .native_cmds import run_native_cmd
        return run_native_cmd(args)
    if args.time:
        raise UsageError("presk run: --time applies to --engine native")
    if args.realize and args.engine in ("f64", "mpfr"):
        raise UsageError(f"presk run: --realize applies to --engine native or kernel, not "
                         f"{args.engine}")
    if args.engine == "kernel":
        from .kernel_cmds import run_kernel_cmd
        return run_kernel_cmd(args)
    from ..analysis import entry as E
    from ..analysis.interpret import Interpreter
    from ..analysis.numbers import number_system
    from ..analysis.weights import WeightsError
    module, _ = load_core(args.file)
    differentiate(module, [args.entry] if args.grad else [], args.remat)
    entry = _entry(args, module)
    numbers = number_system(None if args.engine == "f64" else args.bits or 128)
    try:
        params = E.weights(entry, args.seed, args.weights)
        values = E.inputs(entry, args.seed, args.inputs)
    except WeightsError as exc:
        raise UsageError(f"presk: {exc}") from None
    arguments = E.arguments(entry, numbers, params, values)
    interpreter = Interpreter(module, numbers)
    if args.grad:
        with numbers.context():
            one = numbers.constant(1.0)
        result, *grads = interpreter.run(args.entry + ".value_vjp", arguments + [one],
                                         entry.dims)
        flat = E.flatten_result(result)
        flat.update(E.flatten_gradient(entry, grads[0]))
    else:
        flat = E.flatten_result(interpreter.run(args.entry, arguments, entry.dims))
    print(f"{args.entry} at " + ", ".join(f"{k} = {v}" for k, v in entry.dims.items())
          + f" in {numbers.name}:" if entry.dims else f"{args.entry} in {numbers.name}:")
    for path, value in flat.items():
        print(f"  {path} = {_show(value)}")
    if args.out:
        _save({k: numbers.to_f64(v) for k, v in flat.items()}, args.out)
        print(f"  written to {args.out}")
    return 0


def _show(value: Any) -> str:
    import numpy as np
    array = np.asarray(value)
    if array.shape == ():
        return str(array.item())
    if array.dtype == object:  # MPFR: every digit, as a scalar result prints
        return np.array2string(array, separator=", ", formatter={"all": str},
                               max_line_width=100)
    return np.array2string(array, precision=17, separator=", ")


def cmd_init(args: argparse.Namespace) -> int:
    from ..analysis import entry as E
    module, _ = load_core(args.file)
    entry = _entry(args, module)
    if not entry.fields:
        raise UsageError(f"presk: `{args.entry}` takes no parameter tree")
    tensors = E.weights(entry, args.seed, None)
    _save(tensors, args.output)
    reals = sum(int(v.size) for v in tensors.values())
    print(f"presk init: {len(tensors)} tensors, {reals} reals, seed {args.seed}, "
          f"into {args.output}")
    return 0


def add_run(sub: Any) -> None:
    p = sub.add_parser("run", help="run an entry: native code, the kernel interpreter, f64 "
                       "or exactly (MPFR)")
    p.add_argument("file", help="a .psk program or a PSK-Core .mlir file")
    p.add_argument("--entry", required=True, help="the function to run, e.g. loss")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                   help="a dim's value, e.g. --dim B=4 (repeatable)")
    p.add_argument("--engine", choices=["native", "kernel", "f64", "mpfr"], default="native",
                   help="native (machine code compiled through LLVM, the default), kernel "
                   "(the loop nests of PSK-Kernel interpreted: the same bits), f64 (IEEE "
                   "binary64 on PSK-Core) or mpfr (exact)")
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
    p.add_argument("--out", help="write the result to this safetensors file")
    p.add_argument("--grad", action="store_true",
                   help="also the gradient in the entry's first argument (`grad.<path>`)")
    p.add_argument("--remat", choices=["store", "recompute"], default="store",
                   help="with --grad: what the forward sweep keeps for the reverse one")
    p.set_defaults(run=cmd_run)


def add_init(sub: Any) -> None:
    p = sub.add_parser("init", help="write an entry's initial weights (safetensors)")
    p.add_argument("file", help="a .psk program or a PSK-Core .mlir file")
    p.add_argument("--entry", required=True, help="the function whose parameter tree it is")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True, help="the safetensors file to write")
    p.set_defaults(run=cmd_init)


def _bits(text: str) -> int:
    if not text.isdigit() or not 2 <= int(text) <= 1 << 20:
        raise argparse.ArgumentTypeError(f"{text!r} is not a precision in bits (2 or more)")
    return int(text)
