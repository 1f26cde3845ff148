"""Loading a program: a .psk file elaborated and lowered to PSK-Core, or an .mlir file
parsed and verified; the dims of an entry; the functions an entry reaches.

Heavy imports (xDSL) happen inside the functions: `presk check` elaborates through here
without them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..limits import parse_size
from .errors import InvalidInput, InvalidProgram

Warn = Callable[[str], None]


def elaborate_program(path: str, warn: Warn | None = None):
    """The elaborated program of a .psk file; each warning, rendered with its source line,
    given to `warn`. An unreadable file is an InvalidInput, an error in the program an
    InvalidProgram (its diagnostic)."""
    from ..frontend.diagnostics import CompileError
    from ..frontend.elaborate import elaborate
    from ..frontend.load import InputError

    sources: dict[str, str] = {}
    try:
        program = elaborate(path, sources)
    except InputError as exc:
        raise InvalidInput(f"presk: {exc}") from None
    except CompileError as exc:
        raise InvalidProgram(exc.diagnostic.render(sources)) from None
    if warn is not None:
        for warning in program.diagnostics:
            warn(warning.render(sources))
    return program


def lower_to_core(program, path: str):
    """The elaborated program in PSK-Core (frontend/lower.py)."""
    from ..frontend.lower import LoweringError, lower_program
    try:
        return lower_program(program)
    except LoweringError as exc:
        raise InvalidProgram(f"{path}: error: {exc}") from None


def load_core(path: str, warn: Warn | None = None):
    """(the PSK-Core module, the elaborated program) of a .psk program, or (the module,
    None) of an .mlir file."""
    if path.endswith(".mlir"):
        return parse_mlir(path), None
    program = elaborate_program(path, warn)
    return lower_to_core(program, path), program


def parse_mlir(path: str, all_stages: bool = False):
    """An MLIR file: PSK-Core (and with `all_stages` also PSK-Realize and PSK-Kernel),
    verified; a syntax or verifier error is an InvalidProgram, an unreadable file an
    InvalidInput."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser
    from xdsl.utils.exceptions import ParseError, VerifyException

    from ..dialects.core import Core
    from .mlir_guard import MLIRTextError, check_mlir_text
    text = read_mlir_text(path, "presk")
    try:
        check_mlir_text(text)  # what xDSL's parser would hang or fail on
    except MLIRTextError as exc:
        raise InvalidProgram(exc.render(path, text)) from None
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
    except ParseError as exc:
        raise InvalidProgram(parse_error_text(exc)) from None
    try:
        module.verify()
    except VerifyException as exc:
        raise InvalidProgram(verify_error_text(path, text, module, exc)) from None
    return module


def read_mlir_text(path: str, prog: str) -> str:
    """The text of an .mlir file; one line (InvalidInput) when it is missing, a directory,
    unreadable, or not UTF-8 (with the line and column of the first bad byte)."""
    if os.path.isdir(path):
        raise InvalidInput(f"{prog}: {path}: is a directory, not an MLIR file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise InvalidInput(f"{prog}: {path}: no such file") from None
    except OSError as exc:
        raise InvalidInput(f"{prog}: {path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InvalidInput(f"{prog}: {path}:{line}:{col}: not UTF-8 (byte "
                           f"0x{data[exc.start]:02x})") from None


def verify_error_text(path: str, text: str, module, exc) -> str:
    """`file:line:col: error: message` at the op that fails to verify, the line and a
    caret: the op is found by verifying each alone (in the order of the text), and its
    place as the same-numbered occurrence of its name in the text (comments aside)."""
    from xdsl.utils.exceptions import VerifyException
    failing, seen = None, {}
    for op in module.walk():
        seen[op.name] = seen.get(op.name, 0) + 1
        try:
            op.verify(verify_nested_ops=False)
        except VerifyException as inner:
            failing, exc = (op, seen[op.name]), inner
            break
    message = " ".join(str(exc).split()) or type(exc).__name__
    if failing is None:
        return f"{path}: error: {message}"
    op, nth = failing
    starts = [m.start(1) for m in re.finditer(
        rf'(?<![\w.$])"?({re.escape(op.name)})(?![\w.])', _without_comments(text))]
    if len(starts) < nth:
        return f"{path}: error: {op.name}: {message}"
    at = starts[nth - 1]
    line = text.count("\n", 0, at) + 1
    begin = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    source = text[begin:end if end >= 0 else len(text)]
    width = len(str(line))
    return "\n".join([f"{path}:{line}:{at - begin + 1}: error: {op.name}: {message}",
                      f"{line} | {source}",
                      f"{' ' * width} | {' ' * (at - begin)}{'^' * len(op.name)}"])


def _without_comments(text: str) -> str:
    """The text with each `// …` comment blanked (same length: offsets stay)."""
    return re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), text)


def parse_error_text(exc) -> str:
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
    """`["B=4", "C=2"]` (each a `--dim` flag's value) → {"B": 4, "C": 2}."""
    dims: dict[str, int] = {}
    for item in items:
        m = re.fullmatch(r"\s*(\w+)\s*=\s*([0-9]+)\s*", item)
        shown = item if len(item) <= 40 else item[:40] + "…"
        if m is None:
            raise InvalidInput(f"presk: --dim {shown}: expected NAME=N, e.g. --dim B=4")
        size = parse_size(m.group(2))  # a positive integer of sane length (presk/limits.py)
        if isinstance(size, str):
            raise InvalidInput(f"presk: --dim {shown}: {size}")
        dims[m.group(1)] = size
    return dims


def reached(module, entry: str) -> list[str]:
    """The functions `entry` reaches through calls and folds, in the module's order."""
    from ..dialects import core as C
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    if entry not in funcs:
        raise InvalidInput(f"presk: --entry {entry}: no such function (the functions: "
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


def prepare_entry(module, entry: str, dims: dict[str, int], seed: int = 0,
                  weights: str | None = None, inputs: str | None = None
                  ) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(the prepared entry (presk.analysis.entry.Entry), its parameters by path, its inputs
    by argument path): from the files given, the rest drawn from `seed`."""
    prepared = prepare(module, entry, dims)
    return (prepared, *draw_arguments(prepared, seed, weights, inputs))


def draw_arguments(prepared, seed: int = 0, weights: str | None = None,
                   inputs: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the parameters by path, the inputs by argument path) of a prepared entry: from
    the files given, the rest drawn from `seed`."""
    from ..analysis import entry as E
    from ..analysis.weights import WeightsError
    try:
        return E.weights(prepared, seed, weights), E.inputs(prepared, seed, inputs)
    except WeightsError as exc:
        raise InvalidInput(f"presk: {exc}") from None


def prepare(module, entry: str, dims: dict[str, int]):
    """The entry at these dims (presk.analysis.entry.prepare): its parameter tree's fields
    and its inputs' shapes."""
    from ..analysis import entry as E
    from ..analysis.weights import WeightsError
    try:
        return E.prepare(module, entry, dims)
    except WeightsError as exc:
        raise InvalidInput(f"presk: {exc}") from None
