"""The math library (presk/emit/mathlib.py) as xDSL `llvm` dialect functions.

`to_llvm(fn, ty)` walks the SAME `mathlib.program(fn, ty)` that `mathlib.evaluate` (numpy)
and `mathlib.to_c` (C) walk, and writes one LLVM instruction per program op — no fast-math
flags anywhere, so LLVM may not contract (no fma/fmuladd), reassociate or assume no NaN:

| program op | LLVM |
|---|---|
| arg | the function's argument (the n-th `arg`, the n-th: pow has two) |
| const | `llvm.mlir.constant` (an exact float of the type; inf, −inf, the quiet NaN) |
| add sub mul div | fadd fsub fmul fdiv |
| neg, abs | fneg, `llvm.fabs.f32/f64` (by `llvm.call_intrinsic`: xDSL translates `llvm.intr.fabs` unmangled) |
| lt le gt ge eq ne | fcmp olt ole ogt oge oeq une |
| select | select |
| pow2 k | fcmp oge + select and fcmp ogt + select (the clamp to [emin, emax], NaN → emin), to the same-width integer by `llvm.trunc`, fadd 1.5·2^mbits, bitcast, sub (xDSL's llvm dialect has no plain fptosi, and `llvm.fptosi.sat` does not vectorize on x86; equal on the clamped values), add bias, shl mbits, bitcast |
| exponent x | bitcast, lshr mbits, and (2·bias+1), sub bias, sitofp |
| mantissa x | bitcast, and (2^mbits − 1), or (bias << mbits), bitcast |

The bit operations take a few instructions each (the C emitter's helpers, inlined), every
other op exactly one. The function is `T presk_<fn>_<ty>(T x)` (`(T x, T y)` for pow) with
external linkage (the C emitter's name and linkage; `xdsl.backend.llvm.convert_module`
emits every function external anyway). `declare_all(module, uses)` appends the functions a module calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    VectorType,
    f32,
    f64,
    i32,
)
from xdsl.ir import Block, Operation, Region, SSAValue

from presk.emit import mathlib

_FLOAT = {"f32": f32, "f64": f64}
_INT = {"f32": IntegerType(32), "f64": IntegerType(64)}
_FCMP = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_ARITH = {"add": llvm.FAddOp, "sub": llvm.FSubOp, "mul": llvm.FMulOp, "div": llvm.FDivOp}


def symbol(fn: str, ty: str) -> str:
    """The function's name, as in the C emitter: presk_<fn>_<ty>."""
    return f"presk_{fn}_{ty}"


def vector_symbol(fn: str, ty: str, lanes: int) -> str:
    """Its vector variant's: presk_<fn>_<ty>_v<lanes>."""
    return f"presk_{fn}_{ty}_v{lanes}"


def _const_float(text: str, ty: str) -> FloatAttr:
    v = mathlib._const_value(text, mathlib.TI[ty])  # checks exactness
    return FloatAttr(float(v), _FLOAT[ty])


def to_llvm(fn: str | mathlib.Program, ty: str, linkage: str = "external",
            lanes: int | None = None, parts: int = 1, isa: str = "avx512") -> llvm.FuncOp:
    """`llvm.func @presk_<fn>_<ty>(T) -> T` (`(T, T) -> T` for pow): the program, one
    LLVM instruction per op. With `lanes`, its vector variant `@presk_<fn>_<ty>_v<lanes>`
    over `<lanes x T>` — the same ops lane by lane, and each pick among four or more
    constants (a chain of selects by `mathlib.Builder.pick`) one variable permute of the
    instruction set `isa` (`PERMUTES`) of a table of them by the piece's index (`_Picks`):
    the same value, one instruction instead of a select per constant. A program whose
    picks share one list of pieces (erf's) is written three times after the pieces are
    known (`_Cases`): for vectors whose lanes all lie in the first piece, in the first
    two, and in any. With `parts` > 1, the variant over `<parts·lanes x T>`
    (`_v<parts·lanes>`) splits its argument into `parts` vectors of `lanes` and writes
    each op once per part, side by side: the parts' dependency chains (erf's Horner rule
    of 22 steps) interleave, where one vector's chain leaves the machine waiting on each
    step's latency; each part's picks permute as the `lanes` variant's do."""
    p = fn if isinstance(fn, mathlib.Program) else mathlib.program(fn, ty)
    w = _Writer(p, lanes)
    whole = w.F if parts == 1 else VectorType(w.S, [lanes * parts])
    entry = Block(arg_types=[whole] * p.arity)
    args = [w.split(a, parts) for a in entry.args]
    vals: list[list[SSAValue]] = [[] for _ in range(parts)]
    forms = _forms(p) if lanes is not None else {}
    cases = _Cases.of(forms, isa) if lanes is not None else None
    if cases is None:
        w.write(p, range(len(p.instrs)), args, vals,
                [_Picks(p, lanes, w, forms, isa) if lanes is not None else None
                 for _ in range(parts)])
        w.ops.append(llvm.ReturnOp(w.joined([v[p.result] for v in vals])))
        entry.add_ops(w.block())
        blocks = [entry]
    else:
        blocks = cases.write(w, p, forms, entry, args, vals, isa)
    name = symbol(p.name, p.ty) if lanes is None else \
        vector_symbol(p.name, p.ty, lanes * parts)
    return llvm.FuncOp(name, llvm.LLVMFunctionType([whole] * p.arity, whole),
                       linkage=llvm.LinkageAttr(linkage), body=Region(blocks))


class _Writer:
    """The LLVM ops of one program over scalars or `<lanes x T>`, in order (`ops`)."""

    def __init__(self, p: mathlib.Program, lanes: int | None) -> None:
        self.ti, self.lanes = mathlib.TI[p.ty], lanes
        self.S, self.I0 = _FLOAT[p.ty], _INT[p.ty]
        self.F = self.S if lanes is None else VectorType(self.S, [lanes])
        self.I = self.I0 if lanes is None else VectorType(self.I0, [lanes])
        self.suffix = p.ty if lanes is None else f"v{lanes}{p.ty}"
        self.ops: list[Operation] = []
        self._constants: dict[tuple, SSAValue] = {}  # this block's, by type and bits

    def add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def block(self) -> list[Operation]:
        """The ops written so far, as one block's; the next ops start another."""
        ops, self.ops, self._constants = self.ops, [], {}
        return ops

    def constant(self, v: float | int, scalar, typ) -> SSAValue:
        """A constant of `typ` (each value made once a block: the parts and the picks
        share it)."""
        key = (typ, v.hex() if isinstance(v, float) else v)
        if key not in self._constants:
            attr = FloatAttr(v, scalar) if scalar in (f32, f64) else IntegerAttr(v, scalar)
            self._constants[key] = self.add(llvm.ConstantOp(attr, typ)) if self.lanes is None \
                else self.add(llvm.ConstantOp(
                    DenseIntOrFPElementsAttr.from_list(typ, [v] * self.lanes), typ))
        return self._constants[key]

    def iconst(self, v: int) -> SSAValue:
        return self.constant(v, self.I0, self.I)

    def fconst(self, v: float) -> SSAValue:
        return self.constant(v, self.S, self.F)

    def write(self, p: mathlib.Program, instrs: range, args: list[list[SSAValue]],
              vals: list[list[SSAValue]], picks: list[_Picks | None]) -> None:
        """Program instructions `instrs`, each once per part side by side, appended to
        each part's values."""
        for n in instrs:
            ins = p.instrs[n]
            shared = self.fconst(float(_const_float(ins.const, p.ty).value.data)) \
                if ins.op == "const" else None
            for j, (part, pick) in enumerate(zip(vals, picks)):
                if ins.op == "arg":  # the n-th `arg` is the n-th argument
                    v = args[sum(i.op == "arg" for i in p.instrs[:n])][j]
                else:
                    v = shared if shared is not None else self.op(ins, n, part, pick)
                part.append(v)

    def op(self, ins: mathlib.Instr, n: int, vals: list[SSAValue],
           picks: _Picks | None) -> SSAValue:
        """Program instruction n (neither an argument nor a constant) on its operands."""
        a = [vals[i] for i in ins.args]
        op, add, ti, F, I = ins.op, self.add, self.ti, self.F, self.I
        if op in _ARITH:
            return add(_ARITH[op](a[0], a[1]))
        if op == "neg":
            return add(llvm.FNegOp(a[0]))
        if op == "abs":
            # llvm.FAbsOp would be translated to an unmangled `llvm.fabs`, one declaration
            # for f32 and f64 alike (xDSL 0.75): call the mangled name
            return add(llvm.CallIntrinsicOp(f"llvm.fabs.{self.suffix}", [a[0]], [F]))
        if op in _FCMP:
            return add(llvm.FCmpOp(a[0], a[1], _FCMP[op]))
        if op == "select":
            v = picks.permuted(n, vals) if picks is not None else None
            return v if v is not None else add(llvm.SelectOp(a[0], a[1], a[2]))
        if op == "pow2":
            lo, hi = self.fconst(float(ti.emin)), self.fconst(float(ti.emax))
            k = add(llvm.SelectOp(add(llvm.FCmpOp(a[0], lo, "oge")), a[0], lo))
            k = add(llvm.SelectOp(add(llvm.FCmpOp(k, hi, "ogt")), hi, k))
            e = add(llvm.AddOp(self.to_int(k), self.iconst(ti.bias)))
            return add(llvm.BitcastOp(add(llvm.ShlOp(e, self.iconst(ti.mbits))), F))
        if op == "exponent":
            bits = add(llvm.BitcastOp(a[0], I))
            e = add(llvm.LShrOp(bits, self.iconst(ti.mbits)))
            e = add(llvm.AndOp(e, self.iconst(2 * ti.bias + 1)))
            e = add(llvm.SubOp(e, self.iconst(ti.bias)))
            return add(llvm.SIToFPOp(e, F))
        if op == "mantissa":
            bits = add(llvm.BitcastOp(a[0], I))
            m = add(llvm.AndOp(bits, self.iconst((1 << ti.mbits) - 1)))
            m = add(llvm.OrOp(m, self.iconst(ti.bias << ti.mbits)))
            return add(llvm.BitcastOp(m, F))
        raise ValueError(f"mathlib op {op!r} has no LLVM form")

    def to_int(self, k: SSAValue) -> SSAValue:
        """The clamped k (|k| ≤ emax) truncated toward zero to the same-width integer, as
        the C `(int)k` and numpy's astype: `llvm.trunc`, then + 1.5·2^mbits (exact: the
        sum stays in [2^mbits, 2^(mbits+1)), where one unit is one ulp) and the sum's bits
        less those of 1.5·2^mbits. Every step vectorizes; `llvm.fptosi.sat` (xDSL's llvm
        dialect has no plain fptosi) was scalarized by the x86 backend — 16 scalar
        conversions with their NaN and range checks per 16 lanes, ~40 % of the
        instructions of gelu's slope."""
        ti = self.ti
        magic = 1.5 * 2.0 ** ti.mbits
        whole = self.add(llvm.CallIntrinsicOp(f"llvm.trunc.{self.suffix}", [k], [self.F]))
        bits = self.add(llvm.BitcastOp(self.add(llvm.FAddOp(whole, self.fconst(magic))),
                                       self.I))
        return self.add(llvm.SubOp(bits, self.iconst(int(np.array(magic, ti.dtype).view(
            ti.uint)))))

    def split(self, whole: SSAValue, parts: int) -> list[SSAValue]:
        """`whole` as `parts` vectors of `lanes` (itself when there is one part)."""
        if parts == 1:
            return [whole]
        n = self.lanes
        return [self.add(llvm.ShuffleVectorOp(whole, whole, DenseArrayBase.from_list(
            i32, list(range(j * n, (j + 1) * n))), self.F)) for j in range(parts)]

    def joined(self, vs: list[SSAValue]) -> SSAValue:
        """The parts side by side again, by pairs (a shuffle concatenates two vectors of
        one width)."""
        width = self.lanes
        while len(vs) > 1:
            width *= 2
            t = VectorType(self.S, [width])
            mask = DenseArrayBase.from_list(i32, list(range(width)))
            vs = [self.add(llvm.ShuffleVectorOp(a, b, mask, t))
                  for a, b in zip(vs[::2], vs[1::2])]
        return vs[0]


WIDE_PICK = 4
"""A pick among this many constants or more permutes (its index, a chain of selects, is
made once and shared by every pick on the same conds: erf's 23 coefficients and centre);
a shorter one stays selects (exp's scale factor among 3: no fewer instructions)."""


PERMUTES: dict[str, dict[tuple[str, int], str]] = {
    "avx512": {("f64", 8): "llvm.x86.avx512.permvar.df.512",  # vpermpd zmm
               ("f64", 4): "llvm.x86.avx512.permvar.df.256",  # vpermpd ymm (AVX-512VL)
               ("f32", 16): "llvm.x86.avx512.permvar.sf.512",  # vpermps zmm
               ("f32", 8): "llvm.x86.avx2.permps"},  # vpermps ymm
    "avx2": {("f32", 8): "llvm.x86.avx2.permps"},
}
"""The variable permutes of a whole vector each instruction set has, by (type, lanes).
AVX2 has none of 64-bit lanes; on Zen 3 its `vpermps` takes two micro-ops on one pipe,
so erf's f64 picks (six pieces in four lanes: two permutes and a select) stay selects."""


Forms = dict[int, tuple[tuple[int, ...], tuple[str, ...]]]
"""Select n → (conds, values) of the pick it is (`_forms`)."""


def _forms(p: mathlib.Program) -> Forms:
    """Each select of the program that is a pick among constants: (conds, values).

    `Builder.pick(conds, values)` is the chain select(c0, v0, select(c1, v1, … v_m)): a
    select whose taken value is a constant and whose other is a constant or such a
    chain is a pick with conds (c, …) and values (v, …)."""
    forms: Forms = {}

    def form(n: int):
        ins = p.instrs[n]
        return ((), (ins.const,)) if ins.op == "const" else forms.get(n)

    for n, ins in enumerate(p.instrs):
        if ins.op == "select":
            cond, taken, other = ins.args
            first, rest = form(taken), form(other)
            if first is not None and not first[0] and rest is not None:
                forms[n] = (cond, *rest[0]), (*first[1], *rest[1])
    return forms


class _Picks:
    """The picks of a program among constants (`_forms`), written for one part.

    Each pick of WIDE_PICK or more values becomes `permute(table, index)`: the table the
    values padded with the last to the lanes, the index the first i whose c_i holds (m
    when none does), a chain of integer selects made once per list of conds. The chain's
    inner selects are then unused (LLVM drops them). A width the instruction set has no
    permute of (`PERMUTES`) keeps its selects. Under a `level` of `_Cases` (every lane's
    index at most `level` in the chain on `cases`), a pick on those conds is the chain of
    its first `level` + 1 values: a constant, or one select."""

    def __init__(self, p: mathlib.Program, lanes: int, w: _Writer, forms: Forms,
                 isa: str = "avx512", level: int | None = None,
                 cases: tuple[int, ...] = ()) -> None:
        self.p, self.lanes, self.w = p, lanes, w
        self.permute = PERMUTES[isa].get((p.ty, lanes))
        self.level, self.cases = level, cases
        self.forms = forms
        self.indices: dict[tuple[int, ...], SSAValue] = {}

    def permuted(self, n: int, vals: list[SSAValue]) -> SSAValue | None:
        """Select n as one permutation (or its level's chain), when it is a wide enough
        pick."""
        form = self.forms.get(n)
        if form is None:
            return None
        conds, values = form
        if self.level is not None and conds == self.cases:
            return self._chain(conds[:self.level], values[:self.level + 1], vals)
        if self.permute is None or not WIDE_PICK <= len(values) <= self.lanes:
            return None
        w = self.w
        table = [float(_const_float(v, self.p.ty).value.data) for v in values]
        table += [table[-1]] * (self.lanes - len(table))
        t = w.add(llvm.ConstantOp(DenseIntOrFPElementsAttr.from_list(w.F, table), w.F))
        return w.add(llvm.CallIntrinsicOp(self.permute, [t, self._index(conds, vals)], [w.F]))

    def _chain(self, conds: tuple[int, ...], values: tuple[str, ...],
               vals: list[SSAValue]) -> SSAValue:
        w = self.w
        v = w.fconst(float(_const_float(values[-1], self.p.ty).value.data))
        for c, value in zip(reversed(conds), reversed(values[:-1])):
            taken = w.fconst(float(_const_float(value, self.p.ty).value.data))
            v = w.add(llvm.SelectOp(vals[c], taken, v))
        return v

    def _index(self, conds: tuple[int, ...], vals: list[SSAValue]) -> SSAValue:
        if conds not in self.indices:
            index = self.w.iconst(len(conds))
            for i in reversed(range(len(conds))):
                index = self.w.add(llvm.SelectOp(vals[conds[i]], self.w.iconst(i), index))
            self.indices[conds] = index
        return self.indices[conds]


@dataclass(frozen=True)
class _Cases:
    """A program written once per level after its pieces are known: erf's 23
    coefficients and its centre are picks among six pieces by five conds (|x| < 0.75,
    < 1.5, < 2.25, …), and a pick costs what its Horner step costs several times over (on
    AVX2 a select per piece and a broadcast per constant; on Zen 3 the permute of
    `PERMUTES` costs as much). So the variant computes the program up to its last cond
    (`after`), then branches on the largest piece index among the lanes of every part:
    at most the first level (1: |x| < 1.5) — each pick one select, the Horner step's
    constant one of two —, at most the second (3: |x| < 3) — three selects —, else the picks as
    before. Each lane computes the same operations on the same values in every branch:
    the bits stay. An activation's arguments mostly lie in the first pieces (|x| < 1.5
    holds 87 % of a standard normal's draws under gelu's x/√2, |x| < 3 all but 3 in
    1 000). Measured on Zen 3 (f64, 4 parts of 4 lanes): gelu over 4 096 standard normal
    arguments 10.0 → 5.9 ns an element; `presk train`'s tutorial step
    3.3 → 2.6 µs once trained (its arguments spread past 1.5: a level at 1 alone gave
    3.1, at 0 and 1 3.1, at 1, 2 and 3 2.7). Where the picks are AVX-512's permutes (one
    `vpermpd` a pick, whatever the pieces), the cases save nothing and their tests and
    branches cost: on Zen 4 the same step took 1.6 µs without cases, at 0, at 1, or at 0
    and 1, and 1.8–2.1 at 1 and 3 — so `LEVELS` is by instruction set, none on AVX-512."""

    conds: tuple[int, ...]  # the conds of the program's widest picks
    after: int  # the first instruction after the last of them
    levels: tuple[int, ...]  # LEVELS[isa]

    LEVELS = {"avx512": (), "avx2": (1, 3)}

    @staticmethod
    def of(forms: Forms, isa: str) -> _Cases | None:
        """The program's cases on `isa`, when it has levels there and the program's wide
        picks (WIDE_PICK values or more) are chains on one list of conds and its suffixes
        (the chain's inner selects)."""
        levels = _Cases.LEVELS[isa]
        wide = [c for c, v in forms.values() if len(v) >= WIDE_PICK]
        if not levels or not wide:
            return None
        longest = max(wide, key=len)
        if len(longest) <= max(levels) or any(c != longest[-len(c):] for c in wide):
            return None
        return _Cases(longest, max(longest) + 1, levels)

    def write(self, w: _Writer, p: mathlib.Program, forms: Forms, entry: Block,
              args: list[list[SSAValue]], vals: list[list[SSAValue]], isa: str) -> list[Block]:
        """The entry (the program up to `after`, the tests, the first branch), a block
        per further test, and a block per case, each returning the result."""
        general = [_Picks(p, w.lanes, w, forms, isa) for _ in vals]
        w.write(p, range(self.after), args, vals, general)
        tests = [self._all_within(w, vals, level) for level in self.levels]
        entry_ops, bodies = w.block(), []
        for level in (*self.levels, None):
            mine = [list(v) for v in vals]
            w.write(p, range(self.after, len(p.instrs)), args, mine,
                    [_Picks(p, w.lanes, w, forms, isa, level, self.conds) for _ in vals])
            w.ops.append(llvm.ReturnOp(w.joined([v[p.result] for v in mine])))
            bodies.append(Block(w.block()))
        checks = [entry, *(Block() for _ in tests[1:])]
        for j, (check, test) in enumerate(zip(checks, tests)):
            otherwise = checks[j + 1] if j + 1 < len(checks) else bodies[-1]
            check.add_ops([*(entry_ops if j == 0 else ()),
                           llvm.CondBrOp(test, bodies[j], [], otherwise, [])])
        return [*checks, *bodies]

    def _all_within(self, w: _Writer, vals: list[list[SSAValue]], level: int) -> SSAValue:
        """Whether every lane of every part has one of conds[0..level] (its index in the
        chain at most `level`)."""
        within = []
        for part in vals:
            m = part[self.conds[0]]
            for c in self.conds[1:level + 1]:
                m = w.add(llvm.OrOp(m, part[c]))
            within.append(m)
        mask = within[0]
        for m in within[1:]:
            mask = w.add(llvm.AndOp(mask, m))
        return w.add(llvm.CallIntrinsicOp(f"llvm.vector.reduce.and.v{w.lanes}i1", [mask],
                                          [IntegerType(1)]))


@lru_cache(maxsize=None)
def has_wide_pick(fn: str, ty: str) -> bool:
    """Whether the program picks among WIDE_PICK or more constants (its vector variant
    then permutes where the scalar function selects)."""
    forms = _forms(mathlib.program(fn, ty))
    return any(len(values) >= WIDE_PICK for _, values in forms.values())


SYMBOL = re.compile(r"presk_(\w+)_(f32|f64)")
"""The name of a math library function: presk_<fn>_<ty>."""

VECTOR_SYMBOL = re.compile(r"presk_(\w+)_(f32|f64)_v(\d+)")
"""The name of its vector variant: presk_<fn>_<ty>_v<lanes>."""


def _parse_use(use) -> tuple[str, str]:
    if isinstance(use, tuple):
        fn, ty = use
    else:
        m = SYMBOL.fullmatch(str(use))
        if m is None:
            raise ValueError(f"not a mathlib function: {use!r}")
        fn, ty = m.groups()
    if fn not in mathlib.FUNCTIONS or ty not in mathlib.TYPES:
        raise ValueError(f"no mathlib function {fn!r} in {ty!r}")
    return fn, ty


def declare_all(module: ModuleOp,
                uses: Iterable[tuple[str, str] | str] | None = None) -> list[str]:
    """Append to `module` the mathlib functions it needs and does not define yet.

    `uses`: (fn, ty) pairs or symbols `presk_<fn>_<ty>`; by default the callees of the
    module's `llvm.call`s that name a mathlib function. Returns the symbols added."""
    if uses is None:
        uses = sorted({op.callee.string_value() for op in module.walk()
                       if isinstance(op, llvm.CallOp) and op.callee is not None
                       and SYMBOL.fullmatch(op.callee.string_value())})
    have = {op.sym_name.data for op in module.ops if isinstance(op, llvm.FuncOp)}
    added: list[str] = []
    for use in uses:
        fn, ty = _parse_use(use)
        name = symbol(fn, ty)
        if name in have:
            existing = next(op for op in module.ops
                            if isinstance(op, llvm.FuncOp) and op.sym_name.data == name)
            if existing.body.blocks:
                continue
            existing.detach()  # a bare declaration: replaced by the definition
            existing.erase()
        module.body.block.add_op(to_llvm(fn, ty))
        have.add(name)
        added.append(name)
    return added


__all__ = ["to_llvm", "declare_all", "has_wide_pick", "symbol", "vector_symbol"]
