"""One math library for every target: exp, log, log1p, tanh, erf, softplus, sin, cos, sinh
and pow in f32 and f64 — the `Library` rows of the table of element-wise functions
(presk/ops) — each written ONCE as a straight-line program over a tiny expression form.

The form (`Program`: a list of SSA `Instr`; the n-th `arg` is the n-th argument, pow has two)
has only operations whose IEEE result is fixed
bit for bit in every target: + − × ÷ (round to nearest even, one rounding each, never fused),
negation and |·|, comparisons (IEEE: false on NaN, `ne` true) and `select`, constants given
as exact hex floats, and three bit operations:

- `pow2 k`: 2^k for an integer-valued k, by building the exponent field; k is clamped to
  the normal range [emin, emax] first (NaN counts as below the range).
- `exponent x`: the unbiased exponent field of x, as a float (meaningful for normal x).
- `mantissa x`: x with sign cleared and exponent field set to 0, in [1, 2) for normal x.

Round-to-integer is the classic `(v + 1.5·2^(p−1)) − 1.5·2^(p−1)` (exact for |v| < 2^(p−2)),
plain arithmetic. There are no branches: every select evaluates both sides, so a program is a
dataflow graph that an emitter writes out one instruction per line, in order.

From a `Program`, `evaluate` computes it with numpy in the type (f32 in np.float32, never
promoted; no FMA exists in numpy's elementwise loops), and `to_c` writes C99 (to be
compiled with `-ffp-contract=off`, no fast-math) that computes the same bits; the LLVM
emitter of the native backend will be the same walk (fadd/fsub/fmul/fdiv, fcmp o*/une,
select, bitcast/shl/lshr/and/or for the bit operations; pow2's integer after the clamp
by trunc, an exact add of 1.5·2^mbits and the bits: presk/emit/mathlib_llvm.py).

Algorithms (docs/mathlib.md has the measured accuracy):
- exp: k = rint(x/ln2), r = (x − k·ln2hi) − k·ln2lo (Cody–Waite), fdlibm/musl's rational
  form exp(r) = 1 + (r·c/(2−c) − lo + hi) with c = r − r²·P(r²) (coefficients of fdlibm
  e_exp.c, musl expf.c for f32), then ·2^k with at most one rounding (two-step scaling into
  the subnormal range and near overflow).
- log: x = 2^k·m, m in [√2/2, √2), f = m − 1, s = f/(2+f), the fdlibm/musl polynomial in
  s² (e_log.c, logf.c); subnormals prescaled.
- log1p: w = 1 + u with its rounding error c carried as c/w into the log kernel (as musl).
- tanh: |x| < 0.75: x + x·(x²·P(x²)), P a Chebyshev fit (presk/emit/mathlib_fit.py);
  otherwise ±(1 − 2/(exp(2|x|) + 1)).
- erf: |x| < 0.75: x + x·Q(x²); then piecewise erf(x) = 1 + R_i(|x| − c_i) (one Horner rule on
  per-element picked coefficients, `piecewise_horner`) on intervals
  up to 6 (f64) / 4 (f32), 1 beyond; all fits re-derived by mathlib_fit.py (not A&S).
- softplus: max(x, 0) + log1p(exp(−|x|)).
- sinh: |x| < 1: x + x·(x²·P(x²)), P a Chebyshev fit; then exp's reduction |x| = k·ln2 + r
  and sinh = (2^(k−1) − 2^(−k−1)) + (2^(k−1)·(e^r − 1) − 2^(−k−1)·(e^−r − 1)), the
  parts kept apart (no cancellation, one rounding of note); near overflow
  2·exp(|x| − 2·ln2).
- sin, cos: x = n·π/2 + y by fdlibm's three-step Cody–Waite reduction (π/2 in three
  short parts and a tail), fdlibm's kernel forms with fitted polynomials, quadrant n mod 4;
  only for |x| ≤ 2^20·π/2 (f64) / 2^12·π/2 (f32), NaN beyond (no Payne–Hanek yet).
- pow: exp(y·log|x|) in double-word arithmetic of the type (f32 too: no detour through
  f64): log|x| as hi + lo (log's reduction, s = f/(2+f) as s_hi + s_lo, 2s + (2/3)s³ in
  double-word, s⁵·Q(s²) in the type), y·log split exactly by Dekker's product (Veltkamp
  splits, multiplications only — no fma), exp of hi + lo (exp with the lo folded into the
  Cody–Waite low part); the sign by parity of an integer y, and C99 Annex F's special
  cases by selects.

Every engine computes these functions with this module: the PSK-Core f64 interpreter
(presk/analysis/numbers.py `F64`) and the kernel interpreter (presk/analysis/kernel_math.py)
through `evaluate`, the native backend through presk/emit/mathlib_llvm.py, the C export
through `to_c` — so they compute the same bits.

One file, though long: each function is written once here as a `Builder` program and the
form it is written in (`Program`, `evaluate`, `to_c`) is what makes the targets agree; the
length is the ten algorithms, each short.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from presk import ops

TYPES = ("f32", "f64")


@dataclass(frozen=True)
class TypeInfo:
    name: str
    dtype: type
    uint: type
    sint: type
    mbits: int  # stored mantissa bits
    bias: int
    emin: int
    emax: int
    c_type: str
    c_uint: str
    c_sint: str
    suffix: str  # C literal suffix


TI = {
    "f32": TypeInfo("f32", np.float32, np.uint32, np.int32, 23, 127, -126, 127,
                    "float", "uint32_t", "int32_t", "f"),
    "f64": TypeInfo("f64", np.float64, np.uint64, np.int64, 52, 1023, -1022, 1023,
                    "double", "uint64_t", "int64_t", ""),
}

FLOAT_OPS = {"arg", "const", "add", "sub", "mul", "div", "neg", "abs", "select",
             "pow2", "exponent", "mantissa"}
BOOL_OPS = {"lt", "le", "gt", "ge", "eq", "ne"}
BINARY = {"add": "+", "sub": "-", "mul": "*", "div": "/",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


@dataclass(frozen=True)
class Instr:
    op: str
    args: tuple[int, ...] = ()
    const: str | None = None  # exact hex float, or "inf", "-inf", "nan"


@dataclass
class Program:
    """The n-th `arg` instruction is the n-th argument (pow has two, the others one)."""
    name: str
    ty: str
    instrs: list[Instr] = field(default_factory=list)
    result: int = -1
    arity: int = 1


def _const_value(text: str, ti: TypeInfo):
    v = float.fromhex(text) if text not in ("inf", "-inf", "nan") else float(text)
    t = ti.dtype(v)
    if not (np.isnan(v) or float(t) == v):
        raise ValueError(f"constant {text} is not exact in {ti.name}")
    return t


class Val:
    """A value of a program under construction; arithmetic records instructions."""

    def __init__(self, b: "Builder", i: int, kind: str):
        self.b, self.i, self.kind = b, i, kind

    def _bin(self, op: str, other, swap: bool = False) -> "Val":
        o = self.b.lift(other)
        a, c = (o, self) if swap else (self, o)
        return self.b.emit(op, a, c)

    __add__ = lambda s, o: s._bin("add", o)
    __radd__ = lambda s, o: s._bin("add", o, True)
    __sub__ = lambda s, o: s._bin("sub", o)
    __rsub__ = lambda s, o: s._bin("sub", o, True)
    __mul__ = lambda s, o: s._bin("mul", o)
    __rmul__ = lambda s, o: s._bin("mul", o, True)
    __truediv__ = lambda s, o: s._bin("div", o)
    __rtruediv__ = lambda s, o: s._bin("div", o, True)
    __lt__ = lambda s, o: s._bin("lt", o)
    __le__ = lambda s, o: s._bin("le", o)
    __gt__ = lambda s, o: s._bin("gt", o)
    __ge__ = lambda s, o: s._bin("ge", o)

    def __neg__(self) -> "Val":
        return self.b.emit("neg", self)

    def eq(self, o) -> "Val":
        return self._bin("eq", o)

    def ne(self, o) -> "Val":
        return self._bin("ne", o)


class Builder:
    def __init__(self, name: str, ty: str, arity: int = 1):
        self.ti = TI[ty]
        self.p = Program(name, ty, arity=arity)
        self.args = [self.emit("arg") for _ in range(arity)]
        self.x = self.args[0]

    def emit(self, op: str, *args: Val, const: str | None = None) -> Val:
        for a in args:
            want = "b" if (op == "select" and a is args[0]) else "f"
            if a.kind != want:
                raise TypeError(f"{op}: operand kind {a.kind}, expected {want}")
        self.p.instrs.append(Instr(op, tuple(a.i for a in args), const))
        return Val(self, len(self.p.instrs) - 1, "b" if op in BOOL_OPS else "f")

    def c(self, text: str) -> Val:
        _const_value(text, self.ti)
        return self.emit("const", const=text)

    def lift(self, v) -> Val:
        if isinstance(v, Val):
            return v
        v = float(v)  # a small exact number such as 1, 2, 0.5
        return self.c(v.hex() if np.isfinite(v) else repr(v))

    def select(self, cond: Val, a, b) -> Val:
        return self.emit("select", cond, self.lift(a), self.lift(b))

    def abs(self, v: Val) -> Val:
        return self.emit("abs", v)

    def pow2(self, k: Val) -> Val:
        return self.emit("pow2", k)

    def exponent(self, v: Val) -> Val:
        return self.emit("exponent", v)

    def mantissa(self, v: Val) -> Val:
        return self.emit("mantissa", v)

    def horner(self, t: Val, coeffs) -> Val:
        """Σ coeffs[i]·t^(n−1−i) (highest degree first), Horner's rule."""
        acc = self.c(coeffs[0])
        for c in coeffs[1:]:
            acc = acc * t + self.c(c)
        return acc

    def pick(self, conds: list[Val], values: list) -> Val:
        """values[i] for the first i with conds[i] true, the last value when none is:
        `len(values) − 1` selects."""
        r = self.lift(values[-1])
        for c, v in zip(reversed(conds), reversed(values[:-1])):
            r = self.select(c, v, r)
        return r

    def piecewise_horner(self, conds: list[Val], t: Val, polys) -> Val:
        """Horner's rule of polys[i] in t for the first piece i whose conds[i] holds (the
        last piece when none does), by ONE Horner's rule whose every coefficient is
        picked per element first — the same bits as evaluating every
        piece and selecting among the results (`select` of each), in a fraction of the
        operations: a shorter polynomial is padded with leading zeros, on which the rule
        is exact (0·t + c = c for finite t; a non-finite t's result is selected away by
        the caller). A vectorized loop thus does one polynomial's arithmetic per element
        and the selects, instead of every piece's arithmetic."""
        n = max(len(p) for p in polys)
        padded = [("0x0p+0",) * (n - len(p)) + tuple(p) for p in polys]
        acc = self.pick(conds, [self.c(p[0]) for p in padded])
        for j in range(1, n):
            acc = acc * t + self.pick(conds, [self.c(p[j]) for p in padded])
        return acc

    def rint(self, v: Val) -> Val:
        """Round to nearest even integer, exact for |v| < 2^(p−2)."""
        m = self.c("0x1.8p23" if self.ti.name == "f32" else "0x1.8p52")
        return (v + m) - m

    def isnan(self, v: Val) -> Val:
        return v.ne(v)


# ---------------------------------------------------------------------------- constants

EXP = {
    # fdlibm e_exp.c (f64), musl expf.c (f32)
    "f64": dict(invln2="0x1.71547652b82fep+0", ln2hi="0x1.62e42fee00000p-1",
                ln2lo="0x1.a39ef35793c76p-33",
                P=("0x1.6376972bea4d0p-25", "-0x1.bbd41c5d26bf1p-20",
                   "0x1.1566aaf25de2cp-14", "-0x1.6c16c16bebd93p-9",
                   "0x1.555555555553ep-3"),
                ovf="0x1.62e42fefa39efp+9", unf="-0x1.74910d52d3051p+9",
                low_scale="0x1p-64", low_shift=64),
    "f32": dict(invln2="0x1.715476p+0", ln2hi="0x1.62e4p-1", ln2lo="0x1.7f7d1cp-20",
                P=("-0x1.6aa42ap-9", "0x1.55551ep-3"),
                ovf="0x1.62e42ep+6", unf="-0x1.9fe36ap+6",
                low_scale="0x1p-32", low_shift=32),
}

LOG = {
    # fdlibm e_log.c / musl log.c (f64), musl logf.c (f32); the odd-index Lg in t2
    "f64": dict(ln2hi="0x1.62e42feep-1", ln2lo="0x1.a39ef35793c76p-33",
                t1=("0x1.39a09d078c69fp-3", "0x1.c71c51d8e78afp-3",
                    "0x1.999999997fa04p-2"),
                t2=("0x1.2f112df3e5244p-3", "0x1.7466496cb03dep-3",
                    "0x1.2492494229359p-2", "0x1.5555555555593p-1"),
                sqrt2="0x1.6a09e667f3bcdp+0", minnormal="0x1p-1022",
                sub_scale="0x1p54", sub_shift=54),
    "f32": dict(ln2hi="0x1.62e3p-1", ln2lo="0x1.2fefa2p-17",
                t1=("0x1.f13c4cp-3", "0x1.999c26p-2"),
                t2=("0x1.23d3dcp-2", "0x1.555554p-1"),
                sqrt2="0x1.6a09e6p+0", minnormal="0x1p-126",
                sub_scale="0x1p25", sub_shift=25),
}

# near-minimax fits, re-derived by `python -m presk.emit.mathlib_fit` (highest degree first)
FIT = {
    "f64": {
        "tanh_small": (
            "-0x1.b87709c583a0fp-20", "0x1.51282042d0b9ap-17", "-0x1.215cdb73c8b35p-15",
            "0x1.8b4d9f3447ab6p-14", "-0x1.f351c7b8d9d91p-13", "0x1.353280941795ap-11",
            "-0x1.7d9fdd51d36fap-10", "0x1.d6d397c6172ccp-9", "-0x1.226e3434333f1p-7",
            "0x1.664f487b7c37ep-6", "-0x1.ba1ba1ba03fdep-5", "0x1.111111111101fp-3",
            "-0x1.5555555555555p-2",
        ),
        "sinh_small": (
            "0x1.b41232cf9950fp-41", "0x1.611cb330c1fe8p-33", "0x1.ae6460fae3728p-26",
            "0x1.71de3a4e14f40p-19", "0x1.a01a01a01ee70p-13", "0x1.11111111110fdp-7",
            "0x1.5555555555555p-3",
        ),
        "erf_small": (
            "-0x1.05364c48fa2d3p-30", "0x1.ef41d2b29a3a8p-27", "-0x1.5ec0e0bec99f7p-23",
            "0x1.b9dae461077e7p-20", "-0x1.f4d1d6286861cp-17", "0x1.f9a32306e0932p-14",
            "-0x1.c02db3ec9fd99p-11", "0x1.565bcd0e2c679p-8", "-0x1.b82ce31287ce6p-6",
            "0x1.ce2f21a042bc6p-4", "-0x1.812746b0379e7p-2", "0x1.06eba8214db69p-3",
        ),
        "erf_0.75_1.5": (
            "-0x1.5c975af09664dp-24", "0x1.bad13f4c76df1p-21", "-0x1.6566494d86f6ap-23",
            "-0x1.02f172e0a6855p-17", "0x1.67add79c4c2fap-17", "0x1.9ed8c2e33342dp-15",
            "-0x1.28de9c0e9efe8p-13", "-0x1.7319ef99183acp-13", "0x1.2e52765404611p-10",
            "-0x1.79b04dcb522fep-12", "-0x1.8b43c43f35b60p-8", "0x1.3acc78423f1eep-7",
            "0x1.fd1c6c11edd72p-7", "-0x1.f65d15f1cfc3fp-5", "0x1.ca5083167a243p-6",
            "0x1.4cb3cf0aa0b9dp-3", "-0x1.6ea6cf452e838p-2", "0x1.45e99bcbb7915p-2",
            "-0x1.c9296beb09cf1p-4",
        ),
        "erf_1.5_2.25": (
            "0x1.78b0cc7656a3fp-24", "-0x1.05bfcc47e4276p-23", "-0x1.5cc720bbd3854p-21",
            "0x1.3e7c82aa4dc84p-19", "0x1.b5a9081173093p-21", "-0x1.5d086d90d32f2p-16",
            "0x1.2e9cc050b9374p-15", "0x1.353eeeeb97164p-14", "-0x1.991c20b1fb4bap-12",
            "0x1.7bda7957af93ep-12", "0x1.76ff57db6b5afp-10", "-0x1.42fcbaa85769fp-8",
            "0x1.0d099c7b29b1ep-8", "0x1.779b1e57042ccp-7", "-0x1.5a316520b81b9p-5",
            "0x1.143d1c6f4f093p-4", "-0x1.01a1c847fa207p-4", "0x1.12ceb37ff9bc3p-5",
            "-0x1.0678442cc256fp-7",
        ),
        "erf_2.25_3.0": (
            "-0x1.3ffb593b75b6fp-26", "0x1.5daf222e6968fp-23", "-0x1.2b223e5b6fb08p-22",
            "-0x1.6a6eb27acaf7ep-21", "0x1.16fc42f70327ep-18", "-0x1.c0d30fc09e8abp-18",
            "-0x1.5a7e2c74d14f0p-17", "0x1.3631dabd018f1p-14", "-0x1.4006bb77bb6d5p-13",
            "0x1.229ef022cf8a9p-15", "0x1.64f891b0abce1p-11", "-0x1.267f3bc3da4e5p-9",
            "0x1.146c4b3e28d17p-8", "-0x1.62d4c6d49c98ep-8", "0x1.407fbd18f1200p-8",
            "-0x1.8af14828bffa2p-9", "0x1.2ce898809244ep-10", "-0x1.aeb4423e690e7p-13",
        ),
        "erf_3.0_4.0": (
            "-0x1.388d875ce5567p-31", "0x1.0853ec544d76dp-28", "-0x1.1e3dc7fad2752p-27",
            "-0x1.83249e91c4d02p-28", "0x1.8c9213e07c95fp-24", "-0x1.43f1cc9e1c7f4p-22",
            "0x1.dc7ed6eabd196p-22", "0x1.dd8072e583d32p-22", "-0x1.37741272e2869p-18",
            "0x1.0135257cedc46p-16", "-0x1.1f6304e077732p-15", "0x1.e827fafe32457p-15",
            "-0x1.46153fb97ff5ap-14", "0x1.586bafc9ab406p-14", "-0x1.1c07721ac8211p-14",
            "0x1.62ccea63cb745p-15", "-0x1.3d0e43d674155p-16", "0x1.6a597219a93a2p-18",
            "-0x1.8ef2a9a18d857p-21",
        ),
        "erf_4.0_6.0": (
            "-0x1.3d653ad020efep-44", "0x1.15dfcf62feff6p-42", "-0x1.33d8296fd8977p-43",
            "-0x1.635b7d4112c12p-40", "0x1.f7aef6dced475p-38", "-0x1.e029506c87c31p-36",
            "0x1.68112efc1c759p-34", "-0x1.be7258cd9d7cap-33", "0x1.d9d26b3f6c99ap-32",
            "-0x1.b589c7e9bdea1p-31", "0x1.617977f9274b4p-30", "-0x1.f41453f26cca6p-30",
            "0x1.3506010b9d0b0p-29", "-0x1.4bce69a6f8a02p-29", "0x1.32c7288dc5b40p-29",
            "-0x1.e2359595a56ffp-30", "0x1.3c51d0ba83741p-30", "-0x1.516d3ad6d62fep-31",
            "0x1.196da0a8ce709p-32", "-0x1.589b23262069dp-34", "0x1.13af4f0514d62p-36",
            "-0x1.b0c1a7409d0edp-40",
        ),
    },
    "f32": {
        "tanh_small": (
            "-0x1.6d2f140000000p-11", "0x1.9500ba0000000p-9", "-0x1.1c94b00000000p-7",
            "0x1.65c1e80000000p-6", "-0x1.ba15280000000p-5", "0x1.1111020000000p-3",
            "-0x1.5555560000000p-2",
        ),
        "sinh_small": (
            "0x1.78a70e0000000p-19", "0x1.a009000000000p-13", "0x1.11111e0000000p-7",
            "0x1.5555560000000p-3",
        ),
        "erf_small": (
            "-0x1.623bf00000000p-11", "0x1.4f3d080000000p-8", "-0x1.b7aaa00000000p-6",
            "0x1.ce2ae20000000p-4", "-0x1.81273a0000000p-2", "0x1.06eba80000000p-3",
        ),
        "erf_0.75_1.5": (
            "-0x1.73f6200000000p-8", "0x1.36b22c0000000p-7", "0x1.fbe4680000000p-7",
            "-0x1.f640a00000000p-5", "0x1.ca56960000000p-6", "0x1.4cb3880000000p-3",
            "-0x1.6ea6d00000000p-2", "0x1.45e99c0000000p-2", "-0x1.c9296c0000000p-4",
        ),
        "erf_1.5_2.25": (
            "0x1.5745020000000p-10", "-0x1.3b2b3a0000000p-8", "0x1.0dde6e0000000p-8",
            "0x1.77304c0000000p-7", "-0x1.5a326e0000000p-5", "0x1.143da20000000p-4",
            "-0x1.01a1c60000000p-4", "0x1.12ceb00000000p-5", "-0x1.0678440000000p-7",
        ),
        "erf_2.25_3.0": (
            "0x1.4e31b60000000p-11", "-0x1.24b3640000000p-9", "0x1.14ac960000000p-8",
            "-0x1.62eac60000000p-8", "0x1.407dee0000000p-8", "-0x1.8af0020000000p-9",
            "0x1.2ce8a00000000p-10", "-0x1.aeb45a0000000p-13",
        ),
        "erf_3.0_4.0": (
            "0x1.147c300000000p-14", "-0x1.912cf60000000p-14", "0x1.53589a0000000p-14",
            "-0x1.1024300000000p-14", "0x1.634eee0000000p-15", "-0x1.3f720a0000000p-16",
            "0x1.6a51520000000p-18", "-0x1.8e59940000000p-21",
        ),
    },
}

TANH_SMALL = "0x1.8p-1"  # 0.75
EXPM1 = {  # beyond ±edge, e^x − 1 rounds to e^x (above) or to −1 (below): exp, or −1
    "f64": dict(edge="0x1.4p+5"), "f32": dict(edge="0x1.4p+4"),
}
SINH = {  # above `huge`, sinh|x| = 2·exp(|x| − 2·ln2): |x| − 2·ln2hi is exact there
    "f64": dict(huge="0x1p+9"), "f32": dict(huge="0x1p+6"),
}
ERF_PIECES = {  # (lo, hi) of |x|: erf = 1 + R(|x| − (lo+hi)/2)
    "f64": ((0.75, 1.5), (1.5, 2.25), (2.25, 3.0), (3.0, 4.0), (4.0, 6.0)),
    "f32": ((0.75, 1.5), (1.5, 2.25), (2.25, 3.0), (3.0, 4.0)),
}


# ---------------------------------------------------------------------------- the functions

def _exp(b: Builder, x: Val) -> Val:
    return _exp_core(b, x, None)


def _exp_core(b: Builder, x: Val, xlo: Val | None) -> Val:
    """exp(x + xlo), xlo a small correction (|xlo| ≤ ulp(x)) folded into the low part of
    the Cody–Waite reduction; exp alone has none (and exactly the instructions it had)."""
    K = EXP[b.ti.name]
    ovf, unf = b.c(K["ovf"]), b.c(K["unf"])
    xc = b.select(x > ovf, ovf, b.select(x < unf, unf, x))  # NaN stays NaN
    k = b.rint(xc * b.c(K["invln2"]))
    hi = xc - k * b.c(K["ln2hi"])
    lo = k * b.c(K["ln2lo"])
    if xlo is not None:
        lo = lo - xlo
    y = 1 + _expm1_reduced(b, hi, lo)
    # y·2^k with one rounding: k in [emin, emax] directly; above, (y·2^(k−1))·2;
    # below, (y·2^(k+shift))·2^−shift (the first product exact and normal)
    emax, emin = b.ti.emax, b.ti.emin
    high = k > float(emax)
    low = k < float(emin)
    t = b.select(high, k - 1, b.select(low, k + float(K["low_shift"]), k))
    m = b.select(high, 2, b.select(low, b.c(K["low_scale"]), 1))
    res = (y * b.pow2(t)) * m
    return b.select(x > ovf, "inf", b.select(x < unf, 0, res))


def _expm1_reduced(b: Builder, hi: Val, lo: Val) -> Val:
    """exp(r) − 1 for the reduced argument r = hi − lo (|r| ≤ ln2/2), fdlibm's rational
    form before its final `1 +`: exp keeps the sum, sinh the parts."""
    r = hi - lo
    z = r * r
    c = r - z * b.horner(z, EXP[b.ti.name]["P"])  # P1 + z·(P2 + …)
    return (r * c / (2 - c) - lo) + hi


def _expm1(b: Builder, x: Val) -> Val:
    """With x = k·ln2 + r (exp's reduction, |k| ≤ 58 inside ±edge) and p = e^r − 1:
    e^x − 1 = (2^k − 1) + 2^k·p, where 2^k − 1 is exact (or rounds below half an ulp of
    the result) and 2^k·p is exact, so one rounding of note; k = 0 is p itself, the
    accurate small case. Beyond ±edge: exp(x) (which overflows where expm1 does) or −1."""
    K = EXP[b.ti.name]
    edge = b.c(EXPM1[b.ti.name]["edge"])
    xc = b.select(x > edge, edge, b.select(x < -edge, -edge, x))  # NaN stays NaN
    k = b.rint(xc * b.c(K["invln2"]))
    hi = xc - k * b.c(K["ln2hi"])
    lo = k * b.c(K["ln2lo"])
    t = b.pow2(k)
    mid = (t - 1) + t * _expm1_reduced(b, hi, lo)
    return b.select(x > edge, _exp(b, x), b.select(x < -edge, -1, mid))


def _sinh(b: Builder, x: Val) -> Val:
    """|x| < 1: x + x·(x²·P(x²)). Up to HUGE: with |x| = k·ln2 + r, exp(±r) = 1 + p±
    and sinh|x| = (2^(k−1) − 2^(−k−1)) + (2^(k−1)·p₊ − 2^(−k−1)·p₋), the first sum exact
    (or its rounding below half an ulp of the result), so one rounding of note. Above
    (exp(|x|) near overflow): 2·exp(|x| − 2·ln2), 2·ln2's low part folded into the
    reduction and |x| − 2·ln2hi exact there (so exp stays below its own overflow where
    sinh is finite)."""
    K, S = EXP[b.ti.name], SINH[b.ti.name]
    a = b.abs(x)
    z = x * x
    small = x + x * (z * b.horner(z, FIT[b.ti.name]["sinh_small"]))
    huge = b.c(S["huge"])
    ac = b.select(a > huge, huge, a)  # NaN stays NaN
    k = b.rint(ac * b.c(K["invln2"]))
    hi = ac - k * b.c(K["ln2hi"])
    lo = k * b.c(K["ln2lo"])
    up, down = b.pow2(k - 1), b.pow2(-k - 1)
    mid = (up - down) + (up * _expm1_reduced(b, hi, lo) - down * _expm1_reduced(b, -hi, -lo))
    ln2hi2, ln2lo2 = (b.lift(2 * float.fromhex(K[n])) for n in ("ln2hi", "ln2lo"))
    top = _exp_core(b, a - ln2hi2, -ln2lo2) * 2
    r = b.select(a > huge, top, mid)
    r = b.select(x < 0, -r, r)
    return b.select(a < 1, small, r)


def _log_core(b: Builder, x: Val, c: Val | None) -> Val:
    """log(x) (+ c, a small correction added inside the sum) for positive finite x."""
    L = LOG[b.ti.name]
    sub = x < b.c(L["minnormal"])
    xs = b.select(sub, x * b.c(L["sub_scale"]), x)
    e = b.exponent(xs) - b.select(sub, float(L["sub_shift"]), 0)
    m = b.mantissa(xs)
    big = m > b.c(L["sqrt2"])
    m = b.select(big, m * 0.5, m)
    dk = b.select(big, e + 1, e)
    f = m - 1
    hfsq = 0.5 * f * f
    s = f / (2 + f)
    z = s * s
    w = z * z
    t1 = w * b.horner(w, L["t1"])
    t2 = z * b.horner(w, L["t2"])
    R = t2 + t1
    lo = dk * b.c(L["ln2lo"])
    if c is not None:
        lo = lo + c
    return (((s * (hfsq + R) + lo) - hfsq) + f) + dk * b.c(L["ln2hi"])


def _log(b: Builder, x: Val) -> Val:
    r = _log_core(b, x, None)
    r = b.select(x.eq(0), "-inf", r)
    r = b.select(x < 0, "nan", r)
    r = b.select(x.eq(float("inf")), "inf", r)
    return b.select(b.isnan(x), x, r)


def _log1p(b: Builder, u: Val) -> Val:
    w = 1 + u
    c = b.select(w >= 2, 1 - (w - u), u - (w - 1))  # the rounding error of 1 + u
    r = _log_core(b, w, c / w)
    r = b.select(u.eq(-1), "-inf", r)
    r = b.select(u < -1, "nan", r)
    r = b.select(u.eq(float("inf")), "inf", r)
    return b.select(b.isnan(u), u, r)


def _tanh(b: Builder, x: Val) -> Val:
    a = b.abs(x)
    z = x * x
    ts = x + x * (z * b.horner(z, FIT[b.ti.name]["tanh_small"]))
    ts = b.select(x.eq(0), x, ts)  # keeps −0
    e = _exp(b, a + a)
    tb = 1 - 2 / (e + 1)  # exp overflow gives 1 exactly
    return b.select(a < b.c(TANH_SMALL), ts, b.select(x < 0, -tb, tb))


def _erf(b: Builder, x: Val) -> Val:
    """The small case Q(x²) and the pieces R_i(|x| − c_i) as ONE Horner's rule, each
    element's argument (x², or |x| − c_i) and coefficients picked first
    (`piecewise_horner`: the bits of each case's own rule, selected); then x + x·Q or
    ±(1 + R_i) by the case."""
    F = FIT[b.ti.name]
    a = b.abs(x)
    z = x * x
    pieces = ERF_PIECES[b.ti.name]
    small = a < 0.75
    conds = [a < b.lift(hi) for _, hi in pieces[:-1]]
    t = a - b.pick(conds, [b.lift((lo + hi) / 2) for lo, hi in pieces])
    acc = b.piecewise_horner([small, *conds], b.select(small, z, t),
                             [F["erf_small"], *(F[f"erf_{lo}_{hi}"] for lo, hi in pieces)])
    r = b.select(a < b.lift(pieces[-1][1]), 1 + acc, b.c("0x1p+0"))
    r = b.select(x < 0, -r, r)
    r = b.select(small, x + x * acc, r)
    return b.select(b.isnan(x), x, r)


def _softplus(b: Builder, x: Val) -> Val:
    e = _exp(b, -b.abs(x))
    return b.select(x > 0, x, 0) + _log1p(b, e)


TRIG = {
    # π/2 = pio2_1 + pio2_2 + pio2_3 + pio2_3t, each pio2_i with few enough bits that
    # n·pio2_i is exact for |n| < 2^20 (f64, fdlibm's __rem_pio2 constants) / 2^12 (f32);
    # the kernels' polynomials are Chebyshev fits on |y| ≤ π/4 (mathlib_fit.py)
    "f64": dict(invpio2="0x1.45f306dc9c883p-1", limit="0x1.921fb5p+20",
                pio2=(("0x1.921fb54400000p+0", "0x1.0b4611a626331p-34"),
                      ("0x1.0b4611a600000p-34", "0x1.3198a2e037073p-69"),
                      ("0x1.3198a2e000000p-69", "0x1.b839a252049c1p-104")),
                sin=("-0x1.ab16f5caa198ap-41", "0x1.61217d9252c03p-33",
                     "-0x1.ae645410e937bp-26", "0x1.71de3a545f836p-19",
                     "-0x1.a01a01a01992fp-13", "0x1.1111111111110p-7",
                     "-0x1.5555555555555p-3"),
                cos=("-0x1.907cd8ff5ede7p-37", "0x1.1eeb67d026ec6p-29",
                     "-0x1.27e4fa16cc2d1p-22", "0x1.a01a019f4ddfdp-16",
                     "-0x1.6c16c16c16963p-10", "0x1.5555555555555p-5")),
    "f32": dict(invpio2="0x1.45f306p-1", limit="0x1.92p+12",
                pio2=(("0x1.92p+0", "0x1.fb5444p-12"),
                      ("0x1.fb4p-12", "0x1.4442d2p-24"),
                      ("0x1.444p-24", "0x1.68c234p-39")),
                sin=("0x1.6dbcfcp-19", "-0x1.a013a4p-13", "0x1.11110ep-7",
                     "-0x1.555556p-3"),
                cos=("0x1.9bd786p-16", "-0x1.6c12d0p-10", "0x1.555554p-5")),
}


def _trig(b: Builder, x: Val, cos: bool) -> Val:
    """sin or cos: x = n·π/2 + (y0 + y1) (three-step Cody–Waite, as fdlibm's medium
    case), then fdlibm's kernel forms on y0 + y1 and the quadrant n mod 4. Defined for
    |x| ≤ limit (2^20·π/2 in f64, 2^12·π/2 in f32); NaN beyond (no Payne–Hanek yet)."""
    K = TRIG[b.ti.name]
    a = b.abs(x)
    fn = b.rint(x * b.c(K["invpio2"]))
    (p1, _), (p2, _), (p3, p3t) = K["pio2"]
    # fdlibm's iterations: each step's tail n·pio2_it is superseded by the next step's
    # pio2_(i+1) + pio2_(i+1)t, so only the last tail is computed (p1t, p2t unused)
    r = x - fn * b.c(p1)
    t = r
    w = fn * b.c(p2)
    r = t - w
    t = r
    w = fn * b.c(p3)
    r = t - w
    w = fn * b.c(p3t) - ((t - r) - w)
    y0 = r - w
    y1 = (r - y0) - w
    # kernels on y0 + y1, |y0| ≲ π/4
    z = y0 * y0
    S = K["sin"]
    v = z * y0
    rs = b.horner(z, S[:-1])
    ksin = y0 - ((z * (0.5 * y1 - v * rs) - y1) - v * b.c(S[-1]))
    rc = z * b.horner(z, K["cos"])
    hz = 0.5 * z
    w = 1 - hz
    kcos = w + (((1 - w) - hz) + (z * rc - y0 * y1))
    # n mod 4, exactly
    q4 = fn * 0.25
    ri = b.rint(q4)
    fl = b.select(ri > q4, ri - 1, ri)
    q = fn - 4 * fl
    if cos:
        res = b.select(q.eq(0), kcos, b.select(q.eq(1), -ksin,
                       b.select(q.eq(2), -kcos, ksin)))
    else:
        res = b.select(q.eq(0), ksin, b.select(q.eq(1), kcos,
                       b.select(q.eq(2), -ksin, -kcos)))
        res = b.select(x.eq(0), x, res)  # keeps −0
    return b.select(a <= b.c(K["limit"]), res, "nan")


def _sin(b: Builder, x: Val) -> Val:
    return _trig(b, x, False)


def _cos(b: Builder, x: Val) -> Val:
    return _trig(b, x, True)


POW = {
    # split: Veltkamp's 2^s + 1 (hi of a split has p − s bits, so hi·hi is exact);
    # big: 2^(p−1), from where every float is an integer; yclamp: |y| beyond it over- or
    # underflows for every |x| ≠ 1 (|log|x|| ≥ 2^−p there), so y is clamped to it before
    # the split (which would overflow near the top of the range);
    # two3: 2/3 as hi + lo; Q: Σ 2/(2n+5)·z^n, the Taylor series of
    # (atanh(s)/s − 1 − s²/3)·2/s⁴ in z = s², truncated where it is below 2^−p relative
    "f64": dict(split="0x1.0000002p+27", big="0x1p+52", yclamp="0x1p+64",
                two3=("0x1.5555555555555p-1", "0x1.5555555555555p-55"),
                Q=("0x1.47ae147ae147bp-4", "0x1.642c8590b2164p-4", "0x1.8618618618618p-4",
                   "0x1.af286bca1af28p-4", "0x1.e1e1e1e1e1e1ep-4", "0x1.1111111111111p-3",
                   "0x1.3b13b13b13b14p-3", "0x1.745d1745d1746p-3", "0x1.c71c71c71c71cp-3",
                   "0x1.2492492492492p-2", "0x1.999999999999ap-2")),
    "f32": dict(split="0x1.001p+12", big="0x1p+23", yclamp="0x1p+32",
                two3=("0x1.555556p-1", "-0x1.555556p-26"),
                Q=("0x1.3b13b2p-3", "0x1.745d18p-3", "0x1.c71c72p-3", "0x1.24924ap-2",
                   "0x1.99999ap-2")),
}


def _split(b: Builder, a: Val) -> tuple[Val, Val]:
    """Veltkamp: a = hi + lo exactly, hi with p − s bits and lo with at most s."""
    g = b.c(POW[b.ti.name]["split"]) * a
    hi = g - (g - a)
    return hi, a - hi


def _two_prod(b: Builder, a: Val, c: Val) -> tuple[Val, Val]:
    """Dekker: a·c = p + e exactly (no underflow), by multiplications only — no fma."""
    p = a * c
    ah, al = _split(b, a)
    ch, cl = _split(b, c)
    return p, ((ah * ch - p) + ah * cl + al * ch) + al * cl


def _two_sum(a: Val, c: Val) -> tuple[Val, Val]:
    """Knuth: a + c = s + e exactly, any magnitudes."""
    s = a + c
    cv = s - a
    return s, (a - (s - cv)) + (c - cv)


def _fast_two_sum(a: Val, c: Val) -> tuple[Val, Val]:
    """Dekker: a + c = s + e exactly when |a| ≥ |c| (or a is 0)."""
    s = a + c
    return s, c - (s - a)


def _log_dd(b: Builder, ax: Val) -> tuple[Val, Val]:
    """log(ax) as hi + lo (|lo| ≤ ulp(hi)), relative error about 2^−(p+12), for positive
    finite ax: ax = 2^k·m as in log, f = m − 1 (exact), s = f/(2+f) as s_hi + s_lo, and
    log(m) = 2s + (2/3)s³ + s⁵·Q(s²) with 2s exact, (2/3)s³ in double-word, the small
    terms in the type; then k·ln2 (ln2hi + ln2lo, k·ln2hi exact) added by an exact sum."""
    L, P = LOG[b.ti.name], POW[b.ti.name]
    sub = ax < b.c(L["minnormal"])
    xs = b.select(sub, ax * b.c(L["sub_scale"]), ax)
    e = b.exponent(xs) - b.select(sub, float(L["sub_shift"]), 0)
    m = b.mantissa(xs)
    big = m > b.c(L["sqrt2"])
    m = b.select(big, m * 0.5, m)
    k = b.select(big, e + 1, e)
    f = m - 1
    d_hi, d_lo = _fast_two_sum(b.lift(2), f)
    s_hi = f / d_hi
    p, pe = _two_prod(b, s_hi, d_hi)
    s_lo = (((f - p) - pe) - s_hi * d_lo) / d_hi  # f − p exact (Sterbenz)
    z_hi, z_lo = _two_prod(b, s_hi, s_hi)
    c_hi, c_lo = _two_prod(b, z_hi, s_hi)
    c_lo = c_lo + z_lo * s_hi  # s_hi³ = c_hi + c_lo
    w_hi, w_lo = b.c(P["two3"][0]), b.c(P["two3"][1])
    t_hi, t_lo = _two_prod(b, c_hi, w_hi)
    t_lo = t_lo + (c_hi * w_lo + c_lo * w_hi)  # (2/3)·s_hi³
    r5 = (c_hi * z_hi) * b.horner(z_hi, P["Q"])  # s⁵·Q(s²)
    corr = (2 * z_hi) * s_lo  # d/ds (2/3)s³ · s_lo; 2s's own share is 2·s_lo
    h, l0 = _fast_two_sum(2 * s_hi, t_hi)
    h, l = _fast_two_sum(h, (((t_lo + corr) + 2 * s_lo) + r5) + l0)
    kh = k * b.c(L["ln2hi"])
    hi, e2 = _two_sum(kh, h)
    return _fast_two_sum(hi, e2 + (l + k * b.c(L["ln2lo"])))


def _is_int(b: Builder, a: Val) -> Val:
    """1 where a ≥ 0 is an integer (+inf counts), else 0 (NaN too): below 2^(p−1),
    (a + 2^(p−1)) − 2^(p−1) rounds a to an integer, exactly."""
    big = b.c(POW[b.ti.name]["big"])
    return b.select(a >= big, 1, b.select(((a + big) - big).eq(a), 1, 0))


def _pow(b: Builder, x: Val, y: Val) -> Val:
    """x^y as C99's pow (Annex F): exp(y·log|x|) with log|x| in double-word (_log_dd), the
    product y·log split exactly (Dekker), exp of hi + lo (_exp_core); the sign from x < 0
    and an odd integer y; NaN for x < 0 finite and y not an integer; the special cases
    at 0, ±1, ±inf and NaN by selects, last pow(x, ±0) = pow(1, y) = 1 (NaN included)."""
    P = POW[b.ti.name]
    inf, nan = float("inf"), float("nan")
    ax, ay = b.abs(x), b.abs(y)
    # the core, for finite nonzero |x| and finite y (the selects below replace the rest)
    ycl = b.c(P["yclamp"])
    yc = b.select(y > ycl, ycl, b.select(y < -ycl, -ycl, y))
    l_hi, l_lo = _log_dd(b, ax)
    z_hi, z_lo = _two_prod(b, yc, l_hi)
    z_hi, z_lo = _fast_two_sum(z_hi, z_lo + yc * l_lo)
    mag = _exp_core(b, z_hi, z_lo)
    mag = b.select(ax.eq(0), b.select(y < 0, inf, 0), mag)
    mag = b.select(ax.eq(inf), b.select(y < 0, 0, inf), mag)
    # y an odd integer: |y| < 2^p and |y|/2 (exact) is an integer plus one half
    half = ay * 0.5
    big = b.c(P["big"])
    frac = b.abs(half - ((half + big) - big))
    odd = b.select(ay < 2 * big, b.select(frac.eq(0.5), 1, 0), 0)
    xneg = b.select(x.eq(0), 1 / x, x) < 0  # −0 included: 1/−0 = −inf
    signed = b.select(xneg, b.select(odd.eq(1), -mag, mag), mag)
    neg_finite = b.select(x > -inf, b.select(_is_int(b, ay).eq(1), signed, nan), signed)
    res = b.select(x < 0, neg_finite, signed)
    # y = ±inf: 0 or inf by |x| against 1, 1 at |x| = 1
    yinf = b.select(ax < 1, b.select(y > 0, 0, inf), b.select(y > 0, inf, 0))
    res = b.select(ay.eq(inf), b.select(ax.eq(1), 1, yinf), res)
    res = b.select(b.isnan(y), y, res)
    res = b.select(b.isnan(x), x, res)
    res = b.select(y.eq(0), 1, res)
    return b.select(x.eq(1), 1, res)


DEFS: dict[str, Callable[..., Val]] = {
    "exp": _exp, "log": _log, "log1p": _log1p, "tanh": _tanh, "erf": _erf,
    "softplus": _softplus, "sin": _sin, "cos": _cos, "pow": _pow, "sinh": _sinh,
    "expm1": _expm1,
}
"""The algorithm of each `Library` row of the table (presk/ops), by the row's name."""
FUNCTIONS = tuple(ops.library())
assert set(DEFS) == set(FUNCTIONS), "every Library row of presk/ops has one program here"


def arity(fn: str) -> int:
    """The number of arguments of `fn` (the table's)."""
    return ops.row(fn).arity

_CACHE: dict[tuple[str, str], Program] = {}


def program(fn: str, ty: str) -> Program:
    """The straight-line program of math function `fn` in type `ty` ("f32" / "f64")."""
    key = (fn, ty)
    if key not in _CACHE:
        b = Builder(fn, ty, arity(fn))
        b.p.result = DEFS[fn](b, *b.args).i
        _CACHE[key] = b.p
    return _CACHE[key]


# ---------------------------------------------------------------------------- numpy

def evaluate(fn: str | Program, ty: str, *xs) -> np.ndarray:
    """The program on numpy arrays xs (one per argument, broadcast together), every
    operation in the type with one IEEE rounding."""
    p = fn if isinstance(fn, Program) else program(fn, ty)
    if len(xs) != p.arity:
        raise TypeError(f"{p.name} takes {p.arity} argument(s), got {len(xs)}")
    ti = TI[p.ty]
    dt = ti.dtype
    shape = np.broadcast_shapes(*(np.shape(a) for a in xs))
    # ascontiguousarray makes a 0-d operand 1-d: the result is reshaped back at the end
    args = [np.ascontiguousarray(a, dtype=dt) for a in np.broadcast_arrays(*xs)]
    x = args[0]
    n_arg = 0
    vals: list = []
    with np.errstate(all="ignore"):
        for ins in p.instrs:
            a = [vals[i] for i in ins.args]
            op = ins.op
            if op == "arg":
                v = args[n_arg]
                n_arg += 1
            elif op == "const":
                v = np.full(x.shape, _const_value(ins.const, ti), dtype=dt)
            elif op == "add":
                v = np.add(a[0], a[1], dtype=dt)
            elif op == "sub":
                v = np.subtract(a[0], a[1], dtype=dt)
            elif op == "mul":
                v = np.multiply(a[0], a[1], dtype=dt)
            elif op == "div":
                v = np.divide(a[0], a[1], dtype=dt)
            elif op == "neg":
                v = np.negative(a[0])
            elif op == "abs":
                v = np.abs(a[0])
            elif op in ("lt", "le", "gt", "ge", "eq", "ne"):
                v = getattr(np, {"lt": "less", "le": "less_equal", "gt": "greater",
                                 "ge": "greater_equal", "eq": "equal",
                                 "ne": "not_equal"}[op])(a[0], a[1])
            elif op == "select":
                v = np.where(a[0], a[1], a[2]).astype(dt, copy=False)
            elif op == "pow2":
                k = np.where(a[0] >= ti.emin, a[0], dt(ti.emin))
                k = np.where(k > ti.emax, dt(ti.emax), k)
                e = (k.astype(ti.sint) + ti.bias).astype(ti.uint)
                v = (e << ti.uint(ti.mbits)).view(dt)
            elif op == "exponent":
                bits = a[0].view(ti.uint)
                e = (bits >> ti.uint(ti.mbits)) & ti.uint(2 * ti.bias + 1)
                v = (e.astype(ti.sint) - ti.bias).astype(dt)
            elif op == "mantissa":
                bits = a[0].view(ti.uint)
                mmask = ti.uint((1 << ti.mbits) - 1)
                v = ((bits & mmask) | ti.uint(ti.bias << ti.mbits)).view(dt)
            else:
                raise ValueError(op)
            assert v.dtype == (np.bool_ if op in BOOL_OPS else dt), (op, v.dtype)
            vals.append(v)
    return vals[p.result].reshape(shape)


# ---------------------------------------------------------------------------- C

def _c_helpers(ti: TypeInfo) -> str:
    T, U, S, n = ti.c_type, ti.c_uint, ti.c_sint, ti.name
    sz = 4 if n == "f32" else 8
    guard = f"PRESK_MATHLIB_HELPERS_{n.upper()}"
    return f"""#ifndef {guard}
#define {guard}
static inline {T} presk_pow2_{n}({T} k) {{
    if (!(k >= {ti.emin}.0{ti.suffix})) k = {ti.emin}.0{ti.suffix};
    if (k > {ti.emax}.0{ti.suffix}) k = {ti.emax}.0{ti.suffix};
    {U} b = ({U})(({S})k + {ti.bias}) << {ti.mbits};
    {T} r; memcpy(&r, &b, {sz}); return r;
}}
static inline {T} presk_exponent_{n}({T} x) {{
    {U} b; memcpy(&b, &x, {sz});
    return ({T})(({S})((b >> {ti.mbits}) & {2 * ti.bias + 1}u) - {ti.bias});
}}
static inline {T} presk_mantissa_{n}({T} x) {{
    {U} b; memcpy(&b, &x, {sz});
    b = (b & ((({U})1 << {ti.mbits}) - 1)) | (({U}){ti.bias} << {ti.mbits});
    {T} r; memcpy(&r, &b, {sz}); return r;
}}
#endif
"""


def _c_literal(text: str, ti: TypeInfo) -> str:
    if text == "inf":
        return f"(({ti.c_type})INFINITY)"
    if text == "-inf":
        return f"(-({ti.c_type})INFINITY)"
    if text == "nan":
        return f"(({ti.c_type})NAN)"
    return f"{float.fromhex(text).hex()}{ti.suffix}"


def to_c(fn: str | Program, ty: str) -> str:
    """C99 source of `<T> presk_<fn>_<ty>(<T> x)` (`(<T> x, <T> y)` for pow; external linkage), with its helpers (guarded, so
    several outputs concatenate). Compile with -ffp-contract=off and without fast-math."""
    p = fn if isinstance(fn, Program) else program(fn, ty)
    ti = TI[p.ty]
    T = ti.c_type
    names = ["x", "y"][:p.arity]
    params = ", ".join(f"{T} {n}" for n in names)
    lines = ["#include <math.h>", "#include <stdint.h>", "#include <string.h>",
             _c_helpers(ti), f"{T} presk_{p.name}_{p.ty}({params});",
             f"{T} presk_{p.name}_{p.ty}({params}) {{"]
    n_arg = 0
    for i, ins in enumerate(p.instrs):
        a = [f"v{j}" for j in ins.args]
        op = ins.op
        if op == "arg":
            e = names[n_arg]
            n_arg += 1
        elif op == "const":
            e = _c_literal(ins.const, ti)
        elif op in BINARY:
            e = f"{a[0]} {BINARY[op]} {a[1]}"
        elif op == "neg":
            e = f"-{a[0]}"
        elif op == "abs":
            e = f"{'fabsf' if ti.name == 'f32' else 'fabs'}({a[0]})"
        elif op == "select":
            e = f"{a[0]} ? {a[1]} : {a[2]}"
        else:
            e = f"presk_{op}_{ti.name}({a[0]})"
        decl = "int" if op in BOOL_OPS else T
        lines.append(f"    const {decl} v{i} = {e};")
    lines.append(f"    return v{p.result};")
    lines.append("}")
    return "\n".join(lines) + "\n"
