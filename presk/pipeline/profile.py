"""`presk profile calibrate`: measure this machine and fit the layout cost model.

The calibration's nests are Presk's own: three small programs (`CALIBRATION`: a
contraction with an element-wise group and a row reduction, an element-wise group of
arithmetic, a math function over a tensor) recorded at a grid of sizes, in f64 and in f32,
converted to PSK-Kernel like any program; and `cal` at the scaled Tower's size, its
forward product past MAX_MACS·4 (LARGE_PRODUCTS) and its gradient's products with a
transposed operand (xᵀ·g, g·wᵀ: GRAD_SIZES). Each distinct nest is taken at points of its
layout space (every split; for a contraction, tiles across the space) and timed natively
(presk/runtime/kernel_timing.py, all in one compiled module, the minimum of samples).

The fit (`fit_model`): the constants are non-negative, and each point's prediction
should be close *relative* to its time — the times span five decades and u is a relative
error — so the rows of the feature matrix are divided by the measured times and the
constants found by non-negative least squares (Lawson–Hanson) against a column of ones,
which minimizes Σ ((predicted − measured) / measured)². Then p of the p-norm is chosen on
a grid, each p's constants refitted from there by projected Gauss–Newton on the same
relative residuals; the p with the smallest median relative error on the fitted points is
kept. A share of the points (a quarter, drawn with a fixed seed) is held out of the fit:
u (median and 90th percentile of |predicted − measured| / measured) and Spearman's ρ
are computed on them only.

A bandwidth the calibration has no point for (this machine's L3 may be larger than any
nest it times) gets the next faster level's, and the profile's `fit` says so.
"""

from __future__ import annotations

import math
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..analysis.profile import Machine, Model, Profile, load_profile, read_machine
from .errors import InvalidInput

CALIBRATION = """\
dim N
dim M

fn cal(x : ℝ[batch: N, model: M], y : ℝ[batch: N, model: M], w : ℝ[M, M]) -> ℝ[] =
  let a = x · w
  let b = tanh(y)
  let c = x * y + a
  let s = sum(axis model, b * c)
  mean(s)

fn ew(x : ℝ[batch: N, model: M], y : ℝ[batch: N, model: M]) -> ℝ[batch: N, model: M] =
  x * y + x - y * y

fn ex(x : ℝ[batch: N, model: M]) -> ℝ[batch: N, model: M] =
  exp(x)
"""

FULL_SIZES = [(4, 4), (16, 64), (64, 16), (64, 256), (1024, 16), (1024, 64), (256, 128),
              (256, 256), (1024, 128), (512, 512), (1024, 1024)]
QUICK_SIZES = [(32, 16), (512, 64), (1024, 1024)]
"""(N, M): (256, 256) and (1024, 128) are contractions of 16.7M multiply-adds whose
operands and output (0.5-1 MiB each in f64) pass a 512 KiB L2 together — a register
tile's re-reads of the other operand then come from past L2, as the scaled Tower's
1024 × 256 · 256 × 256 do (its tiles ran 2.7× slower a multiply-add than the same
product at 64 rows, all in L2); the last sizes' element-wise nests (3 buffers of N·M elements: 6 and 24 MiB
in f64) outgrow a 2 MiB L2; `large_sizes` adds sizes past the machine's own L2 and L3
when those are larger."""
GRAD_SIZES = [(1024, 256)]
"""(N, M) at which `cal`'s gradient's products are timed (not with --quick): xᵀ·g
([M, M] over k = N: both operands read down their columns) and g·wᵀ (w read
transposed), which no forward nest has; at the scaled Tower's sizes — xᵀ·g's j operand
is 2 MiB in f64, the size of a 2 MiB L2 (cost_model.py `reread_level`)."""
LARGE_PRODUCTS = [(1024, 256)]
"""(N, M) at which `cal`'s forward product is also timed past MAX_MACS·4 (not with
--quick; 67M multiply-adds, the scaled Tower's): its tiles' re-reads pass a 512 KiB L2
where the 16.7M ones' do not. These and GRAD_SIZES' products are timed in f64 only and
at their tiles only (as written a launch takes 0.1-0.25 s): every timed point is
compiled, and compiling is most of the calibration's two minutes."""
CLOCK = time.thread_time  # what a point costs when nothing preempts it
SPLIT_CLOCK = time.perf_counter
"""A split point's clock: its parts run on the pool's workers too, and the calling
thread sleeps while they finish — wall time is what a split saves (or loses)."""
ROUNDS = 5
"""Interleaved passes over the points (presk/runtime/kernel_timing.py). Two runs at load
5-7 give the same point's time within 4.5 % (median) at 5 rounds, 8.6 % at 3 (load 3-5):
a burst of other work spoils a pass, and more passes give the minimum more chances; the
timing takes ~30 s against ~25 s."""
MAX_MACS = 1 << 22  # a contraction of more multiply-adds is not timed at every point
P_GRID = (1.0, 1.05, 1.1, 1.2, 1.35, 1.5, 2.0)
REUSE_GRID = (0.0, 1.0, 0.75, 0.5)
"""The shares of a cache a contraction's re-read operand and its strips may fill
(cost_model.py `reread_level`; 0: the operand alone, by the level's size)."""
EFFICIENCY_GRID = tuple(i / 10 for i in range(11))
SPLIT_WORK_GRID = (0.0, 0.5e-6, 2e-6, 8e-6, 32e-6)
BANDWIDTH_GRID = (0.0, 0.5, 1.0)


@dataclass(frozen=True)
class Sample:
    """One timed point: its kernel's description and counts, the point, the time."""

    nest: str
    counts: object  # presk.analysis.cost_model.Counts
    point: object  # presk.transforms.plan_layout.Point
    seconds: float  # a launch: the host's call over its launches (the call's overhead in)
    repeats: int = 1  # launches in the timed call


# --------------------------------------------------------------------------------------
# The nests
# --------------------------------------------------------------------------------------


def _all_f32(realize_module) -> str:
    """The realization that stores every value of the entry in f32."""
    import json
    sites = sorted({op.attributes["site"].data for op in realize_module.walk()
                    if "site" in op.attributes and op.results})
    return json.dumps({"format": "presk-realization/1", "sites": {s: "f32" for s in sites}})


def _recordings(quick: bool) -> list[tuple[str, int, int, bool, bool]]:
    """(entry, N, M, gradient, also in f32) of every recording the calibration takes its
    nests from."""
    out = [(entry, n, m, False, True) for n, m in (QUICK_SIZES if quick else FULL_SIZES)
           for entry in ("cal", "ew", "ex")
           if entry != "cal" or n * m * m <= MAX_MACS * 4]
    if quick:
        return out
    return out + [("cal", n, m, False, False) for n, m in LARGE_PRODUCTS] + \
        [("cal", n, m, True, False) for n, m in GRAD_SIZES]


def calibration_kernels(quick: bool) -> list:
    """The distinct kernels of the calibration programs at every size and type (of a
    gradient's recording, only its products with a transposed operand, `contract…`)."""
    from ..dialects import kernel as K
    from .load import load_core
    from .record import kernel_pipeline
    with tempfile.TemporaryDirectory(prefix="presk-calibrate-") as d:
        path = os.path.join(d, "calibration.psk")
        Path(path).write_text(CALIBRATION, encoding="utf-8")
        core, _ = load_core(path)
    seen: dict[str, object] = {}
    for entry, n, m, grad, f32 in _recordings(quick):
        pipe = kernel_pipeline(core, entry, {"N": n, "M": m}, grad=grad)
        for real in (None, _all_f32(pipe.realize)) if f32 else (None,):
            if real is not None:
                pipe = kernel_pipeline(core, entry, {"N": n, "M": m}, real, grad=grad)
            for k in pipe.kernel.ops:
                if isinstance(k, K.KernelOp) and (not grad or
                                                  k.title.data.startswith("contract")):
                    key = str(k.clone()).replace(k.sym_name.data, "k", 1)
                    seen.setdefault(key, k)
    return list(seen.values())


TILES = {(), (2, 4), (4, 4), (4, 16), (8, 8), (8, 16), (8, 32)}
QUICK_TILES = {(), (4, 8), (8, 16)}
SPLIT_TILES = {(), (4, 16), (8, 16)}
"""The tiles a contraction is timed at (each timed point is compiled, and compiling is
most of the calibration's time): a few across the space's rows and columns, and the
default layout's [8, 16] and [8, 32] (presk/conversion/realize_to_kernel/nests.py
`default_layout`), panels or not; split at fewer of them (a split's price is what it
divides, whatever the tile)."""
LARGE_TILES = {(4, 16), (8, 16), (8, 32)}
"""The tiles a product past MAX_MACS·4 is timed at: those the space offers panels (and
k blocks) at, whose re-reads `reuse` prices — not as written (0.1-0.25 s a launch), nor
the small tiles (5-8 ms a launch at the scaled Tower's size)."""


def calibration_points(kernel, workers: int, quick: bool) -> list:
    """The points a kernel is timed at: its space, a contraction's tiles thinned to
    TILES (QUICK_TILES with `quick`), its splits to SPLIT_TILES."""
    from ..analysis.cost_model import count
    from ..transforms.plan_layout import layout_space
    space = layout_space(kernel, workers)
    if quick and math.prod(kernel.arg_types[-1].shape) < 4096:
        space = [p for p in space if p.split == 1]  # the larger size prices a split
    sides = count(kernel).sides
    if sides is None:
        return space
    keep = QUICK_TILES if quick else TILES
    if math.prod(sides) > MAX_MACS * 4:
        keep = LARGE_TILES
    return [p for p in space if p.tile in keep and (p.split == 1 or p.tile in SPLIT_TILES)]


def time_points(kernels: list, repeats: list[int], progress=None,
                cache: bool = True) -> list:
    """The kernels timed as the calibration times its points (presk/runtime/
    kernel_timing.py: CLOCK — SPLIT_CLOCK for a split kernel —, ROUNDS interleaved rounds
    of two samples, the minimum), so that a prediction is set beside the quantity the
    model was fitted to."""
    from ..runtime.kernel_timing import time_kernels
    from ..transforms.kernel_split import split_of
    clocks = [SPLIT_CLOCK if split_of(k) > 1 else CLOCK for k in kernels]
    return time_kernels(kernels, repeats, ROUNDS * 2, cache=cache, rounds=ROUNDS,
                        clock=clocks, base_clock=CLOCK, progress=progress)


def _repeats(seconds_guess: float) -> int:
    """Launches per timed call: enough that a call is ~20 µs (at most 32)."""
    return int(min(32, max(1, 20e-6 / max(seconds_guess, 1e-9))))


def measure(quick: bool, machine: Machine, progress: Callable[[str, int, int], None]
            | None = None, cache: bool = True) -> list[Sample]:
    """Time every calibration point on this machine."""
    from ..analysis.cost_model import count, features
    kernels = calibration_kernels(quick)
    variants, rows, names, keys = [], [], [], []
    for k in kernels:
        c = count(k, machine.cache_line)
        for point in calibration_points(k, machine.workers, quick):
            v = k.clone()
            v.layout = point.attr()
            variants.append(v)
            x = features(c, point, machine)
            rows.append(x)
            names.append(f"{k.title.data} {[list(t.shape) for t in k.arg_types]}")
            keys.append((c, point))
    # a first guess of each time: 1 ns an op or load, 10 ns a math call
    guess = [float(x[2:4].sum() + x[7:12].sum()) * 1e-9 + float(x[4:6].sum()) * 1e-8
             + float(x[6]) * 2e-9 for x in rows]
    if progress:
        progress("compiling", 0, len(variants))
    times = time_points(variants, [_repeats(g) for g in guess],
                        (lambda i: progress("timing", i + 1, len(variants)))
                        if progress else None, cache)
    return [Sample(n, c, p, t.call / t.repeats, t.repeats)
            for n, (c, p), t in zip(names, keys, times)]


# --------------------------------------------------------------------------------------
# The fit
# --------------------------------------------------------------------------------------


def nnls(a: np.ndarray, b: np.ndarray, iterations: int = 500) -> np.ndarray:
    """argmin ‖a·x − b‖₂ over x ≥ 0 (Lawson–Hanson's active set), on columns scaled to
    unit norm: the features' scales span twenty decades, and unscaled, a column that
    should enter could come back from lstsq at exactly 0 — then Lawson–Hanson's step
    is 0 / 0, and which machine that happens on depends on its BLAS kernels."""
    m, n = a.shape
    norm = np.linalg.norm(a, axis=0)
    norm[norm == 0] = 1.0
    a = a / norm
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)
    refused = np.zeros(n, dtype=bool)    # entered, and lstsq would not give them weight
    w = a.T @ (b - a @ x)
    for _ in range(iterations):
        free = ~passive & ~refused
        if not free.any() or w[free].max() <= 1e-12 * max(1.0, abs(w).max()):
            break
        j = int(np.argmax(np.where(free, w, -np.inf)))
        passive[j] = True
        z = _passive_solution(a, b, passive)
        if z[j] <= 0:                   # in exact arithmetic w_j > 0 makes z_j > 0
            passive[j], refused[j] = False, True
            continue
        while not (z[passive] > 0).all():
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-300
            x[~passive] = 0.0
            z = _passive_solution(a, b, passive)
        x = z
        refused[:] = False
        w = a.T @ (b - a @ x)
    return x / norm


def _passive_solution(a: np.ndarray, b: np.ndarray, passive: np.ndarray) -> np.ndarray:
    z = np.zeros(a.shape[1])
    z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
    return z


def _predict(x: np.ndarray, theta: np.ndarray, p: float, parts: np.ndarray | None = None,
             split=None) -> np.ndarray:
    """A timed call's seconds a launch: the model's launch (`x`'s features, all of
    `theta` but its last; split in `parts` as `split` says) and the call's overhead
    (`theta[-1]`) over its launches (the last column of `x`: 1 / launches)."""
    from ..analysis.cost_model import Split, predict
    parts = np.ones(len(x)) if parts is None else parts
    launch, _ = predict(x[:, :-1], parts, theta[:-1], split or Split(0.0), p)
    return launch + theta[-1] * x[:, -1]


def _refit(x: np.ndarray, y: np.ndarray, theta: np.ndarray, p: float,
           steps: int = 30) -> np.ndarray:
    """Projected Gauss–Newton on the relative residuals pred/y − 1 at this p."""
    from ..analysis.cost_model import TERM_OF, terms
    owner = np.array(TERM_OF)
    for _ in range(steps):
        t = terms(x[:, :-1], theta[:-1])
        launch = np.sum(t ** p, axis=1) ** (1 / p)
        safe_t = np.where(t > 0, t, 0.0)
        # ∂launch/∂θ_c = launch^(1−p) · t_term(c)^(p−1) · x_c; the overhead's is x_−1
        jac = np.empty_like(x)
        jac[:, :-1] = (launch[:, None] ** (1 - p)) * (safe_t[:, owner] ** (p - 1)) * x[:, :-1]
        jac[:, -1] = x[:, -1]
        jac[:, (x == 0).all(axis=0)] = 0.0
        r = (launch + theta[-1] * x[:, -1]) / y - 1
        j = jac / y[:, None]
        step = np.linalg.lstsq(j, -r, rcond=None)[0]
        best, best_cost = theta, float(np.sum(r ** 2))
        for scale in (1.0, 0.5, 0.25, 0.1):
            trial = np.maximum(theta + scale * step, 0.0)
            cost = float(np.sum((_predict(x, trial, p) / y - 1) ** 2))
            if cost < best_cost:
                best, best_cost = trial, cost
                break
        if best is theta:
            break
        theta = best
    return theta


def errors(pred: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(median, 90th percentile) of |pred − y| / y, and Spearman's ρ."""
    rel = np.abs(pred - y) / y
    return float(np.median(rel)), float(np.percentile(rel, 90)), spearman(pred, y)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ranks by order; ties are rare in timings)."""
    if len(a) < 2:
        return 1.0
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    c = np.corrcoef(ra, rb)[0, 1]
    return float(c) if math.isfinite(c) else 0.0


def held_out(n: int, seed: int = 0, share: float = 0.25) -> np.ndarray:
    """Which of n points are held out of the fit: a share, drawn with a fixed seed."""
    held = np.zeros(n, dtype=bool)
    held[np.random.default_rng(seed).permutation(n)[:max(1, round(share * n))]] = True
    return held


@dataclass(frozen=True)
class Fit:
    """Fitted constants (FEATURES' and the call's overhead last), p, the split, the
    tile's full-rate vector width, every sample's feature rows at them and its parts."""

    theta: np.ndarray
    p: float
    split: object  # presk.analysis.cost_model.Split
    width: int
    x: np.ndarray
    parts: np.ndarray
    reuse: float = 0.0  # cost_model.py `reread_level`

    def predict(self, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        return _predict(self.x[rows], self.theta, self.p, self.parts[rows], self.split)


def tile_widths(machine: Machine) -> tuple[int, ...]:
    """The vector widths a tile's instructions may run at full rate: the registers', or
    half (a core with one 512-bit FMA unit and two 256-bit ones issues the same work a
    cycle either way — not a fact sysfs or /proc/cpuinfo states, so the fit chooses)."""
    return tuple(sorted({machine.vector_bytes, max(16, machine.vector_bytes // 2)}))


def _median_error(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.median(np.abs(pred / y - 1))) if len(y) else 0.0


def fit_constants(samples: list[Sample], machine: Machine, fitted: np.ndarray) -> Fit:
    """The model fitted on the samples `fitted` marks. First the points run whole, by
    NNLS at p = 1 for each of the tile's widths: their constants give each split point
    its work a part w. Then every fitted point together, a split point's rows divided as
    the split (e_max, w½, s) on a grid divides them (`split_scale`), by NNLS at p = 1
    (the spawn among the constants); the best by median relative error, then p on a
    grid (projected Gauss–Newton) at it."""
    from ..analysis.cost_model import Split, features, split_parts
    y = np.array([s.seconds for s in samples])
    parts = np.array([split_parts(s.counts, s.point) for s in samples], dtype=float)
    whole = fitted & (parts == 1)

    def rows(width: int, reuse: float = 0.0) -> np.ndarray:
        """The features, and 1 / launches: the call's overhead's share of a launch."""
        return np.array([[*features(s.counts, s.point, machine, 0, width, reuse),
                          1 / s.repeats] for s in samples])

    def at_p1(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return nnls(x[mask] / y[mask, None], np.ones(int(mask.sum())))

    tries = [(w, rows(w)) for w in tile_widths(machine)]
    _, width, x = min(((_median_error(_predict(x[whole], at_p1(x, whole), 1.0), y[whole]),
                        w, x) for w, x in tries), key=lambda t: t[0])
    reuse, x = _fit_reuse(x, [(r, rows(width, r)) for r in REUSE_GRID if r > 0], y, whole,
                          at_p1)
    work = _part_work(x, at_p1(x, whole), parts)
    best = None
    for split in _split_grid(bool((fitted & (parts > 1)).any())):
        scaled = split_scale(x, parts, work, split)
        theta = at_p1(scaled, fitted)
        err = _median_error(_predict(scaled[fitted], theta, 1.0), y[fitted])
        if best is None or err < best[0] - 1e-12:
            best = (err, split, scaled, theta)
    _, split, scaled, theta0 = best
    best = None
    for p in P_GRID:
        theta = _refit(scaled[fitted], y[fitted], theta0.copy(), p) if p > 1 else theta0
        u_fit = _median_error(_predict(scaled[fitted], theta, p), y[fitted])
        if best is None or u_fit < best[0]:
            best = (u_fit, p, theta)
    _, p, theta = best
    return Fit(theta, p, split, width, x, parts, reuse)


def _fit_reuse(x0: np.ndarray, tries: list[tuple[float, np.ndarray]], y: np.ndarray,
               whole: np.ndarray, at_p1) -> tuple[float, np.ndarray]:
    """(reuse, its feature rows): the share of REUSE_GRID (`x0`: the rows at 0) whose
    NNLS fit of the whole points has the least sum of squared relative residuals — the
    fit's own objective, not the median: only the few products whose re-read operand
    sits near a cache's size move with it, and the median would not see them."""
    def cost(x: np.ndarray) -> float:
        return float(np.sum((_predict(x[whole], at_p1(x, whole), 1.0) / y[whole] - 1) ** 2))
    return min([(0.0, x0), *tries], key=lambda t: cost(t[1]))


def _split_grid(any_split: bool):
    from ..analysis.cost_model import Split
    if not any_split:
        yield Split(0.0)
        return
    for e in EFFICIENCY_GRID:
        for w in SPLIT_WORK_GRID if e > 0 else (0.0,):
            for s in BANDWIDTH_GRID if e > 0 else (1.0,):
                yield Split(e, w, s)


def _part_work(x: np.ndarray, theta: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Each row's work a part: its work, loads and traffic (p = 1) over its parts."""
    from ..analysis.cost_model import TERMS, terms
    t = terms(x[:, :-1], theta[:-1])
    return t[:, TERMS.index("work"):].sum(axis=1) / parts


def split_scale(x: np.ndarray, parts: np.ndarray, work: np.ndarray, split) -> np.ndarray:
    """Feature rows `x` (and their last column) with each split row's columns divided as
    `split` divides their terms, its work a part being `work` (cost_model.split_terms)."""
    from ..analysis.cost_model import TERM_OF, TERMS
    e = split.efficiency * (work / (work + split.work) if split.work > 0 else 1.0)
    further = np.where(parts > 1, (parts - 1) * e, 0.0)
    owner = np.array([*TERM_OF, -1])
    compute = (owner >= TERMS.index("work")) & (owner <= TERMS.index("L2"))
    shared = owner >= TERMS.index("L3")
    out = x.copy()
    out[:, compute] /= (1 + further)[:, None]
    out[:, shared] /= (1 + split.bandwidth * further)[:, None]
    return out


def fit_model(samples: list[Sample], machine: Machine, seed: int = 0,
              held_share: float = 0.25) -> Model:
    """The constants fitted on most samples, u and ρ on the rest (module docstring)."""
    usable = [s for s in samples if s.seconds > 0]
    y = np.array([s.seconds for s in usable])
    held = held_out(len(y), seed, held_share)
    f = fit_constants(usable, machine, ~held)
    theta, p, x = f.theta, f.p, f.x
    u, u90, rho = errors(f.predict(held), y[held])
    notes = []
    bw = {}
    for name, col, faster in (("l2", 12, None), ("l3", 13, "l2"), ("mem", 14, "l3")):
        if theta[col] > 0 and (x[:, col] > 0).any():
            bw[name] = 1 / theta[col]
            continue
        bw[name] = bw[faster] if faster else 1e12
        why = (f"no point's working set is past {'L2' if name == 'l3' else 'L3'}"
               f" ({_mib(machine.l2 if name == 'l3' else machine.l3)})"
               if not (x[:, col] > 0).any() else f"the fit found {name} traffic free")
        notes.append(f"{why}: {name} = " + (f"{faster}'s bandwidth" if faster
                                             else "1000 GB/s"))
    fit = ("NNLS on relative residuals (rows ÷ measured time) of the points run whole; "
           "the tile's vector width and p by grids, p's constants refitted by projected "
           "Gauss–Newton; then on the split points (timed in wall time) the split's "
           "efficiency, the work a part at half of it and the bandwidth's share by "
           "grids, the spawn by least squares; a point's time the calling thread's CPU "
           f"time, the minimum over {ROUNDS} interleaved rounds; the call's overhead "
           f"fitted apart ({theta[-1] * 1e9:.0f} ns a timed call)")
    if notes:
        fit += "; " + "; ".join(notes)
    return Model(launch=float(theta[0]), spawn=float(theta[1]),
                 work={"f64": float(theta[2]), "f32": float(theta[3]),
                       "tile": float(theta[16])},
                 math={"f64": float(theta[4]), "f32": float(theta[5])},
                 step=float(theta[6]),
                 loads={"f64": float(theta[7]), "f32": float(theta[8]),
                        "bf16": float(theta[9]), "tile": float(theta[10]),
                        "line": float(theta[15])},
                 scalar_output=float(theta[11]),
                 bandwidth=bw, efficiency=float(f.split.efficiency), tile_width=f.width,
                 p=float(p), u=u, u90=u90, rho=rho, points=len(y),
                 held_out=int(held.sum()), fit=fit, split_work=float(f.split.work),
                 split_bandwidth=float(f.split.bandwidth), chain=float(theta[17]),
                 blocked=float(theta[18]), spill=float(theta[19]),
                 math_op_f64=float(theta[20]), math_op_f32=float(theta[21]),
                 panel_spill=float(theta[22]), reuse=float(f.reuse),
                 copy=float(theta[23]), swept_copy=float(theta[24]))


def _mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB"


def calibrate(quick: bool, progress=None, cache: bool = True) -> tuple[Profile, float]:
    """This machine's profile, and the seconds the calibration took."""
    start = time.perf_counter()
    machine = read_machine()
    samples = measure(quick, machine, progress, cache)
    model = fit_model(samples, machine)
    took = time.perf_counter() - start
    made = {"quick": quick, "seconds": round(took, 1), "host": platform.node(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load": round(os.getloadavg()[0], 2)}
    return Profile(machine, model, made), took


# --------------------------------------------------------------------------------------
# The cached profile of this machine
# --------------------------------------------------------------------------------------


def cached_profile_path(machine: Machine | None = None) -> Path:
    """Where this CPU's calibrated profile is kept: <the cache>/profiles/<cpu>.json."""
    from ..runtime.cache import cache_dir
    machine = machine or read_machine()
    return cache_dir() / "profiles" / f"{machine.key()}.json"


def profile_for(spec: str | None) -> tuple[Profile, str]:
    """The profile `spec` names, else this machine's cached one; (profile, its name).
    InvalidInput, one line, when there is none."""
    from ..analysis.profile import ProfileError
    try:
        if spec:
            return load_profile(spec), spec.lstrip("@")
        path = cached_profile_path()
        if not path.exists():
            raise InvalidInput("presk: no profile of this machine: run `presk profile "
                               f"calibrate` (it is kept in {path}) or give --profile FILE")
        try:
            return load_profile(str(path)), str(path)
        except ProfileError as exc:
            raise ProfileError(f"{exc}: run `presk profile calibrate` to measure this "
                               "machine again") from None
    except ProfileError as exc:
        raise InvalidInput(str(exc) if str(exc).startswith("presk") else
                           f"presk: {exc}") from None
