"""The C export: a PSK-Kernel module as a C99 program that computes the native backend's
bits (`presk export --target c`, docs/export.md).

The C mirrors convert-psk-kernel-to-std (presk/conversion/kernel_to_std/) op for op, so
that `cc -O2 -ffp-contract=off -fno-fast-math` gives the bits the JIT gives:

* a kernel is `void presk_kernel_kN(const T *restrict in0, …, T *restrict out0, …)` (no
  `restrict` when a launch aliases an output with another argument, as native drops
  `noalias`), its nest as plain C loops in the nest's order: a loop-carried scalar is a
  variable assigned at the end of each iteration, so a contraction's sum runs k
  ascending, and a blocked sum (presk/summation.py) an array of partials. A tiled
  layout only regroups which elements run together (the dialect's contract), so C runs
  the reference nest and gets the same bits. Every scalar op is one C operation in the
  op's type, rounded once: no contraction, no reassociation (a `psk_kernel.fma`, where
  the realization fuses a contraction's site, is C99's `fmaf`/`fma`: one rounding);
* bf16 is storage only: a load widens the bits, a store rounds to nearest even by bits,
  a host `convert` from f64 rounds to odd in f32 first (one correct rounding), as
  presk/analysis/kernel_interpret.py defines; `min`/`max` are numpy's (NaN from either
  side, ties the second operand), `heaviside` gives numpy's canonical NaN;
* a kernel psk-kernel-split gave parts (presk/pipeline/export.py splits as native code
  does) launches them on the worker pool, presk/runtime/presk_pool.c copied into the
  program: each part computes its outputs whole, in the nest's order, so the bits are
  one thread's;
* transcendental functions are the one math library's straight-line programs
  (presk/emit/mathlib.py `to_c`), `sqrt` and `abs` the exact C99 functions;
* a host is a static function over buffer pointers and the arena; every `alloc` is the
  arena at the offset `ArenaPlan` fixes for native code, a `call` hands its callee the
  arena at the base the plan fixes (buffers placed by their lives), a `fold` is a loop whose destination alternates
  between the two scratch buffers.

`c_sources(module)` returns the program's files (name → text) without recorded data;
`python -m presk.emit.c_program FILE.mlir [NAME]` prints them (or one).

One file, though long: it mirrors convert-psk-kernel-to-std as one emitter, and the
kernels (`KernelC`), hosts (`HostC`), the model and runtime files share `Names`, the arena
plan and the C type spellings; its parts are not used apart.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, Operation, SSAValue

from presk import ops
from presk.kernel_abi.arena import ArenaPlan, aliased_kernels, entry_signatures
from presk.kernel_abi.placement import Layout
from presk.kernel_abi.calling import BufferSig, EntrySig, strides
from presk.dialects import kernel as K
from presk.emit import mathlib
from presk.emit.kernel_listing import (
    count, entry_host, format_kernel, fresh_name, launch_label)

CFLAGS = "-O2 -Wall -Wextra -Werror -std=c99"
"""The Makefile's CFLAGS (a user may replace them: `make CFLAGS=-O3`)."""
FPFLAGS = "-ffp-contract=off -fno-fast-math"
"""What the bits need, always added: IEEE arithmetic, nothing fused."""

STORAGE_C = {"f64": "double", "f32": "float", "bf16": "uint16_t"}
COMPUTE_C = {"f64": "double", "f32": "float", "bf16": "float"}
ELEMENT_ENUM = {"f64": "PRESK_F64", "f32": "PRESK_F32", "bf16": "PRESK_BF16"}


class CExportError(Exception):
    """A PSK-Kernel module the C export cannot write (an op or function it lacks)."""


# --------------------------------------------------------------------------------------
# Names and literals
# --------------------------------------------------------------------------------------


def c_identifier(name: str) -> str:
    """A C identifier for a Presk name: Greek letters spelt out (`θ.blocks.norm.γ` →
    `theta_blocks_norm_gamma`), every other character not a letter or digit an `_`."""
    out = []
    for ch in name:
        if ch.isascii():
            out.append(ch if ch.isalnum() or ch == "_" else "_")
        else:
            words = unicodedata.name(ch, "").split()
            out.append(f"_{words[-1].lower()}_" if "GREEK" in words else "_")
    text = re.sub(r"_+", "_", "".join(out)).strip("_") or "v"
    return "v_" + text if text[0].isdigit() else text


C_RESERVED = frozenset("""auto break case char const continue default do double else enum
extern float for goto if inline int long register restrict return short signed sizeof static
struct switch typedef union unsigned void volatile while _Bool _Complex _Imaginary arena memcpy
""".split())
"""C99's keywords, and the names the generated code uses in every function."""


class Names:
    """Unique identifiers in one scope (never a keyword or a name the code uses)."""

    def __init__(self, taken: Sequence[str] = ()):
        self.taken = set(taken) | C_RESERVED

    def fresh(self, base: str) -> str:
        return fresh_name(self.taken, c_identifier(base))


def c_float(x: float, ty: str) -> str:
    """`x` rounded to nearest even into `ty` ("f64" or "f32") as an exact C literal."""
    c = COMPUTE_C[ty]
    value = float(np.float32(x)) if ty == "f32" else float(x)
    if np.isnan(value):
        return f"(({c})NAN)"
    if np.isinf(value):
        return f"({'-' if value < 0 else ''}({c})INFINITY)"
    return value.hex() + ("f" if c == "float" else "")


def _element(t) -> str:
    return K.type_name(t.element)


def _comment_lines(text: str, prefix: str = "// ") -> list[str]:
    return [(prefix + line).rstrip() for line in text.splitlines()]


# --------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------

_BINARY = {K.AddOp: "+", K.SubOp: "-", K.MulOp: "*", K.DivOp: "/"}
# the exact math functions' C99 spellings (f64, f32), from the table (presk/ops)
_EXACT = {f.name: f.compute.c for f in ops.ROWS
          if isinstance(f.compute, ops.Exact) and f.compute.c is not None}


def math_functions(module: Operation) -> list[tuple[str, str]]:
    """The (function, type) pairs of the math library the module's kernels call."""
    used = set()
    for op in module.walk():
        if isinstance(op, K.MathOp) and op.fn.data in mathlib.FUNCTIONS:
            used.add((op.fn.data, K.type_name(op.result.type)))
    return sorted(used)


class KernelC:
    """One kernel as a C function: every SSA value a `const` local `v<n>` (one C operation
    each, so one rounding each), loop indices `i<depth>`, loop-carried scalars `s<n>`
    assigned at the end of each iteration."""

    def __init__(self, kernel: K.KernelOp, restrict: bool):
        self.kernel = kernel
        self.restrict = "restrict " if restrict else ""
        self.lines: list[str] = []
        self.names: dict[SSAValue, str] = {}
        self.values = 0
        self.accs = 0
        n_in = len(kernel.input_args)
        for i, a in enumerate(kernel.args):
            self.names[a] = f"in{i}" if i < n_in else f"out{i - n_in}"
        self.used = {o for op in kernel.body.walk() for o in op.operands}

    @property
    def symbol(self) -> str:
        return f"presk_kernel_{c_identifier(self.kernel.sym_name.data)}"

    def signature(self) -> str:
        k = self.kernel
        params = []
        for a in k.args:
            c = STORAGE_C[_element(a.type)]
            const = "const " if a not in k.output_args else ""
            params.append(f"{const}{c} *{self.restrict}{self.names[a]}")
        return f"void {self.symbol}({', '.join(params)})"

    def text(self) -> str:
        if self.kernel.parts is not None:
            return self.spawner()
        for a in self.kernel.input_args:
            if a not in self.used:
                self.emit(1, f"(void){self.names[a]};")
        self.block(self.kernel.body.block, 1, 0)
        return "\n".join([self.signature(), "{", *self.lines, "}"])

    def spawner(self) -> str:
        """A kernel psk-kernel-split gave parts, as native code runs it: the buffer
        pointers in an array, one trampoline per part (`void (void *args)`), and one
        launch on the worker pool (presk_pool.c), which runs part 0 on this thread."""
        parts = [f"presk_kernel_{c_identifier(p.root_reference.data)}"
                 for p in self.kernel.parts]  # type: ignore[union-attr]
        names = [self.names[a] for a in self.kernel.args]
        unpack = ", ".join(f"a[{i}]" for i in range(len(names)))
        out = [f"static void {self.symbol}_thread{j}(void *args)\n{{\n"
               f"    void *const *a = args;\n    {part}({unpack});\n}}\n"
               for j, part in enumerate(parts)]
        trampolines = ", ".join(f"{self.symbol}_thread{j}" for j in range(len(parts)))
        args = ", ".join(f"(void *){n}" for n in names)
        out.append("\n".join([
            self.signature(), "{", f"    void *args[] = {{{args}}};",
            f"    static presk_part const parts[] = {{{trampolines}}};",
            f"    presk_pool_run({len(parts)}, parts, args);", "}"]))
        return "\n".join(out)

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def define(self, v: SSAValue, expr: str, depth: int, note: str = "") -> None:
        """`const T vN = expr;`, skipped when nothing reads v (every value op is pure)."""
        if v not in self.used:
            return
        name = f"v{self.values}"
        self.values += 1
        self.names[v] = name
        self.emit(depth, f"const {COMPUTE_C[K.type_name(v.type)]} {name} = {expr};"
                  + (f"  /* {note} */" if note else ""))

    def offset(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> str:
        """Σ index·stride, row-major, as kernel_to_std's `flat`."""
        t = buffer.type
        assert isinstance(t, K.BufferType)
        terms = [self.names[i] if s == 1 else f"{self.names[i]} * {s}"
                 for i, s in zip(indices, strides(t.shape))]
        return " + ".join(terms) or "0"

    def block(self, block: Block, depth: int, level: int) -> None:
        for op in block.ops:
            if isinstance(op, K.YieldOp):
                self.yield_(op, depth)
            elif isinstance(op, K.ForOp):
                self.loop(op, depth, level)
            elif isinstance(op, K.StoreOp):
                value = self.names[op.value]
                if _element(op.buffer.type) == "bf16":
                    value = f"presk_f32_to_bf16({value})"
                self.emit(depth, f"{self.names[op.buffer]}[{self.offset(op.buffer, op.indices)}]"
                          f" = {value};")
            elif isinstance(op, K.ConstantOp):
                self.define(op.result, self.expression(op), depth, repr(op.number))
            else:
                self.define(op.results[0], self.expression(op), depth)

    def expression(self, op: Operation) -> str:
        """The C of one scalar op (its operands already named)."""
        n = [self.names.get(o, "") for o in op.operands]
        ty = K.type_name(op.results[0].type)
        if isinstance(op, K.LoadOp):
            load = f"{n[0]}[{self.offset(op.buffer, op.indices)}]"
            return f"presk_bf16_to_f32({load})" if _element(op.buffer.type) == "bf16" else load
        if type(op) in _BINARY:
            return f"{n[0]} {_BINARY[type(op)]} {n[1]}"
        if isinstance(op, (K.MinOp, K.MaxOp)):
            return f"presk_{op.name.split('.')[1]}_{ty}({n[0]}, {n[1]})"
        if isinstance(op, K.NegOp):
            return f"-{n[0]}"
        if isinstance(op, K.FmaOp):  # C99's fused multiply-add: one rounding
            return f"{'fmaf' if ty == 'f32' else 'fma'}({n[0]}, {n[1]}, {n[2]})"
        if isinstance(op, K.CastOp):
            return f"({COMPUTE_C[ty]}){n[0]}"
        if isinstance(op, K.ConstantOp):
            return c_float(op.number, ty)
        if isinstance(op, K.MathOp):
            return self.math(op.fn.data, ty, n)
        raise CExportError(f"{self.kernel.sym_name.data}: {op.name} has no C form")

    def math(self, fn: str, ty: str, args: list[str]) -> str:
        if fn in _EXACT:
            return f"{_EXACT[fn][ty == 'f32']}({args[0]})"
        if fn == "heaviside":
            return f"presk_heaviside_{ty}({args[0]}, {args[1]})"
        if fn in mathlib.FUNCTIONS:
            return f"presk_{fn}_{ty}({', '.join(args)})"
        raise CExportError(f"{self.kernel.sym_name.data}: the math library has no `{fn}`")

    def loop(self, op: K.ForOp, depth: int, level: int) -> None:
        index = f"i{level}"
        self.names[op.induction] = index
        if op.width is not None:
            self.blocked(op, depth, level)
            return
        for arg, init, res in zip(op.carried, op.inits, op.res):
            name = f"s{self.accs}"
            self.accs += 1
            self.emit(depth, f"{COMPUTE_C[K.type_name(arg.type)]} {name} = {self.names[init]};")
            self.names[arg] = self.names[res] = name
        lo, hi = op.lower.data, op.upper.data
        self.emit(depth, f"for (int64_t {index} = {lo}; {index} < {hi}; {index}++) {{")
        self.block(op.body.block, depth + 1, level + 1)
        self.emit(depth, "}")

    def blocked(self, op: K.ForOp, depth: int, level: int) -> None:
        """A blocked sum (presk/summation.py): an array of partials, iteration i adding
        to partial (i − lower) mod P, then the partials pairwise."""
        index, width, lo = f"i{level}", op.width, op.lower.data
        name = f"s{self.accs}"
        self.accs += 1
        ty = COMPUTE_C[K.type_name(op.res[0].type)]
        self.emit(depth, f"{ty} {name}[{width}];")
        self.emit(depth, f"for (int64_t j = 0; j < {width}; j++) {name}[j] = "
                         f"{self.names[op.inits[0]]};")
        self.names[op.carried[0]] = f"{name}[({index} - {lo}) % {width}]"
        self.names[op.res[0]] = f"{name}[0]"
        self.emit(depth, f"for (int64_t {index} = {lo}; {index} < {op.upper.data}; "
                         f"{index}++) {{")
        self.block(op.body.block, depth + 1, level + 1)
        self.emit(depth, "}")
        self.emit(depth, f"for (int64_t h = {width // 2}; h > 0; h /= 2)")
        self.emit(depth + 1, f"for (int64_t j = 0; j < h; j++) {name}[j] = {name}[j] + "
                             f"{name}[j + h];")

    def yield_(self, op: K.YieldOp, depth: int) -> None:
        """The next iteration's carried values; through temporaries when one of them is
        another's current value, so that every assignment reads this iteration's."""
        loop = op.parent_op()
        assert isinstance(loop, K.ForOp)
        pairs = [(self.names[a], self.names[v], COMPUTE_C[K.type_name(a.type)])
                 for a, v in zip(loop.carried, op.values) if self.names[a] != self.names[v]]
        if len(pairs) > 1 and any(v in {a for a, _, _ in pairs} for _, v, _ in pairs):
            self.emit(depth, "{ " + " ".join(f"const {ty} y{i} = {v};"
                                             for i, (_, v, ty) in enumerate(pairs)))
            self.emit(depth + 1, " ".join(f"{a} = y{i};" for i, (a, _, _) in enumerate(pairs))
                      + " }")
            return
        for a, v, _ in pairs:
            self.emit(depth, f"{a} = {v};")


def kernel_listing(kernel: K.KernelOp) -> str:
    """The kernel as `presk dump --stage kernel` lists it; its MLIR text where the
    listing cannot print a constant (an infinite one, as a max's initial value)."""
    try:
        return format_kernel(kernel)
    except (OverflowError, ValueError):
        return str(kernel)


def threaded(module: Operation) -> bool:
    """Whether some kernel has parts (psk-kernel-split): the program then runs them on the
    worker pool (presk_pool.c, presk/runtime/) and links it."""
    return any(k.parts is not None for k in K.kernels(module).values())


def _part_of(module: Operation) -> dict[str, tuple[str, int, int]]:
    """part kernel → (the kernel it is a part of, its index, how many parts)."""
    out = {}
    for name, kernel in K.kernels(module).items():
        for j, p in enumerate(kernel.parts or ()):
            out[p.root_reference.data] = (name, j, len(kernel.parts))  # type: ignore[arg-type]
    return out


def kernels_c(module: Operation) -> str:
    """kernels.c: every kernel, its listing and launches in a comment above it; a kernel
    with parts a launch of them on the worker pool."""
    counts = count(module)
    aliased = aliased_kernels(module)
    part_of = _part_of(module)
    pool = ['#include "presk_pool.h"'] if threaded(module) else []
    parts = ["/* The kernels: each one loop nest of PSK-Kernel, in the nest's order of",
             " * operations (a sum in the blocked order of presk/summation.py), as the",
             " * native backend computes it. */",
             "#include <math.h>", "#include <stdint.h>", "", '#include "presk_rt.h"', *pool,
             ""]
    for name, kernel in K.kernels(module).items():
        c = KernelC(kernel, name not in aliased)
        parts.append(f"{c.signature()};")
    for name, kernel in K.kernels(module).items():
        labels = counts.by_kernel.get(name, {})
        total = sum(labels.values())
        where = ", ".join(f"{label} ×{t}" if len(labels) > 1 else label
                          for label, t in labels.items())
        parts.append("")
        if name in part_of:
            whole, j, n = part_of[name]
            loop = next(op for op in kernel.body.block.ops if isinstance(op, K.ForOp))
            parts.append(f"// {name}: part {j} of {n} of {whole}, its outermost loop over "
                         f"[{loop.lower.data}, {loop.upper.data})")
            parts.append(KernelC(kernel, name not in aliased).text())
            continue
        parts.append(f"// {name}: {total} launch{'es' * (total != 1)}"
                     + (f" at {where}" if where else ""))
        if kernel.parts is not None:
            parts.append(f"// its outermost loop split among {len(kernel.parts)} workers "
                         "(the parts above), run on the worker pool")
        parts.extend(_comment_lines(kernel_listing(kernel)))
        parts.append(KernelC(kernel, name not in aliased).text())
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------
# Hosts
# --------------------------------------------------------------------------------------


def reachable_hosts(module: Operation) -> list[K.HostOp]:
    """The entry host and every host it calls, callees first (each defined before use);
    a host nothing calls is left out (a static function never called is an error under
    -Werror)."""
    hosts = K.hosts(module)
    order: list[K.HostOp] = []
    seen: set[str] = set()

    def visit(h: K.HostOp) -> None:
        seen.add(h.sym_name.data)
        for op in K.host_ops(h):
            if isinstance(op, K.CallOp) and op.callee_name not in seen:
                visit(hosts[op.callee_name])
        order.append(h)

    visit(entry_host(module))
    return order


class HostC:
    """One layout of a host (presk/kernel_abi/placement.py: its own, or a fold's callee's
    at even or odd iterations) as a static C function `presk_host_<layout>(buffers…,
    arena)`."""

    def __init__(self, host: K.HostOp, symbols: dict[str, str], layout: Layout):
        self.host = host
        self.symbols = symbols
        self.layout = layout
        self.lines: list[str] = []
        self.scope = Names()
        self.names: dict[SSAValue, str] = {}
        self.const: set[SSAValue] = set()
        self.site: str | None = None
        for a, n in zip(host.args, host.arg_name_list):
            self.names[a] = self.scope.fresh(n)
        self.const.update(host.input_args)
        self.used = {o for op in K.host_ops(host) for o in op.operands}

    def signature(self) -> str:
        params = [f"{'const ' if a in self.const else ''}{STORAGE_C[_element(a.type)]} "
                  f"*{self.names[a]}" for a in self.host.args]
        return (f"static void {self.symbols[self.layout.name]}("
                f"{', '.join(params + ['unsigned char *arena'])})")

    def text(self) -> str:
        for a in self.host.args:
            if a not in self.used:
                self.emit(1, f"(void){self.names[a]};")
        if not any(isinstance(op, (K.AllocOp, K.CallOp)) for op in K.host_ops(self.host)):
            self.emit(1, "(void)arena;")
        self.block(self.host.body.block, 1)
        return "\n".join([self.signature(), "{", *self.lines, "}"])

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def read(self, v: SSAValue) -> str:
        return self.names[v]

    def write(self, v: SSAValue) -> str:
        """A buffer an op writes: a `const` one (an input the recorder forwarded) cast."""
        if v in self.const:
            return f"({STORAGE_C[_element(v.type)]} *){self.names[v]}"
        return self.names[v]

    def comment(self, op: Operation, depth: int) -> None:
        """`/* site */` where a new site's ops begin, under the label of its launch."""
        site = op.attributes.get("site")
        if not isinstance(site, StringAttr) or site.data == self.site:
            return
        self.site = site.data
        text = site.data
        later: Operation | None = op
        while later is not None and later.attributes.get("site") == site:
            if isinstance(later, K.LaunchOp):
                text = launch_label(later)
                break
            later = later.next_op
        self.emit(depth, f"/* {text} */")

    def block(self, block: Block, depth: int) -> None:
        for op in block.ops:
            if isinstance(op, (K.MarkOp, K.ReleaseOp)):
                continue  # the arena is planned statically: offsets, no bookkeeping
            self.comment(op, depth)
            self.host_op(op, depth)

    def host_op(self, op: Operation, depth: int) -> None:
        if isinstance(op, K.AllocOp):
            self.alloc(op, depth)
        elif isinstance(op, K.ConvertOp):
            s, d = _element(op.source.type), _element(op.dest.type)
            self.emit(depth, f"presk_convert_{s}_to_{d}({self.write(op.dest)}, "
                      f"{self.read(op.source)}, {op.dest.type.size});")
        elif isinstance(op, K.CopyOp):
            self.emit(depth, f"memcpy({self.write(op.dest)}, {self.read(op.source)}, "
                      f"{op.dest.type.bytes});")
        elif isinstance(op, K.FillOp):
            self.fill(op, depth)
        elif isinstance(op, K.AtOp):
            self.at(op, depth)
        elif isinstance(op, (K.LaunchOp, K.CallOp)):
            self.call(op, depth)
        elif isinstance(op, K.FoldOp):
            self.fold(op, depth)
        else:
            raise CExportError(f"{K.site_of(op)}: {op.name} has no C form")

    def alloc(self, op: K.AllocOp, depth: int) -> None:
        t = op.result.type
        convert = next((u.operation for u in op.result.uses
                        if isinstance(u.operation, K.ConvertOp) and u.operation.dest is op.result),
                       None)
        if convert is not None:
            base = f"{self.names[convert.source]}_{_element(t)}"
        elif op.source_name is not None:
            base = op.source_name.data
        else:
            site = op.site.data if op.site is not None else ""
            base = "t" + site.rsplit("%", 1)[-1] if "%" in site else "t"
        name = self.names[op.result] = self.scope.fresh(base)
        c = STORAGE_C[_element(t)]
        self.emit(depth, f"{c} *{name} = ({c} *)(arena + {self.layout.offsets[op]});"
                  f"  /* {t.listing()} */")

    def fill(self, op: K.FillOp, depth: int) -> None:
        from presk.analysis.kernel_interpret import element_name, to_storage
        e = element_name(op.dest.type.element)
        stored = to_storage(np.array(op.number), e)
        value = f"0x{int(stored):04x}u" if e == "bf16" else c_float(float(stored), e)
        self.emit(depth, f"presk_fill_{e}({self.write(op.dest)}, {value}, "
                  f"{op.dest.type.size});  /* {op.number!r} */")

    def at(self, op: K.AtOp, depth: int) -> None:
        index = self.names[op.dynamic[0]] if op.dynamic else str(op.index.data)
        source = self.names[op.source]
        name = self.names[op.result] = self.scope.fresh(f"{source}_at")
        const = "const " if op.source in self.const else ""
        if op.source in self.const:
            self.const.add(op.result)
        c = STORAGE_C[_element(op.result.type)]
        self.emit(depth, f"{const}{c} *{name} = {source} + {index} * "
                  f"{op.result.type.size};")

    def call(self, op: K.LaunchOp | K.CallOp, depth: int) -> None:
        target = op.target()
        n_in = len(target.input_args)
        args = [self.read(a) if i < n_in else self.write(a)
                for i, a in enumerate(op.arguments)]
        if isinstance(op, K.LaunchOp):
            symbol = f"presk_kernel_{c_identifier(op.callee_name)}"
            self.emit(depth, f"{symbol}({', '.join(args)});")
            return
        even, odd = self.layout.calls[op]
        text = [f"{self.symbols[t.layout]}({', '.join(args + [f'arena + {t.base}'])});"
                for t in (even, odd)]
        if even == odd:
            self.emit(depth, text[0])
            return
        fold = op.parent_op()
        assert isinstance(fold, K.FoldOp), "a call with two layouts is in a fold"
        self.emit(depth, f"if (({_c_step(fold, self.names[fold.index])}) % 2 == 0) {{  "
                  "/* the even iterations' layout */")
        self.emit(depth + 1, text[0])
        self.emit(depth, "} else {")
        self.emit(depth + 1, text[1])
        self.emit(depth, "}")

    def fold(self, op: K.FoldOp, depth: int) -> None:
        """The accumulator a pointer: the initial buffer, then each iteration's
        destination, which alternates between the two scratch buffers."""
        t = op.result.type
        c = STORAGE_C[_element(t)]
        acc = self.scope.fresh(f"{self.names[op.init]}_acc")
        index = self.scope.fresh("l")
        dest = self.scope.fresh("next")
        self.names.update({op.acc: acc, op.result: acc, op.index: index, op.dest: dest})
        self.const.update((op.acc, op.result))
        lo, hi = op.lower.data, op.upper.data
        self.emit(depth, f"const {c} *{acc} = {self.read(op.init)};")
        if op.reverse is not None:  # the reverse sweep: the last iteration first
            self.emit(depth, f"for (int64_t {index} = {hi - 1}; {index} >= {lo}; {index}--) {{")
        else:
            self.emit(depth, f"for (int64_t {index} = {lo}; {index} < {hi}; {index}++) {{")
        self.emit(depth + 1, f"{c} *{dest} = (({_c_step(op, index)}) % 2 == 0) ? "
                  f"{self.write(op.scratch0)} : {self.write(op.scratch1)};")
        saved = self.site
        self.block(op.body.block, depth + 1)
        self.site = saved
        self.emit(depth + 1, f"{acc} = {dest};")
        self.emit(depth, "}")


def _c_step(fold: K.FoldOp, index: str) -> str:
    """How many iterations of the fold ran before iteration `index` (a C expression)."""
    if fold.reverse is not None:
        return f"{fold.upper.data - 1} - {index}"
    return f"{index} - {fold.lower.data}"


# --------------------------------------------------------------------------------------
# The model: hosts, the entry, its header
# --------------------------------------------------------------------------------------


@dataclass
class EntryC:
    """The entry's C names: its function, structs, arena macro, and a field per buffer."""

    sig: EntrySig
    function: str
    inputs: list[tuple[str, BufferSig]]  # (field, buffer)
    outputs: list[tuple[str, BufferSig]]

    @property
    def arena_macro(self) -> str:
        return f"{self.function.upper()}_ARENA_BYTES"

    @property
    def program(self) -> str:
        """The executable's name: the entry function's."""
        return self.function


def entry_c(module: Operation, output_names: Sequence[str] | None = None) -> EntryC:
    """The entry host's C description; `output_names` (`result`, `grad.<path>`) rename its
    outputs, which the host may call `out`."""
    host = entry_host(module)
    sig = next(s for s in entry_signatures(module) if s.host == host.sym_name.data)
    outputs = list(sig.outputs)
    if output_names is not None:
        outputs = [BufferSig(n, b.element, b.shape) for n, b in zip(output_names, outputs)]
    fields = Names()
    ins = [(fields.fresh(b.name), b) for b in sig.inputs]
    outs = [(fields.fresh(b.name), b) for b in outputs]
    return EntryC(sig, "presk_" + c_identifier(host.sym_name.data), ins, outs)


def _listing_type(b: BufferSig) -> str:
    return f"{b.element}[{', '.join(str(s) for s in b.shape)}]"


def model_h(entry: EntryC) -> str:
    fn = entry.function
    lines = ["/* The model's interface: the entry's buffers and the arena it works in. */",
             f"#ifndef {fn.upper()}_MODEL_H", f"#define {fn.upper()}_MODEL_H", "",
             "#include <stdint.h>", "",
             f"/* Scratch bytes one call of {fn} needs (any storage aligned for double;",
             " * 64-byte alignment gives the native layout). One arena per concurrent call. */",
             f"#define {entry.arena_macro} {entry.sig.arena_bytes}u", ""]
    for kind, fields, const in (("inputs", entry.inputs, "const "), ("outputs", entry.outputs, "")):
        lines.append(f"/* The {kind}: row-major, bf16 as its 16 bits. */")
        lines.append(f"typedef struct {fn}_{kind} {{")
        for field, b in fields:
            lines.append(f"    {const}{STORAGE_C[b.element]} *{field};  /* {b.name}: "
                         f"{_listing_type(b)} */")
        lines.append(f"}} {fn}_{kind};")
        lines.append("")
    lines += [f"/* Run the entry: read `in`, write every buffer of `out`, use `arena`"
              f" ({entry.arena_macro} bytes). */",
              f"void {fn}(const {fn}_inputs *in, {fn}_outputs *out, void *arena);", "",
              "#endif"]
    return "\n".join(lines) + "\n"


def model_c(module: Operation, entry: EntryC) -> str:
    """model.c: the kernels' prototypes, a static function per host (callees first), and
    the entry."""
    plan = ArenaPlan(module)
    layouts = plan.reached(entry_host(module).sym_name.data)
    names = Names()
    symbols = {l.name: names.fresh("presk_host_" + l.name) for l in layouts}
    aliased = aliased_kernels(module)
    runs = count(module).host_runs
    parts = ["/* The host: a function per recorded Presk function, each launch under the",
             " * site it computes; the arena is planned statically (the native offsets). */",
             "#include <stdint.h>", "#include <string.h>", "", '#include "model.h"',
             '#include "presk_rt.h"', "", "/* kernels.c */"]
    parts += [KernelC(k, n not in aliased).signature() + ";"
              for n, k in K.kernels(module).items()]
    for layout in layouts:
        h = plan.hosts[layout.host]
        n = runs.get(h.sym_name.data, 0)
        name = h.sym_name.data
        what = h.function.data + (f" ({name})" if name != h.function.data else "")
        arena = f"{plan.peak[name]} bytes of arena"
        if layout.caller is not None:
            what += (f", laid out for the {('even', 'odd')[layout.parity]} iterations of "
                     f"its fold in {layout.caller}" if layout.parity is not None else
                     f", laid out for its call in {layout.caller}")
            arena = f"its buffers placed among {layout.caller}'s"
        parts += ["", f"/* {what}: {n} call{'s' * (n != 1)} per run, {arena}. */"]
        parts.append(HostC(h, symbols, layout).text())
    host = entry_host(module)
    args = [f"in->{f}" for f, _ in entry.inputs] + [f"out->{f}" for f, _ in entry.outputs]
    parts += ["", f"void {entry.function}(const {entry.function}_inputs *in, "
              f"{entry.function}_outputs *out, void *arena)", "{",
              f"    {symbols[host.sym_name.data]}({', '.join(args + ['(unsigned char *)arena'])});",
              "}"]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------------------
# The runtime and the math library
# --------------------------------------------------------------------------------------

RT_H = r"""/* The Presk C runtime: bf16 by bits, conversions between the element types,
 * numpy's min/max and heaviside -- the semantics of presk/analysis/kernel_interpret.py. */
#ifndef PRESK_RT_H
#define PRESK_RT_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum presk_type { PRESK_F64, PRESK_F32, PRESK_BF16 } presk_type;

/* bf16 bits -> f32, exactly. */
static inline float presk_bf16_to_f32(uint16_t bits)
{
    const uint32_t u = (uint32_t)bits << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* f32 -> bf16 bits, to nearest even by bits; a NaN stays a quiet NaN with its sign. */
static inline uint16_t presk_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint32_t upper = u >> 16;
    const uint32_t rounded = (u + 0x7FFFu + (upper & 1u)) >> 16;
    return (uint16_t)(x != x ? (upper | 0x40u) : rounded);
}

/* f64 -> f32 rounded to odd: rounding that to bf16 is the correct rounding of x. */
static inline float presk_f64_to_f32_odd(double x)
{
    const float t = (float)x;
    const double back = (double)t;
    const int inexact = back != x && x - x == 0.0;
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    const uint32_t toward_zero = fabs(back) > fabs(x) ? bits - 1u : bits;
    const uint32_t out = inexact ? (toward_zero | 1u) : bits;
    float r;
    memcpy(&r, &out, sizeof r);
    return r;
}

/* numpy's minimum/maximum: NaN from either side; of two equal values the second. */
static inline double presk_min_f64(double a, double b) { return (a < b || a != a) ? a : b; }
static inline double presk_max_f64(double a, double b) { return (a > b || a != a) ? a : b; }
static inline float presk_min_f32(float a, float b) { return (a < b || a != a) ? a : b; }
static inline float presk_max_f32(float a, float b) { return (a > b || a != a) ? a : b; }

/* numpy's heaviside: 1 above 0, 0 below, h at 0, the canonical quiet NaN for a NaN. */
static inline double presk_heaviside_f64(double x, double h)
{
    const uint64_t bits = UINT64_C(0x7FF8000000000000);
    double nan;
    memcpy(&nan, &bits, sizeof nan);
    return x > 0.0 ? 1.0 : x < 0.0 ? 0.0 : x != x ? nan : h;
}
static inline float presk_heaviside_f32(float x, float h)
{
    const uint32_t bits = UINT32_C(0x7FC00000);
    float nan;
    memcpy(&nan, &bits, sizeof nan);
    return x > 0.0f ? 1.0f : x < 0.0f ? 0.0f : x != x ? nan : h;
}

/* A host `convert`: every element, rounded once to nearest even. */
void presk_convert_f64_to_f32(float *dst, const double *src, size_t n);
void presk_convert_f64_to_bf16(uint16_t *dst, const double *src, size_t n);
void presk_convert_f32_to_f64(double *dst, const float *src, size_t n);
void presk_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
void presk_convert_bf16_to_f64(double *dst, const uint16_t *src, size_t n);
void presk_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n);

/* A host `fill`: every element the constant (already in the buffer's type). */
void presk_fill_f64(double *dst, double value, size_t n);
void presk_fill_f32(float *dst, float value, size_t n);
void presk_fill_bf16(uint16_t *dst, uint16_t bits, size_t n);
"""

RT_C = r"""/* The Presk C runtime's conversions and fills (presk_rt.h). */
#include "presk_rt.h"

void presk_convert_f64_to_f32(float *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

void presk_convert_f64_to_bf16(uint16_t *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = presk_f32_to_bf16(presk_f64_to_f32_odd(src[i]));
}

void presk_convert_f32_to_f64(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (double)src[i];
}

void presk_convert_f32_to_bf16(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = presk_f32_to_bf16(src[i]);
}

void presk_convert_bf16_to_f64(double *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (double)presk_bf16_to_f32(src[i]);
}

void presk_convert_bf16_to_f32(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = presk_bf16_to_f32(src[i]);
}

void presk_fill_f64(double *dst, double value, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = value;
}

void presk_fill_f32(float *dst, float value, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = value;
}

void presk_fill_bf16(uint16_t *dst, uint16_t bits, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = bits;
}
"""


def rt_h(module: Operation) -> str:
    """presk_rt.h, with the prototypes of the math functions the kernels call."""
    protos = []
    for fn, ty in math_functions(module):
        c = COMPUTE_C[ty]
        params = ", ".join([c] * mathlib.arity(fn))
        protos.append(f"{c} presk_{fn}_{ty}({params});")
    tail = ["", "/* The math library (presk_libm.c): the native backend's functions. */",
            *protos] if protos else []
    return RT_H + "\n".join(tail) + "\n\n#endif\n"


def libm_c(module: Operation) -> str:
    """presk_libm.c: the math library's C (mathlib.to_c) for the functions used."""
    head = ("/* The math library: the same straight-line programs the native backend\n"
            " * compiles (presk/emit/mathlib.py). Compile with -ffp-contract=off. */\n")
    body = "\n".join(mathlib.to_c(fn, ty) for fn, ty in math_functions(module))
    return head + (body or "typedef int presk_libm_unused; /* no math function used */\n")


# --------------------------------------------------------------------------------------
# main.c, the Makefile and the README
# --------------------------------------------------------------------------------------

MAIN_C = r"""/* Run __FN__ on the inputs in files, write its outputs to files, and (with
 * --expected DIR) compare them with the native backend's bit for bit.
 *
 *   __PROG__ [--inputs DIR] [--outputs DIR] [--expected DIR] [--repeat N]
 *
 * A buffer's file is DIR/<name>.bin: its elements row-major, little-endian, in the
 * buffer's storage type (f64, f32, or the 16 bits of a bf16). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "presk_rt.h"

typedef struct buffer {
    const char *name;   /* the Presk name */
    const char *file;   /* <file>.bin */
    const char *type;   /* its listing type */
    presk_type element;
    size_t count;
    void *data;
} buffer;

static buffer inputs[] = {
__INPUTS__};
static buffer outputs[] = {
__OUTPUTS__};

#define N_INPUTS (sizeof inputs / sizeof inputs[0])
#define N_OUTPUTS (sizeof outputs / sizeof outputs[0])

static size_t element_bytes(presk_type t) { return t == PRESK_F64 ? 8 : t == PRESK_F32 ? 4 : 2; }

/* Element i as its bits, little-endian in memory whatever the host's byte order. */
static uint64_t get_bits(const buffer *b, const unsigned char *bytes, size_t i)
{
    const size_t w = element_bytes(b->element);
    uint64_t u = 0;
    for (size_t k = 0; k < w; k++) u |= (uint64_t)bytes[i * w + k] << (8 * k);
    return u;
}

static void put_bits(const buffer *b, unsigned char *bytes, size_t i, uint64_t u)
{
    const size_t w = element_bytes(b->element);
    for (size_t k = 0; k < w; k++) bytes[i * w + k] = (unsigned char)(u >> (8 * k));
}

/* Between the file's bytes and the buffer's native elements. */
static void from_le(const buffer *b, void *data, const unsigned char *bytes)
{
    for (size_t i = 0; i < b->count; i++) {
        const uint64_t u = get_bits(b, bytes, i);
        const uint32_t v = (uint32_t)u;
        if (b->element == PRESK_F64) memcpy((double *)data + i, &u, 8);
        else if (b->element == PRESK_F32) memcpy((float *)data + i, &v, 4);
        else ((uint16_t *)data)[i] = (uint16_t)u;
    }
}

static uint64_t bits_of(const buffer *b, const void *data, size_t i)
{
    if (b->element == PRESK_F64) { uint64_t u; memcpy(&u, (const double *)data + i, 8); return u; }
    if (b->element == PRESK_F32) { uint32_t u; memcpy(&u, (const float *)data + i, 4); return u; }
    return ((const uint16_t *)data)[i];
}

static int is_nan(presk_type t, uint64_t u)
{
    if (t == PRESK_F64) return (u & UINT64_C(0x7FFFFFFFFFFFFFFF)) > UINT64_C(0x7FF0000000000000);
    if (t == PRESK_F32) return (u & 0x7FFFFFFFu) > 0x7F800000u;
    return (u & 0x7FFFu) > 0x7F80u;
}

static char *path_of(const char *dir, const buffer *b)
{
    const size_t n = strlen(dir) + strlen(b->file) + 6;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s.bin", dir, b->file);
    return p;
}

/* Read buffer b's file from dir into data; 0 on success, else a line on stderr. */
static int load(const char *dir, const buffer *b, void *data)
{
    const size_t n = b->count * element_bytes(b->element);
    char *path = path_of(dir, b);
    unsigned char *bytes = malloc(n + 1);
    FILE *f = path ? fopen(path, "rb") : NULL;
    int ok = f && bytes && fread(bytes, 1, n + 1, f) == n;
    if (ok) from_le(b, data, bytes);
    else fprintf(stderr, "__PROG__: %s: cannot read %lu bytes (%s %s)\n", path ? path : dir,
                 (unsigned long)n, b->name, b->type);
    if (f) fclose(f);
    free(bytes);
    free(path);
    return ok ? 0 : 1;
}

static int save(const char *dir, const buffer *b)
{
    const size_t n = b->count * element_bytes(b->element);
    char *path = path_of(dir, b);
    unsigned char *bytes = malloc(n + 1);
    FILE *f = path ? fopen(path, "wb") : NULL;
    int ok = f && bytes;
    if (ok) {
        for (size_t i = 0; i < b->count; i++) put_bits(b, bytes, i, bits_of(b, b->data, i));
        ok = fwrite(bytes, 1, n, f) == n;
    }
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) fprintf(stderr, "__PROG__: %s: cannot write\n", path ? path : dir);
    free(bytes);
    free(path);
    return ok ? 0 : 1;
}

/* One line per output: equal bit for bit (any NaN for a NaN), or the first difference. */
static int compare(const char *dir, const buffer *b)
{
    void *want = malloc(b->count * element_bytes(b->element) + 1);
    if (!want || load(dir, b, want)) { free(want); return 1; }
    size_t differ = 0, first = 0;
    for (size_t i = 0; i < b->count; i++) {
        const uint64_t g = bits_of(b, b->data, i), w = bits_of(b, want, i);
        if (g != w && !(is_nan(b->element, g) && is_nan(b->element, w)) && differ++ == 0) first = i;
    }
    if (differ == 0) {
        printf("  %s %s: %lu element%s bit for bit\n", b->name, b->type,
               (unsigned long)b->count, b->count == 1 ? "" : "s");
    } else {
        printf("  %s %s: %lu of %lu elements differ (first at %lu: 0x%llx, native 0x%llx)\n",
               b->name, b->type, (unsigned long)differ, (unsigned long)b->count,
               (unsigned long)first, (unsigned long long)bits_of(b, b->data, first),
               (unsigned long long)bits_of(b, want, first));
    }
    free(want);
    return differ != 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: __PROG__ [--inputs DIR] [--outputs DIR] [--expected DIR] "
                    "[--repeat N]\n");
}

int main(int argc, char **argv)
{
    const char *in_dir = "inputs", *out_dir = "outputs", *expected = NULL;
    long repeat = 0;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) { usage(); return 2; }
        if (!strcmp(argv[i], "--inputs")) in_dir = value;
        else if (!strcmp(argv[i], "--outputs")) out_dir = value;
        else if (!strcmp(argv[i], "--expected")) expected = value;
        else if (!strcmp(argv[i], "--repeat")) repeat = strtol(value, NULL, 10);
        else { usage(); return 2; }
        i++;
    }
    int failed = 0;
    for (size_t i = 0; i < N_INPUTS; i++) {
        inputs[i].data = malloc(inputs[i].count * element_bytes(inputs[i].element) + 1);
        failed |= !inputs[i].data || load(in_dir, &inputs[i], inputs[i].data);
    }
    for (size_t i = 0; i < N_OUTPUTS; i++) {
        outputs[i].data = calloc(outputs[i].count + 1, element_bytes(outputs[i].element));
        failed |= !outputs[i].data;
    }
    void *arena = malloc(__ARENA__ + 1);
    if (failed || !arena) return 2;
    __FN___inputs in;
    __FN___outputs out;
__BIND__
    __FN__(&in, &out, arena);
    if (repeat > 0) {
        const clock_t start = clock();
        for (long r = 0; r < repeat; r++) __FN__(&in, &out, arena);
        const double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
        printf("time per call: %.3f us (%ld calls, processor time)\n", seconds / repeat * 1e6,
               repeat);
    }
    for (size_t i = 0; i < N_OUTPUTS; i++) failed |= save(out_dir, &outputs[i]);
    if (expected) {
        printf("__FN__ compared with the native backend's outputs in %s:\n", expected);
        for (size_t i = 0; i < N_OUTPUTS; i++) failed |= compare(expected, &outputs[i]);
    }
    for (size_t i = 0; i < N_INPUTS; i++) free(inputs[i].data);
    for (size_t i = 0; i < N_OUTPUTS; i++) free(outputs[i].data);
    free(arena);
    return failed ? 1 : 0;
}
"""


def _c_string(text: str) -> str:
    """A C string literal of UTF-8 text (non-ASCII bytes as octal escapes)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        out.append(ch if 32 <= byte < 127 and ch not in '"\\?' else f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


PROCESSOR_TIME = """        const clock_t start = clock();
        for (long r = 0; r < repeat; r++) __FN__(&in, &out, arena);
        const double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
        printf("time per call: %.3f us (%ld calls, processor time)\\n", seconds / repeat * 1e6,
               repeat);
"""
WALL_TIME = """        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (long r = 0; r < repeat; r++) __FN__(&in, &out, arena);
        clock_gettime(CLOCK_MONOTONIC, &end);
        const double seconds = (double)(end.tv_sec - start.tv_sec)
                               + 1e-9 * (double)(end.tv_nsec - start.tv_nsec);
        printf("time per call: %.3f us (%ld calls, wall time: the pool's threads run at once)\\n",
               seconds / repeat * 1e6, repeat);
"""


def main_c(entry: EntryC, threads: bool = False) -> str:
    """main.c; with `threads` (split kernels on the pool) `--repeat` times wall time,
    not the process's processor time, which counts every worker's."""
    text = MAIN_C
    if threads:
        assert PROCESSOR_TIME in text
        text = ("#define _POSIX_C_SOURCE 199309L /* clock_gettime */\n"
                + text.replace(PROCESSOR_TIME, WALL_TIME))

    def rows(fields: list[tuple[str, BufferSig]]) -> str:
        return "".join(f"    {{{_c_string(b.name)}, \"{f}\", \"{_listing_type(b)}\", "
                       f"{ELEMENT_ENUM[b.element]}, {b.size}u, NULL}},\n" for f, b in fields)

    bind = [f"    in.{f} = inputs[{i}].data;" for i, (f, _) in enumerate(entry.inputs)]
    bind += [f"    out.{f} = outputs[{i}].data;" for i, (f, _) in enumerate(entry.outputs)]
    return (text.replace("__INPUTS__", rows(entry.inputs))
            .replace("__OUTPUTS__", rows(entry.outputs)).replace("__BIND__", "\n".join(bind))
            .replace("__ARENA__", entry.arena_macro).replace("__PROG__", entry.program)
            .replace("__FN__", entry.function))


def makefile(entry: EntryC, threads: bool = False) -> str:
    prog = entry.program
    pool_c, pool_h, pthread = (" presk_pool.c", " presk_pool.h", " -pthread") if threads \
        else ("", "", "")
    return f"""# Build the exported program and check it against the native backend's outputs.
CC = cc
CFLAGS = {CFLAGS}
# The native bits need IEEE arithmetic with nothing fused, whatever CFLAGS say.
FPFLAGS = {FPFLAGS}{pthread}
LDLIBS = -lm{pthread}
SOURCES = main.c model.c kernels.c presk_rt.c presk_libm.c{pool_c}
HEADERS = model.h presk_rt.h{pool_h}

{prog}: $(SOURCES) $(HEADERS)
\t$(CC) $(CFLAGS) $(FPFLAGS) -o $@ $(SOURCES) $(LDLIBS)

# Run on the recorded inputs and compare every output with the native backend's, bit for bit.
check: {prog}
\tmkdir -p outputs
\t./{prog} --inputs inputs --outputs outputs --expected expected

clean:
\trm -rf {prog} outputs

.PHONY: check clean
"""


README = """# `{function}`: a Presk entry as a C program

Written by `presk export --target c`. It computes, bit for bit, what Presk's native
backend computes for the entry `{host}` (a NaN may differ in sign and payload, as
between any two IEEE implementations).

## Build and check

    make          # cc {cflags}
    make check    # run on inputs/ and compare outputs/ with expected/ bit for bit

`make check` prints one line per output. Any C99 compiler works, with two conditions for
the same bits: no floating-point contraction (`-ffp-contract=off`; some compilers fuse
`a * b + c` by default) and no fast-math.

## Run

    ./{program} [--inputs DIR] [--outputs DIR] [--expected DIR] [--repeat N]

Each buffer is a file `DIR/<file>.bin`: its elements row-major (last axis contiguous),
little-endian, in the buffer's storage type: f64 (8 bytes), f32 (4 bytes), or bf16 as its
16 bits (the upper half of an f32). `--repeat N` times N more calls.

| buffer | file | type |
|---|---|---|
{table}

## Call it from C

```c
#include <stdlib.h>
#include "model.h"

/* your buffers, one pointer each */
{function}_inputs in = {{
{in_example}
}};
{function}_outputs out = {{
{out_example}
}};
void *arena = malloc({arena_macro});  /* {arena} bytes, reusable */
{function}(&in, &out, arena);
```

Link `model.c kernels.c presk_rt.c presk_libm.c{pool_c}` (and `-lm`{pthread}). Inputs are only read;
outputs are written in place. The arena is scratch memory for one call at a time: give
concurrent calls their own. Nothing else is global{pool_global}.

## Files

- `kernels.c`: {kernels} kernels, each one loop nest, its PSK-Kernel listing above it.
- `model.c`, `model.h`: a function per recorded Presk function, a fold's callee one per
  parity of its iterations ({hosts} in all), each
  launch commented with its site; the arena's offsets fixed as in native code; the entry
  `{function}` and its structs.
- `presk_rt.c`, `presk_rt.h`: bf16 by bits, conversions (f64 to bf16 rounds once,
  correctly), numpy's min/max and heaviside.
- `presk_libm.c`: the math library's functions the kernels call, the same programs the
  native backend compiles.
- `main.c`: reads the inputs, runs, writes and compares the outputs.{pool_files}
"""


POOL_README = """
- `presk_pool.c`, `presk_pool.h`: the worker pool the split kernels run on (up to {n}
  parts each, part 0 on the calling thread): started on the first split launch, its
  workers waiting for the next launch (a short spin, then sleep), joined at exit.
  `PRESK_POOL_SPIN` and `PRESK_POOL_YIELD` set how long they poll before sleeping.
  Concurrent calls are safe: a launch while another runs runs its parts on its caller."""


def readme(module: Operation, entry: EntryC) -> str:
    table = "\n".join(f"| `{b.name}` ({kind}) | `{f}.bin` | {_listing_type(b)} |"
                      for kind, fields in (("input", entry.inputs), ("output", entry.outputs))
                      for f, b in fields)
    return README.format(
        function=entry.function, host=entry.sig.host, cflags=f"{CFLAGS} {FPFLAGS}",
        program=entry.program,
        table=table, arena_macro=entry.arena_macro, arena=entry.sig.arena_bytes,
        in_example=",\n".join(f"    .{f} = {f}" for f, _ in entry.inputs),
        out_example=",\n".join(f"    .{f} = {f}" for f, _ in entry.outputs),
        kernels=len(K.kernels(module)),
        pool_c=" presk_pool.c" if threaded(module) else "",
        pool_global=" but the worker pool (presk_pool.c)" if threaded(module) else "",
        pthread=", `-pthread`" if threaded(module) else "",
        pool_files=POOL_README.format(n=max(len(k.parts or ()) for k in K.kernels(module)
                                            .values())) if threaded(module) else "",
        hosts=len(ArenaPlan(module).reached(entry_host(module).sym_name.data)))


# --------------------------------------------------------------------------------------
# The program
# --------------------------------------------------------------------------------------


def c_sources(kernel_module: Operation, output_names: Sequence[str] | None = None,
              pool: dict[str, str] | None = None) -> dict[str, str]:
    """The C program of a PSK-Kernel module's entry host: file name → text (no data).
    `output_names` (`result`, `grad.<path>`) name the entry's outputs. A module whose
    kernels have parts (psk-kernel-split) needs `pool`, the worker pool's files
    (presk/runtime/pool.py `source_files()`), which the program then includes."""
    entry = entry_c(kernel_module, output_names)
    threads = threaded(kernel_module)
    if threads and not pool:
        raise CExportError("its kernels are split among threads and the worker pool's "
                           "files were not given")
    files = {
        "kernels.c": kernels_c(kernel_module),
        "model.h": model_h(entry),
        "model.c": model_c(kernel_module, entry),
        "presk_rt.h": rt_h(kernel_module),
        "presk_rt.c": RT_C,
        "presk_libm.c": libm_c(kernel_module),
        "main.c": main_c(entry, threads),
        "Makefile": makefile(entry, threads),
        "README.md": readme(kernel_module, entry),
    }
    return files | (dict(pool) if threads and pool else {})


@dataclass
class Shape:
    """What the summary line states: per call of the entry, launches of how many kernels,
    the hosts besides the entry's, the folds (host loops), and the arena's bytes."""

    launches: int
    kernels: int  # not counting split kernels' parts
    functions: int
    loops: int
    arena_bytes: int
    split: int = 0  # kernels whose parts run on the worker pool
    threads: int = 1  # the most parts of one


def program_shape(kernel_module: Operation) -> Shape:
    hosts = reachable_hosts(kernel_module)
    loops = sum(isinstance(op, K.FoldOp) for h in hosts for op in K.host_ops(h))
    functions = ArenaPlan(kernel_module).reached(entry_host(kernel_module).sym_name.data)
    kernels = K.kernels(kernel_module)
    parts = [len(k.parts) for k in kernels.values() if k.parts is not None]
    return Shape(count(kernel_module).launches, len(kernels) - sum(parts),
                 len(functions) - 1, loops, entry_c(kernel_module).sig.arena_bytes,
                 len(parts), max(parts, default=1))


def _main(argv: Sequence[str]) -> int:
    """`python -m presk.emit.c_program FILE.mlir [NAME]`: the files, or file NAME."""
    import sys

    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser
    if not 1 <= len(argv) <= 2:
        print("usage: python -m presk.emit.c_program FILE.mlir [kernels.c|model.c|…]",
              file=sys.stderr)
        return 2
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(K.Kernel)
    with open(argv[0], encoding="utf-8") as f:
        module = Parser(ctx, f.read(), name=argv[0]).parse_module()
    module.verify()
    files = c_sources(module)
    for name, text in files.items():
        if len(argv) == 1 or argv[1] == name:
            print(f"==> {name} <==\n{text}" if len(argv) == 1 else text, end="")
    return 0


if __name__ == "__main__":
    import sys
    raise SystemExit(_main(sys.argv[1:]))
