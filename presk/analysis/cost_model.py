"""The layout cost model: a launch of a PSK-Kernel nest at a point of its layout space,
priced in seconds by a machine profile's constants (presk/analysis/profile.py).

A prediction has seven terms, each a count read from the nest times a fitted constant:

* λ — launching the kernel (one per launch);
* spawn — starting and joining the threads of a split launch (one per split launch);
* work — its arithmetic: ops computed in f64 and in f32, and math-library calls, each at
  its type's rate, and the steps of its sums (a loop carrying a sum over more than
  UNROLLED iterations: priced at a step's fitted cost, `_dependent_steps`), and for a
  contraction each output computed alone (as written, or outside its tiles: its sum
  started, finished and stored by itself);
* loads — its loads and stores, by storage type (a bf16 load widens, a store rounds),
  a register tile's apart (its broadcasts and vectors, and its accumulators' loads and
  stores when R·v + v + 1 vectors do not fit the machine's registers), and the loads
  that each need a cache line of their own from past L1 (the innermost loop steps them
  a line or more apart: a contraction as written walking down a column of its other
  operand, a transposed read) — `lines`;
* L2, L3, mem — the bytes it moves from the level that holds them: its buffers once (from
  the level the call's whole working set fits in — what else the call touches evicts
  them between launches —; nothing when it fits in L1) and, for a contraction, the
  other operand re-read for every row of tiles (and the first for every column), from
  the level that operand fits in.

A register tile [R, C] (tile_contraction.py) runs the main part of the outputs — R rows ×
C columns at a time, C in vectors of the machine's width — with 2R·v vector instructions
(priced apart from element-wise ops, which LLVM vectorizes itself: `tile_ops`) and R + v
loads per tile and k step (v = the vectors C lanes take) in place of 2RC scalar ops and
2RC loads; the rows past R·⌊I/R⌋ as one tile of fewer rows, the columns past C·⌊J/C⌋ as
written.
A split over n workers (the worker pool, presk/runtime/presk_pool.c: the caller runs
part 0 and takes any part no worker has yet) costs a spawn — publishing the launch and
waiting for its parts — and divides the launch's work, loads and L2 traffic by
1 + e·(n − 1) and its L3 and memory traffic by 1 + e·s·(n − 1) (s: the share of a
worker's bandwidth a further worker adds, the levels past L2 being shared). What a
further worker adds depends on the work each part holds: a worker that must wake, or find
a free core, takes a part only if the caller has not run it first, so
e = e_max · w / (w + w½), w the launch's unsplit time (its work, loads and traffic) over
its n parts, w½ the work per part at which half of e_max is had (`split_parts`,
`split_terms`). The calibration times split points in wall time and fits e_max, w½, s
and the spawn on them (presk/pipeline/profile.py).

The terms combine by a p-norm, (Σ tᵢᵖ)^(1/p): p = 1 adds them (nothing overlaps), a
larger p lets the largest hide the others (a roofline is p → ∞). "Bound by" names the
largest term. The constants are fitted by `presk profile calibrate`
(presk/pipeline/profile.py `fit_model`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from presk.dialects import kernel as K
from presk.transforms.plan_layout import Point, contraction_sides, is_contraction

from .profile import Machine, Model

TERMS = ("λ", "spawn", "work", "loads", "L2", "L3", "mem")

# The columns of the feature matrix, each multiplied by one fitted constant; TERM_OF says
# which term each feeds.
FEATURES = ("launch", "spawn", "arith_f64", "arith_f32", "math_f64", "math_f32",
            "steps", "load_f64", "load_f32", "load_bf16", "tile_loads", "scalar_outputs",
            "bytes_l2", "bytes_l3", "bytes_mem", "lines", "tile_ops", "chain", "blocked",
            "spills", "math_ops_f64", "math_ops_f32", "panel_spills", "copied",
            "swept_copy")
TERM_OF = (0, 1, 2, 2, 2, 2, 2, 3, 3, 3, 3, 2, 4, 5, 6, 3, 2, 2, 2, 3, 2, 2, 2, 3, 3)

UNROLLED = 16
"""A loop carrying a sum over at most this many iterations is unrolled whole by LLVM, so
its adds join the surrounding parallel loop's work; a longer one is a chain of dependent
steps, each waiting for the last (`steps`, priced at an add's latency)."""

INSTRUCTIONS = ("sqrt", "abs", "heaviside")
"""Math functions the lowering emits as exact instructions (the LLVM intrinsics sqrt and
fabs; heaviside as selects), not a math-library call: priced as arithmetic."""

_ARITH = (K.AddOp, K.SubOp, K.MulOp, K.DivOp, K.NegOp, K.MinOp, K.MaxOp, K.CastOp, K.FmaOp)


@dataclass(frozen=True)
class Counts:
    """What one launch of a nest as written executes, and the bytes of its buffers."""

    arith: dict[str, float]  # compute type → ops
    math: dict[str, float]
    steps: float  # iterations of carried loops longer than UNROLLED (dependent steps)
    loads: dict[str, float]  # storage type → loads and stores
    buffer_bytes: tuple[int, ...]  # each argument's bytes
    sides: tuple[int, int, int] | None  # a contraction's (I, J, K)
    outer: int  # the outermost loop's trip (what a split divides)
    strided: tuple[float, ...] = ()  # each argument's accesses a cache line apart
    chain: float = 0.0  # steps of carried loops in order (not blocked) longer than UNROLLED
    blocked: float = 0.0  # a blocked sum's runs × its partials (their start and tree)
    math_ops: dict[str, float] | None = None  # compute type → math calls' program ops
    # a tiled launch's bytes copied into memory it allocates: (unpanelled: the operands
    # read along j where j is not their last axis, copied j-last; panelled; panelled with
    # k swept in blocks of KBLOCK, a j-last j operand read in place)
    copied: tuple[float, float, float] = (0.0, 0.0, 0.0)


def _type(t) -> str:
    return K.type_name(t)


def _line_apart(op, innermost, line: int) -> bool:
    """Whether consecutive iterations of the innermost loop make `op` access elements a
    cache line or more apart (its induction indexes an axis that is not the last, or
    whose stride is a line): each access then moves a whole line."""
    if innermost is None:
        return False
    t = op.buffer.type
    esize = _bytes(t.element)
    for axis, index in enumerate(op.indices):
        if index is innermost:
            return math.prod(t.shape[axis + 1:]) * esize >= line
    return False


def _dependent_steps(loop: K.ForOp) -> float:
    # (the steps of a sum in order — no partials — are counted apart: `chain`)
    """The steps of `loop` priced at an add's latency: none for a parallel loop; for a
    loop carrying a sum, its trip — unless it is at most UNROLLED, then none (LLVM
    unrolls it into the surrounding loop's work). A blocked sum (presk/summation.py)
    counts its trip too: pricing it as ⌈trip / P⌉ chained adds and log₂ P tree levels
    fitted this machine's calibration worse (held-out u 0.118–0.131 against 0.089, the
    same samples), the constant absorbing what the blocked loop's vectors cost."""
    if not loop.inits:
        return 0.0
    return float(loop.trip) if loop.trip > UNROLLED else 0.0


def _walk(block, times: float, c: dict, innermost=None) -> None:
    for op in block.ops:
        if isinstance(op, K.ForOp):
            c["chain" if op.width is None else "steps"] += times * _dependent_steps(op)
            if op.width is not None:
                c["blocked"] += times * op.width
            _walk(op.body.block, times * op.trip, c, op.induction)
        elif isinstance(op, _ARITH):
            c["arith"][_type(op.results[0].type)] += times
        elif isinstance(op, K.MathOp) and op.fn.data in INSTRUCTIONS:
            c["arith"][_type(op.results[0].type)] += times
        elif isinstance(op, K.MathOp):
            c["math"][_type(op.results[0].type)] += times
            c["math_ops"][_type(op.results[0].type)] += times * math_ops(op.fn.data,
                                                                         _type(op.results[0].type))
        elif isinstance(op, (K.LoadOp, K.StoreOp)):
            c["loads"][_type(op.buffer.type.element)] += times
            if _line_apart(op, innermost, c["line"]):
                c["strided"][op.buffer.index] += times


def math_ops(fn: str, ty: str) -> int:
    """The operations of math function `fn`'s program in `ty` (presk/emit/mathlib.py:
    its arguments and constants left out) — what a call computes, which differs by the
    function (tanh's program is twice exp's)."""
    from presk.emit import mathlib
    try:
        program = mathlib.program(fn, ty if ty in ("f32", "f64") else "f32")
    except (KeyError, ValueError):
        return 0
    return sum(1 for i in program.instrs if i.op not in ("arg", "const"))


def _bytes(element) -> int:
    return {"bf16": 2, "f32": 4}.get(_type(element), 8)


def count(kernel: K.KernelOp, line: int = 64) -> Counts:
    """The counts of one launch of `kernel` as written (`line`: the cache line)."""
    c = {"arith": {"f64": 0.0, "f32": 0.0}, "math": {"f64": 0.0, "f32": 0.0},
         "loads": {"f64": 0.0, "f32": 0.0, "bf16": 0.0}, "steps": 0.0,
         "chain": 0.0, "blocked": 0.0, "math_ops": {"f64": 0.0, "f32": 0.0}, "strided": [0.0] * len(kernel.arg_types), "line": line}
    _walk(kernel.body.block, 1.0, c)
    sizes = [t.size * _bytes(t.element) for t in kernel.arg_types]  # type: ignore[attr-defined]
    sides = None
    if is_contraction(kernel) and (ij := contraction_sides(kernel)) is not None:
        outputs = math.prod(kernel.arg_types[-1].shape)  # type: ignore[attr-defined]
        macs = c["arith"]["f64"] + c["arith"]["f32"]
        sides = (ij[0], ij[1], max(1, round(macs / 2 / max(outputs, 1))))
    loops = [op for op in kernel.body.block.ops if isinstance(op, K.ForOp)]
    outer = loops[0].trip if len(loops) == 1 and not loops[0].inits else 1
    return Counts(c["arith"], c["math"], c["steps"], c["loads"], tuple(sizes), sides, outer,
                  tuple(c["strided"]), c["chain"], c["blocked"], c["math_ops"],
                  _copied(kernel) if sides is not None else (0.0, 0.0, 0.0))


def _copied(kernel: K.KernelOp) -> tuple[float, float, float]:
    """The bytes a tiled launch of the contraction copies into memory it allocates
    (tile_contraction.py), unpanelled, panelled, and panelled with k in blocks of KBLOCK:
    the whole operands (the tiles' share of them is all but a remainder). Which operands
    does not depend on the tile."""
    from presk.kernel_abi.tiles import KBLOCK, find_nest, packed_loads, panel_loads
    nest = find_nest(kernel.body.block, K.LayoutAttr.tiled((1, 2), 2))
    if nest is None:
        return 0.0, 0.0, 0.0
    def size(ops) -> float:
        return float(sum(op.buffer.type.bytes for op in ops))
    def panelled(kblock: int) -> float:
        return size(packed_loads(nest, True, kblock)) + \
            size(op for op, _, _ in panel_loads(nest, kblock))
    return size(packed_loads(nest)), panelled(0), panelled(KBLOCK)


def _level(nbytes: float, machine: Machine) -> int:
    """0: fits in L1, 1: L2, 2: L3, 3: memory."""
    if nbytes <= machine.l1:
        return 0
    if nbytes <= machine.l2:
        return 1
    return 2 if nbytes <= machine.l3 else 3


def split_parts(counts: Counts, point: Point) -> int:
    """The parts a split at `point` runs in (1: not split): its workers, at most the
    outermost loop's trip (for a tiled nest, its rows of tiles)."""
    if point.split <= 1:
        return 1
    parts = min(point.split, counts.outer)
    if point.tiled:
        parts = min(parts, math.ceil(counts.outer / point.tile[0]))
    return max(parts, 1)


def _k_blocks(counts: Counts, point: Point) -> tuple[int, float]:
    """(blocks, share of k a block holds) of a tiled contraction's k sweep: (1, 1.0)
    unless its layout sweeps k in blocks of `point.kblock` (tile_contraction.py)."""
    k = counts.sides[2] if counts.sides is not None else 0
    if not point.kblock or k <= point.kblock:
        return 1, 1.0
    return math.ceil(k / point.kblock), point.kblock / k


def reread_level(counts: Counts, point: Point, machine: Machine, reuse: float) -> int:
    """The level a tiled contraction's j operand is re-read from for every row of tiles.
    reuse 0 (a profile without the field, as the frozen one): the level that holds the
    operand alone. Otherwise the level whose `reuse` share holds what one row of tiles
    sweeps — the operand (under a k block, that block of it) and, beside it, the row's
    strip of the i operand and of the output: an operand that fills L2 alone (the
    scaled Tower's xᵀ·g, 2 MiB of f64 panels on a 2 MiB L2) is evicted by the strips
    streamed past it and comes from L3 on every row."""
    rhs = counts.buffer_bytes[1]
    if reuse <= 0:
        return _level(rhs, machine)
    _, share = _k_blocks(counts, point)
    i, j, k = counts.sides
    esize = 8 if counts.arith["f64"] else 4
    r = min(point.tile[0], i)
    swept = rhs * share + esize * r * (k * share + j)
    return _level(swept / reuse, machine)


def _block_reloads(counts: Counts, point: Point, r: int, cols: int, v: int,
                   reuse: float) -> float:
    """A k-blocked tile's extra vector loads and stores: between blocks each tile's R·v
    accumulators are stored to its output and loaded back (tile_contraction.py). Priced
    only by a profile that prices the re-read by its sweep (`reread_level`): without it,
    a k block is priced as its whole-k point (the frozen profile's prices)."""
    blocks, _ = _k_blocks(counts, point)
    if reuse <= 0 or blocks == 1:
        return 0.0
    i, j, _ = counts.sides
    return (i // r) * (j // cols) * 2 * r * v * (blocks - 1)


def features(counts: Counts, point: Point, machine: Machine, resident: int = 0,
             width: int = 0, reuse: float = 0.0) -> np.ndarray:
    """The feature row of one launch at `point` (FEATURES) as if one worker ran all of it
    (a split's spawn is its column `spawn`; `split_terms` divides the rest among its
    parts). `resident`: the bytes a call of the program touches — a nest's buffers come
    from the level that holds them all (in a calibration, where a nest runs alone, its
    own). `width`: the bytes of a vector a register tile's instructions run at full rate
    (0: the machine's registers'). `reuse`: the profile's share of a cache a re-read
    operand's sweep may fill (`reread_level`; 0: the operand alone)."""
    x = np.zeros(len(FEATURES))
    arith, loads, maths = dict(counts.arith), dict(counts.loads), dict(counts.math)
    steps, tile_loads, scalar_outputs, tile_ops = counts.steps, 0.0, 0.0, 0.0
    chain, spills = counts.chain, 0.0
    if point.tiled and counts.sides is not None:
        i, j, _ = counts.sides
        r, cols = min(point.tile[0], i), min(point.tile[1], j)
        # every row runs in tiles — the rows past the last full tile as one of fewer
        # rows (`rest`) —, the columns past the last full tile as written
        main = cols * (j // cols) / j
        full, rest = r * (i // r) / i, i % r
        per_tile = full / r + (1 - full) / max(rest, 1)  # tiles a row's outputs share
        esize = 8 if arith["f64"] else 4
        v = math.ceil(cols * esize / (width or machine.vector_bytes))
        # the tiles' 2R·v vector instructions a k step, each a whole vector's work
        tile_ops = (arith["f64"] + arith["f32"]) * main * v / cols
        # a tile's loads (R broadcasts and v vectors a k step) are priced apart from a
        # nest's as written, which stream through vectors LLVM makes itself
        tile_loads = sum(loads.values()) * main * (1 + v * per_tile) / (2 * cols)
        tile_loads += _block_reloads(counts, point, r, cols, v, reuse)
        held = math.ceil(cols * esize / machine.vector_bytes)  # registers a row takes
        if r * held + held + 1 > machine.vector_registers:
            # R rows of accumulators, a loaded row and a broadcast do not fit the
            # registers (counted at their own width, not the width they run at full
            # rate): the accumulators spill, a load and a store each a k step
            macs = (arith["f64"] + arith["f32"]) / 2
            spills = 2 * r * held * macs * main * full / (r * cols)
        arith = {t: n * (1 - main) for t, n in arith.items()}
        scalar_outputs = i * j * (1 - main)
        loads = {t: n * (1 - main) for t, n in loads.items()}
        steps *= main * per_tile / cols + (1 - main)  # a tile's R·C sums step together
        chain *= main * per_tile / cols + (1 - main)
    elif counts.sides is not None:
        # a contraction as written: one output at a time, its k loop's loads priced in
        # the output's cost (the fit finds them no separate rate)
        scalar_outputs = counts.sides[0] * counts.sides[1]
        loads = {t: 0.0 for t in loads}
    x[0] = 1.0
    x[1] = 1.0 if split_parts(counts, point) > 1 else 0.0
    x[2], x[3] = arith["f64"], arith["f32"]
    x[4], x[5] = maths["f64"], maths["f32"]
    x[6] = steps
    x[7], x[8], x[9] = loads["f64"], loads["f32"], loads["bf16"]
    x[10], x[11] = tile_loads, scalar_outputs
    total = float(sum(counts.buffer_bytes))
    moved = [0.0, 0.0, 0.0, 0.0]
    moved[_level(max(total, resident), machine)] += total
    tiled = point.tiled and counts.sides is not None
    lines = 0.0
    if not tiled:
        # an access a line apart from the last waits for a line of its own from past L1
        # (a transposed read, a contraction's k walk down a column): priced apart from
        # streamed bytes, whose lines the prefetcher brings ahead
        lines = sum(n for nbytes, n in zip(counts.buffer_bytes, counts.strided)
                    if _level(nbytes, machine) > 0)
    if counts.sides is not None and len(counts.buffer_bytes) >= 3:
        i, j, _ = counts.sides
        r, cols = (min(point.tile[0], i), min(point.tile[1], j)) if tiled else (1, 1)
        lhs, rhs = counts.buffer_bytes[0], counts.buffer_bytes[1]
        if tiled:
            # a tile's k step reads C contiguous elements of a row of the other
            # operand: a whole line when they are fewer than a line's
            esize = 8 if counts.arith["f64"] else 4
            per_row = max(1.0, machine.cache_line / (cols * esize))
            moved[reread_level(counts, point, machine, reuse)] += \
                rhs * per_row * (math.ceil(i / r) - 1)
            walked = [n > 0 and _level(nbytes, machine) > 0 for nbytes, n in
                      zip(counts.buffer_bytes[:2], counts.strided[:2])]
            if point.panels:
                # the panels are copied once a launch — the j operand (unless k runs in
                # blocks and it is read in place), and the i operand when it is read
                # down its columns: a load and a store an element
                in_place = point.kblock and counts.copied[2] < counts.copied[1]
                packed = ((0 if in_place else rhs)
                          + (lhs if counts.strided[0] else 0)) / esize
                x[7 if esize == 8 else 8] += 2 * packed
            else:
                # unpacked, a tile's k step reads each operand walked down its columns
                # (as written) a row apart from the last: a line of its own from past L1
                lines = (i // r) * (j // cols) * counts.sides[2] * sum(walked)
        elif not any(counts.strided):
            moved[_level(rhs, machine)] += rhs * (i - 1)
        moved[_level(lhs, machine)] += lhs * (math.ceil(j / cols) - 1)
    x[12], x[13], x[14] = moved[1:]
    x[15], x[16] = lines, tile_ops
    x[17], x[18], x[19] = chain, counts.blocked, spills
    mops = counts.math_ops or {}
    x[20], x[21] = mops.get("f64", 0.0), mops.get("f32", 0.0)
    x[22] = spills if tiled and point.panels else 0.0
    # the copies' bytes, into memory the launch allocates (its first touch faults pages
    # in): besides their loads and stores, priced apart — on a 2 MiB-L2 Xeon the
    # residual stack's 64 × 64 xᵀ·g over k = 1024 ran 1.28× slower from panels (1 MiB
    # copied a launch) than unpacked, which their loads' price alone does not see
    x[23] = counts.copied[(2 if point.kblock else 1) if point.panels else 0] \
        if tiled else 0.0
    x[24] = _swept_copy(counts, point) if tiled else 0.0
    return x


def _swept_copy(counts: Counts, point: Point) -> float:
    """The bytes an unpanelled tiled launch sweeps from its j-last copy of a j operand
    read transposed (g·wᵀ's w), once per row of tiles: each k step a tile's C elements a
    whole row of the copy apart. Panels hold the same copy k step after k step, and an
    operand read in place (x·w's w) is priced by its re-reads: measured on the Xeon, the
    scaled Tower's g·wᵀ ran 17–25 % slower unpanelled than panelled at every tile, x·w
    7 % at most, where both copy w once."""
    if point.panels or counts.sides is None or not counts.copied[0]:
        return 0.0
    i = counts.sides[0]
    return counts.copied[0] * math.ceil(i / min(point.tile[0], i))


def constants(model: Model) -> np.ndarray:
    """The model's constants in FEATURES order (a bandwidth as seconds per byte)."""
    return np.array([model.launch, model.spawn, model.work["f64"], model.work["f32"],
                     model.math["f64"], model.math["f32"], model.step, model.loads["f64"],
                     model.loads["f32"], model.loads["bf16"], model.loads["tile"],
                     model.scalar_output,
                     1 / model.bandwidth["l2"], 1 / model.bandwidth["l3"],
                     1 / model.bandwidth["mem"], model.loads["line"], model.work["tile"],
                     model.step if model.chain is None else model.chain, model.blocked,
                     model.loads["tile"] if model.spill is None else model.spill,
                     model.math_op_f64, model.math_op_f32, model.panel_spill, model.copy,
                     model.swept_copy])


def terms(x: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The seven terms (TERMS) of feature rows `x` (…, FEATURES) under constants `theta`."""
    parts = x * theta
    out = np.zeros(parts.shape[:-1] + (len(TERMS),))
    for col, term in enumerate(TERM_OF):
        out[..., term] += parts[..., col]
    return out


def combine(t: np.ndarray, p: float) -> np.ndarray:
    """(Σ tᵢᵖ)^(1/p) over the last axis."""
    return np.sum(t ** p, axis=-1) ** (1 / p)


@dataclass(frozen=True)
class Split:
    """How a split divides a launch (the module docstring): `efficiency` e_max, `work`
    w½ in seconds a part (0: e_max at any size), `bandwidth` s."""

    efficiency: float
    work: float = 0.0
    bandwidth: float = 1.0

    @classmethod
    def of(cls, model: Model) -> Split:
        return cls(model.efficiency, model.split_work, model.split_bandwidth)


_COMPUTE = slice(TERMS.index("work"), TERMS.index("L2") + 1)
_SHARED = slice(TERMS.index("L3"), TERMS.index("mem") + 1)


def split_terms(t: np.ndarray, parts: np.ndarray, split: Split, p: float) -> np.ndarray:
    """Terms `t` (…, TERMS) of launches as one worker runs them, divided among their
    `parts` (…; 1: not split) as `split` says."""
    parts = np.asarray(parts, dtype=float)
    if not (parts > 1).any():
        return t
    out = np.array(t, dtype=float)
    w = combine(out[..., _COMPUTE.start:], p) / parts
    e = split.efficiency * (w / (w + split.work) if split.work > 0 else 1.0)
    further = (parts - 1) * e
    out[..., _COMPUTE] /= (1 + further)[..., None]
    out[..., _SHARED] /= (1 + split.bandwidth * further)[..., None]
    return out


def predict(x: np.ndarray, parts: np.ndarray, theta: np.ndarray, split: Split,
            p: float) -> tuple[np.ndarray, np.ndarray]:
    """Seconds a launch of feature rows `x` (…, FEATURES) split in `parts`, and their
    terms."""
    t = split_terms(terms(x, theta), parts, split, p)
    return combine(t, p), t


@dataclass(frozen=True)
class Priced:
    """A point and its prediction: seconds a launch, its terms, the largest's name."""

    point: Point
    seconds: float
    terms: tuple[float, ...]

    @property
    def bound_by(self) -> str:
        return TERMS[int(np.argmax(self.terms))]


def price(kernel: K.KernelOp, points: list[Point], machine: Machine,
          model: Model, resident: int = 0) -> list[Priced]:
    """Each point's prediction, cheapest first (ties: the earlier point of the space);
    `resident` as `features` takes it."""
    counts = count(kernel, machine.cache_line)
    rows = np.array([features(counts, p, machine, resident, model.tile_width, model.reuse)
                     for p in points])
    parts = np.array([split_parts(counts, p) for p in points])
    total, t = predict(rows, parts, constants(model), Split.of(model), model.p)
    order = sorted(range(len(points)), key=lambda i: (total[i], i))
    return [Priced(points[i], float(total[i]), tuple(float(v) for v in t[i])) for i in order]
