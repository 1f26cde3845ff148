"""`presk memory --symbolic`: a call's memory as polynomials in the entry's dims.

Every axis of a buffer is a linear form in the dims, so its bytes are a polynomial. The
entry is recorded on a grid of values per dim (the given value times 1, 2, 3, …), the
recordings' traces matched step for step and buffer for buffer (the same operations at
every point, or the count refuses), each buffer's bytes interpolated exactly (rationals,
Lagrange on the grid) and checked at a point off it; a grid one value wider per dim is
tried while the check fails, up to the buffers' rank. A step's live bytes are then the sum
of its live buffers' polynomials; the peak is the step whose polynomial no other's
dominates for dims ≥ 1 (p − q with each dim written 1 + y has no negative coefficient),
or, when that is not one step for every dim, the pieces.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from ..kernel_abi.lives import Trace

Monomial = tuple[int, ...]


@dataclass(frozen=True)
class Poly:
    """A polynomial with rational coefficients in `names`."""

    names: tuple[str, ...]
    terms: tuple[tuple[Monomial, Fraction], ...]  # sorted, no zero coefficient

    @staticmethod
    def of(names: Sequence[str], terms: dict[Monomial, Fraction]) -> Poly:
        return Poly(tuple(names), tuple(sorted((m, c) for m, c in terms.items() if c != 0)))

    @staticmethod
    def const(names: Sequence[str], c: int | Fraction) -> Poly:
        return Poly.of(names, {(0,) * len(names): Fraction(c)})

    def as_dict(self) -> dict[Monomial, Fraction]:
        return dict(self.terms)

    def __add__(self, other: Poly) -> Poly:
        d = self.as_dict()
        for m, c in other.terms:
            d[m] = d.get(m, Fraction(0)) + c
        return Poly.of(self.names, d)

    def __neg__(self) -> Poly:
        return Poly.of(self.names, {m: -c for m, c in self.terms})

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        d: dict[Monomial, Fraction] = {}
        for (m1, c1), (m2, c2) in itertools.product(self.terms, other.terms):
            m = tuple(a + b for a, b in zip(m1, m2))
            d[m] = d.get(m, Fraction(0)) + c1 * c2
        return Poly.of(self.names, d)

    def __call__(self, values: dict[str, int]) -> Fraction:
        x = [values[n] for n in self.names]
        total = Fraction(0)
        for m, c in self.terms:
            term = c
            for v, e in zip(x, m):
                term *= v ** e
            total += term
        return total

    def shifted(self) -> Poly:
        """The same polynomial in y = x − 1 per variable."""
        out = Poly.const(self.names, 0)
        for m, c in self.terms:
            term = Poly.const(self.names, c)
            for i, e in enumerate(m):
                one = [0] * len(self.names)
                one[i] = 1
                x = Poly.of(self.names, {tuple(one): Fraction(1),
                                         (0,) * len(self.names): Fraction(1)})
                for _ in range(e):
                    term = term * x
            out = out + term
        return out

    def at_least(self, other: Poly) -> bool:
        """self ≥ other for every value ≥ 1 of every variable (a sufficient test)."""
        return all(c >= 0 for _, c in (self - other).shifted().terms)

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for m, c in sorted(self.terms, key=lambda t: (-sum(t[0]), [-e for e in t[0]])):
            factors = [n if e == 1 else f"{n}{_superscript(e)}"
                       for n, e in zip(self.names, m) if e]
            mag = abs(c)
            num = str(mag) if mag.denominator == 1 else f"{mag.numerator}/{mag.denominator}"
            text = " · ".join(([num] if mag != 1 or not factors else []) + factors)
            parts.append(("- " if c < 0 else "+ ") + text)
        s = " ".join(parts)
        return s[2:] if s.startswith("+ ") else "-" + s[2:]


def _superscript(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def _lagrange(points: Sequence[int], j: int) -> list[Fraction]:
    """The coefficients (ascending) of the Lagrange basis polynomial of points[j]."""
    coeffs = [Fraction(1)]
    for k, p in enumerate(points):
        if k == j:
            continue
        scale = Fraction(1, points[j] - p)
        nxt = [Fraction(0)] * (len(coeffs) + 1)
        for i, c in enumerate(coeffs):
            nxt[i + 1] += c * scale
            nxt[i] -= c * p * scale
        coeffs = nxt
    return coeffs


def interpolate(names: Sequence[str], grid: Sequence[Sequence[int]],
                values: dict[tuple[int, ...], int]) -> Poly:
    """The polynomial of degree < len(grid[i]) in each variable through `values` at every
    point of the grid's product."""
    bases = [[_lagrange(g, j) for j in range(len(g))] for g in grid]
    d: dict[Monomial, Fraction] = {}
    for idx in itertools.product(*(range(len(g)) for g in grid)):
        v = values[tuple(g[i] for g, i in zip(grid, idx))]
        if v == 0:
            continue
        for m in itertools.product(*(range(len(g)) for g in grid)):
            c = Fraction(v)
            for var, (i, e) in enumerate(zip(idx, m)):
                c *= bases[var][i][e]
            if c:
                d[m] = d.get(m, Fraction(0)) + c
    return Poly.of(names, d)


class SymbolicError(Exception):
    """Recordings that do not line up (the operations differ between dims)."""


@dataclass
class Piece:
    step: int  # 0-based
    poly: Poly
    where: str  # `B ≤ 7`, or "" when it is the peak for every dim


@dataclass
class Symbolic:
    names: tuple[str, ...]
    grid: tuple[tuple[int, ...], ...]
    check: dict[str, int]
    buffers: list[Poly]  # per buffer of the trace
    inputs: Poly
    outputs: Poly
    parameters: Poly
    live: list[Poly]  # per step
    peak: list[Piece]  # one piece when one step is the peak for every dim
    trace: Trace  # at the given dims

    def peak_at(self, values: dict[str, int]) -> Fraction:
        return max(p.poly(values) for p in self.peak) if self.peak else Fraction(0)


def _signature(trace: Trace) -> list:
    return ([(s.op.name, s.site, sorted(s.reads), sorted(s.writes)) for s in trace.steps]
            + [(b.kind, b.name, b.element, b.intervals) for b in trace.buffers])


def symbolic(dims: dict[str, int], trace_at: Callable[[dict[str, int]], Trace]
             ) -> Symbolic:
    """The polynomials of the call `trace_at` records, at `dims`' grid."""
    names = tuple(dims)
    base = trace_at(dims)
    traces: dict[tuple[int, ...], Trace] = {tuple(dims[n] for n in names): base}
    rank = _rank(base)
    width = 3
    while True:
        grid = tuple(tuple(dims[n] * k for k in range(1, width + 1)) for n in names)
        check = {n: dims[n] * (width + 1) for n in names}
        points = list(itertools.product(*grid)) + [tuple(check[n] for n in names)]
        for p in points:
            if p not in traces:
                traces[p] = trace_at(dict(zip(names, p)))
                if _signature(traces[p]) != _signature(base):
                    raise SymbolicError(
                        "the recording at " + ", ".join(f"{n} = {v}" for n, v in zip(names, p))
                        + " has other operations than at the given dims")
        n_buf = len(base.buffers)
        polys = [interpolate(names, grid, {p: traces[p].buffers[i].bytes
                                           for p in itertools.product(*grid)})
                 for i in range(n_buf)]
        off = traces[tuple(check[n] for n in names)]
        if all(polys[i](check) == off.buffers[i].bytes for i in range(n_buf)):
            break
        if width > rank:
            raise SymbolicError("a buffer's bytes are no polynomial of degree ≤ its rank")
        width += 1
    return _assemble(names, grid, check, polys, base)


def _rank(trace: Trace) -> int:
    return max((b.alloc.result.type.rank for b in trace.buffers if b.alloc is not None),
               default=1)


def _assemble(names, grid, check, polys: list[Poly], trace: Trace) -> Symbolic:
    zero = Poly.const(names, 0)

    def total(pick) -> Poly:
        out = zero
        for p, b in zip(polys, trace.buffers):
            if pick(b):
                out = out + p
        return out

    diff: list[list[int]] = [[] for _ in range(len(trace.steps) + 1)]
    for i, b in enumerate(trace.buffers):
        if b.counted:
            for s, e in b.intervals:
                diff[s].append(i)
                diff[e + 1].append(~i)
    live: list[Poly] = []
    running = zero
    for step in range(len(trace.steps)):
        for i in diff[step]:
            running = running + polys[i] if i >= 0 else running - polys[~i]
        live.append(running)
    return Symbolic(names, grid, check, polys, total(lambda b: b.kind == "input"),
                    total(lambda b: b.kind == "output"),
                    total(lambda b: b.kind == "input" and b.name.startswith("θ.")),
                    live, peak_pieces(names, live), trace)


def peak_pieces(names: Sequence[str], live: list[Poly]) -> list[Piece]:
    """The steps whose live bytes no other step's dominate for dims ≥ 1 (the first step of
    each distinct polynomial); with one dim, each with the values where it is the largest."""
    first: dict[Poly, int] = {}
    for i, p in enumerate(live):
        first.setdefault(p, i)
    cands = list(first)
    top = [p for p in cands
           if not any(q != p and q.at_least(p) for q in cands)]
    if len(top) == 1:
        return [Piece(first[top[0]], top[0], "")]
    if len(names) != 1:
        return [Piece(first[p], p, "") for p in sorted(top, key=lambda p: first[p])]
    return _pieces_1d(names[0], top, first)


def _pieces_1d(name: str, top: list[Poly], first: dict[Poly, int]) -> list[Piece]:
    """Which polynomial is the largest at each value ≥ 1, as runs of values: beyond a
    bound on every difference's roots the order no longer changes."""
    bound = 2
    for p, q in itertools.combinations(top, 2):
        d = (p - q).as_dict()
        deg = max(m[0] for m in d)
        lead = abs(d[(deg,)])
        bound = max(bound, 2 + int(max((abs(c) / lead for m, c in d.items()), default=0)))
    runs: list[tuple[Poly, int, int]] = []
    for v in range(1, bound + 1):
        best = max(top, key=lambda p: (p({name: v}), -first[p]))
        if runs and runs[-1][0] == best:
            runs[-1] = (best, runs[-1][1], v)
        else:
            runs.append((best, v, v))
    pieces = []
    for k, (p, lo, hi) in enumerate(runs):
        last = k == len(runs) - 1
        where = (f"{name} ≥ {lo}" if last else
                 f"{name} = {lo}" if lo == hi else f"{lo} ≤ {name} ≤ {hi}")
        pieces.append(Piece(first[p], p, where))
    return pieces
