"""Presk beside JAX jit, torch.compile and PyTorch eager: forward, value+gradient, AdamW step.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/peers.py [--quick] [--case tutorial|scaled|all]
                                    [--dtype f32|f64|all] [--threads N]
                                    [--peers eager,compile,jax] [--no-solve]
                                    [--step native|python]

The peers come from the `bench` extra (`pip install -e '.[bench]'`: jax for the CPU, torch
2.13.0 CPU); a peer that is not installed (or, for torch.compile, that cannot compile: no C
compiler) is named in the output and left out; Presk and PyTorch eager always run.

What is measured, per model and dtype, all on the same weights (presk's seeded ones,
`presk.analysis.entry`, exported once as numpy arrays and handed to every peer) and the same
batch:

- forward: the loss `mean((Tower(x) − y)²)`;
- value+gradient: the loss and its gradient with respect to every parameter;
- AdamW step: value+gradient, then torch.optim.AdamW's update (lr 1e-3, betas 0.9/0.999,
  eps 1e-8, weight decay 1e-2, constant schedule) of every parameter.

Implementations:

- Presk native (`presk.pipeline.run_native`, its inputs bound once). f64: the default
  realization (all-f64); f32: every site the entry reaches and every parameter f32 (bench/
  native.py `all_f32`); `solved … fused`: the realization `presk solve --fma --grad` finds
  under a budget of 1e-3 relative to the loss (solved at a small batch, the case's
  solve_batch, where the MPFR calibration takes seconds; its sites are shape-free, so it
  applies at the timed batch, and its error is measured there against PyTorch f64): the
  forward's types chosen by the solver, its contractions fused, the gradient's reverse
  sweep at f32 where the measured gradient stays within the budget per parameter tensor
  (presk/analysis/reverse_sweep.py), run under `--fuse-reductions` as `f32+fma fused` is;
  `f32 fused`: the f32 realization under `--fuse-reductions` (psk-inline, psk-fuse-reduce,
  the contractions' epilogues: the default f32's bits, fewer launches); `f32+fma`: the
  f32 realization with every contraction fused (its `fma` field, bench/native.py
  `with_fma`: llvm.fma, one rounding per multiply-add, docs/precision.md); `f32+fma
  fused`: the same realization under `--fuse-reductions` (the same bits as `f32+fma`,
  fewer launches). The AdamW step: the training step in one native
  call that `presk train` makes (presk/train/native_step.py), one step a call
  (`NativeStep.stepper()`'s builtin function, which returns the loss as a float): the batch
  gathered from a `.psk.d` file holding it (memory-mapped, read in file order), the value
  and gradient, the constant schedule and AdamW's update of the f64 master copies `presk
  train` keeps (under an f32 realization the step rounds them into the objective's f32
  buffers and widens its f32 gradient, in the same call); the step count goes on from
  call to call. `--step python`: as before it, `NativeObjective` (the value and gradient
  written straight into the optimizer's arrays, of the realization's parameter type) and
  `NativeAdamW`'s update driven from Python, the batch already in memory.
- PyTorch eager: the same Tower by hand (bench/native.py `torch_loss`), `torch.autograd.grad`
  for the gradient, `torch.optim.AdamW` (its default CPU path) for the step.
- torch.compile: `torch.compile(torch_loss)` (inductor, C++ on the CPU) for the forward and
  under autograd for the gradient (its backward compiled too); the step's update is
  torch.optim.AdamW's eager one (compiled, `torch.compile(opt.step)` keeps the step count
  as a float32 tensor, so its f64 bias corrections differ from eager's by 7e-6 relative).
- JAX jit: the same Tower in jax.numpy, `jax.jit` of the loss, of `jax.value_and_grad`, and
  of the whole step (value_and_grad and the AdamW update written as torch's, the state
  donated); float64 through `jax_enable_x64`.

Threads: `--threads N` (default: every CPU this process may use) pins the whole process to N
CPUs (`os.sched_setaffinity`, like `taskset`) before any peer is imported, so XLA's and
inductor's thread pools, torch's intra-op threads (`torch.set_num_threads(N)`) and Presk's
workers (the profile reads the affinity) all see N.

Before timing, every implementation's results are compared with PyTorch eager f64 on the
same weights and batch: the loss and every gradient (max |ours − torch f64| / max |torch f64|
per tensor, the largest printed); and its first AdamW step's update (new − old parameters)
with AdamW's formulas applied in f64 to its own gradient (a first step moves each element by
about lr·sign(g): where g is below f32's resolution any f32 implementation may move it the
other way, so its update is judged against its own gradient, the gradient against torch's). Bounds: 1e-10 in f64, 1e-3 in f32; the
solved realization's loss within its budget. An implementation that disagrees is printed as
DISAGREES and not timed (exit code 1).

Timing: each implementation's calls per sample chosen once (a sample ≥ `min_seconds /
repeats`), then the samples taken interleaved (a round calls every implementation once), so
the machine's load falls on all alike; the table prints the median and the minimum per call
and `peer / Presk` (> 1: Presk is faster) from the medians. A benchmark asserts nothing about
time.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "tutorial" / "07_train.psk"
SCALED = ROOT / "bench" / "scaled_tower.psk"
EPS = 1e-6
TOL = {"f64": 1e-10, "f32": 1e-3}
BUDGET = 1e-3
LR, BETAS, ADAM_EPS, DECAY = 1e-3, (0.9, 0.999), 1e-8, 1e-2
WORKLOADS = ("forward", "value+gradient", "AdamW step")
PEERS = ("eager", "compile", "jax")


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    batch: int  # timed
    solve_batch: int  # where `presk solve` runs

    def title(self) -> str:
        return f"{self.name}: {self.path.relative_to(ROOT)}, B = {self.batch}"


CASES = {"tutorial": Case("tutorial", TUTORIAL, 4, 4),
         "scaled": Case("scaled", SCALED, 1024, 64)}


@dataclass
class Settings:
    repeats: int
    min_seconds: float  # per implementation and workload, all samples together


@dataclass
class Impl:
    """One implementation at one dtype: a callable per workload, and its results."""

    label: str
    dtype: str  # the bound its agreement is held to: f64, f32 or "budget"
    calls: dict[str, Callable[[], object]]
    results: Callable[[], tuple[float, dict[str, np.ndarray], dict[str, np.ndarray]]]
    note: str = ""


# --------------------------------------------------------------------------------------
# Weights, batch, and the reference step
# --------------------------------------------------------------------------------------

@dataclass
class Problem:
    """A model's entry at one batch, its exported weights and batch (numpy f64)."""

    case: Case
    module: Any
    prepared: Any
    params: dict[str, np.ndarray]
    values: dict[str, np.ndarray]
    paths: list[str] = field(default_factory=list)

    @property
    def x(self) -> np.ndarray:
        return self.values["batch.0"]

    @property
    def y(self) -> np.ndarray:
        return self.values["batch.1"]


def problem(case: Case, batch: int) -> Problem:
    from presk.analysis import entry as E
    from presk.pipeline import load_core
    module, _ = load_core(str(case.path))
    prepared = E.prepare(module, "loss", {"B": batch})
    params = {k: np.asarray(v, dtype=np.float64) for k, v in E.weights(prepared, 0, None).items()}
    values = {k: np.asarray(v, dtype=np.float64) for k, v in E.inputs(prepared, 0, None).items()}
    return Problem(case, module, prepared, params, values, [f.path for f in prepared.fields])


# --------------------------------------------------------------------------------------
# Presk
# --------------------------------------------------------------------------------------

def presk_impl(pb: Problem, label: str, dtype: str, realization: Callable[[bool], Any] | None,
               note: str = "", fused: bool = False, native: bool = True) -> Impl:
    from presk.pipeline import run_native
    from presk.train.native_optim import NativeAdamW
    from presk.train.objective import NativeObjective
    real = realization or (lambda grad: None)
    runs = [run_native(pb.module, "loss", pb.prepared.dims, pb.params, pb.values, real(g),
                       grad=g, fuse_reductions=fused) for g in (False, True)]
    store = np.float32 if dtype == "f32" else np.float64
    batch = [pb.x, pb.y]

    def parts():
        return (NativeObjective(pb.module, "loss", pb.prepared.dims, real(True),
                                fuse_reductions=fused),
                NativeAdamW(lr=LR, beta1=BETAS[0], beta2=BETAS[1], eps=ADAM_EPS,
                            weight_decay=DECAY))

    def stepper() -> tuple[Callable[[], float], dict[str, np.ndarray]]:
        """The step and the parameters it updates."""
        if native:
            made = native_stepper(pb, *parts())
            if made is not None:
                return made
            print(f"  ({label}: no native step for this realization; its AdamW step is "
                  "driven from Python)")
        objective, opt = parts()
        params = {k: v.astype(store) for k, v in pb.params.items()}
        groups = opt.prepare(params)
        if len(groups) == 1 and objective.can_bind(groups[0].p.dtype):
            objective.bind(groups[0].views, opt.grad_views(groups[0]))
            params = dict(groups[0].views)

            def step() -> float:
                loss = objective.call_bound(batch)
                opt.step_laid_out()
                return loss
        else:
            def step() -> float:
                loss, grads = objective(params, batch)
                opt.step(params, grads)
                return loss
        return step, params

    def results():
        fwd = float(np.asarray(runs[0].result["result"], dtype=np.float64))
        grads = {p: np.asarray(runs[1].result[f"grad.{p}"], dtype=np.float64) for p in pb.paths}
        step, params = stepper()
        step()
        return fwd, grads, {k: np.asarray(v, dtype=np.float64) for k, v in params.items()}

    calls = {"forward": runs[0].entry.bind(runs[0].call.inputs),
             "value+gradient": runs[1].entry.bind(runs[1].call.inputs),
             "AdamW step": stepper()[0]}
    return Impl(label, dtype, calls, results, note)


def native_stepper(pb: Problem, objective, opt
                   ) -> tuple[Callable[[], float], dict[str, np.ndarray]] | None:
    """The AdamW step as `presk train` makes it (presk/train/native_step.py): one native
    call a step — the batch gathered from a data file's memory map (the problem's batch
    written to a `.psk.d` file, read in file order), the value and gradient, the constant
    schedule and AdamW's update of the f64 master copies (rounded into the objective's own
    buffers where it computes in f32) — and the parameters it updates. The call is
    `NativeStep.stepper()`'s builtin, started at the optimizer's step count: each call the
    next step, the step count going on as a run's does. None when the realization gives
    no native step (`native_step`'s None)."""
    import tempfile

    from presk.datafile import write_stream
    from presk.train.data import Stream
    from presk.train.native_step import native_step
    directory = tempfile.TemporaryDirectory(prefix="presk-bench-peers-")  # gone with
    path = os.path.join(directory.name, "batch.psk.d")  # the step (the map stays valid)
    width = pb.x.shape[-1]
    write_stream(path, f"(ℝ[model: {width}], ℝ[model: {width}])", [(width,), (width,)],
                 [pb.x, pb.y])
    stream = Stream.open_as_declared(path, pb.x.shape[0])
    params = {k: np.array(v, dtype=np.float64) for k, v in pb.params.items()}
    groups = opt.prepare(params)
    laid_out = len(groups) == 1 and objective.can_bind(groups[0].p.dtype)
    if laid_out:
        objective.bind(groups[0].views, opt.grad_views(groups[0]))
    step_program = native_step(objective, opt, groups, stream, 1, rounded=not laid_out)
    if step_program is None:
        stream.close()
        directory.cleanup()
        return None
    for name in step_program.geometry.buffers:  # AdamW's fresh moments: zeros, as made
        opt._made(groups[0], name)
    step_program.keep = (stream, objective, directory)  # as long as the step lives
    step_program.start(opt.steps, 0, np.arange(stream.header.count, dtype=np.int64))
    return step_program.stepper(), dict(groups[0].views)


def solved(pb: Problem) -> tuple[Any, str]:
    """`presk solve`'s realization of the entry under BUDGET, solved at the case's
    solve_batch, and a line saying what it is."""
    from presk.analysis import entry as E
    from presk.analysis import envelope as EV
    from presk.analysis.solver import solve
    dims = {"B": pb.case.solve_batch}
    prepared = E.prepare(pb.module, "loss", dims)
    t0 = time.perf_counter()
    envelope = EV.calibrate(pb.module, "loss", dims, bits=128, samples=1)
    sol = solve(pb.module, "loss", dims, envelope, BUDGET, params=E.weights(prepared, 0, None),
                values=E.inputs(prepared, 0, None), fma=True, grad=True)
    took = time.perf_counter() - t0
    r = sol.reverse
    reverse = (f"the gradient's reverse sweep: {len(r.sites)} sites f32, its measured error "
               f"there {r.worst:.2e} relative (the largest over the parameter tensors)"
               if r.narrowed else "the gradient's reverse sweep f64 (narrowed, it measured "
               f"{max(r.tried.values(), default=0):.2e} relative, over the budget)")
    return sol.realization, (f"presk solve --budget {BUDGET:g} --fma --grad at B = "
                             f"{pb.case.solve_batch}: {sol.realization.summary()}, its "
                             f"measured error there {sol.measured / sol.magnitude:.2e} "
                             f"relative (MPFR 128 bits); {reverse}; calibration and solve "
                             f"{took:.1f} s")


# --------------------------------------------------------------------------------------
# PyTorch: eager and torch.compile
# --------------------------------------------------------------------------------------

def torch_impl(pb: Problem, dtype: str, compiled: bool) -> Impl:
    import torch
    sys.path.insert(0, str(ROOT / "bench"))
    from native import torch_loss  # bench/native.py: the Tower by hand
    dt = {"f64": torch.float64, "f32": torch.float32}[dtype]
    loss_fn = torch.compile(torch_loss) if compiled else torch_loss
    x, y = torch.tensor(pb.x, dtype=dt), torch.tensor(pb.y, dtype=dt)

    def tensors() -> dict[str, Any]:
        return {k: torch.tensor(pb.params[k], dtype=dt, requires_grad=True) for k in pb.paths}

    p = tensors()
    plist = [p[k] for k in pb.paths]

    def forward():
        with torch.no_grad():
            return loss_fn(p, x, y)

    def gradient():
        loss = loss_fn(p, x, y)
        return loss, torch.autograd.grad(loss, plist)

    def stepper():
        q = tensors()
        opt = torch.optim.AdamW(list(q.values()), lr=LR, betas=BETAS, eps=ADAM_EPS,
                                weight_decay=DECAY)

        def step() -> float:
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(q, x, y)
            loss.backward()
            opt.step()
            return loss.item()
        step.params = q  # type: ignore[attr-defined]
        return step

    def results():
        fwd = float(forward())
        _, grads = gradient()
        step = stepper()
        step()
        return fwd, {k: g.detach().double().numpy() for k, g in zip(pb.paths, grads)}, \
            {k: v.detach().double().numpy() for k, v in step.params.items()}  # type: ignore

    label = f"{'torch.compile' if compiled else 'PyTorch eager'} {dtype}"
    return Impl(label, dtype, {"forward": forward, "value+gradient": gradient,
                               "AdamW step": stepper()}, results)


# --------------------------------------------------------------------------------------
# JAX
# --------------------------------------------------------------------------------------

def jax_loss(p: dict, x, y):
    import jax
    import jax.numpy as jnp

    def rms(v, g):
        return v / jnp.sqrt(jnp.mean(v * v, axis=-1, keepdims=True) + EPS) * g

    h = x
    for k in range(p["blocks.proj.w"].shape[0]):
        a = jax.nn.gelu(rms(h, p["blocks.norm.γ"][k]), approximate=False)
        h = h + (a @ p["blocks.proj.w"][k] + p["blocks.proj.b"][k])
    return jnp.mean((rms(h, p["final.γ"]) - y) ** 2)


def jax_adamw(p, m, v, t, x, y):
    """One step of value_and_grad and torch.optim.AdamW's update (its single-tensor CPU
    formulas: decay, lerp of m, v·β2 + (1−β2)·g², the bias corrections)."""
    import jax
    import jax.numpy as jnp
    loss, g = jax.value_and_grad(jax_loss)(p, x, y)
    t = t + 1
    b1, b2 = BETAS
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new_p, new_m, new_v = {}, {}, {}
    for k in p:
        w = p[k] * (1 - LR * DECAY)
        mk = m[k] + (1 - b1) * (g[k] - m[k])
        vk = v[k] * b2 + (1 - b2) * g[k] * g[k]
        denom = jnp.sqrt(vk) / jnp.sqrt(c2) + ADAM_EPS
        new_p[k], new_m[k], new_v[k] = w - (LR / c1) * mk / denom, mk, vk
    return new_p, new_m, new_v, t, loss


def jax_impl(pb: Problem, dtype: str) -> Impl:
    import jax
    import jax.numpy as jnp
    dt = {"f64": jnp.float64, "f32": jnp.float32}[dtype]
    p = {k: jnp.asarray(pb.params[k], dtype=dt) for k in pb.paths}
    x, y = jnp.asarray(pb.x, dtype=dt), jnp.asarray(pb.y, dtype=dt)
    fwd = jax.jit(jax_loss)
    vg = jax.jit(jax.value_and_grad(jax_loss))
    adamw = jax.jit(jax_adamw, donate_argnums=(0, 1, 2))

    def stepper():
        state = [{k: jnp.array(v) for k, v in p.items()},
                 {k: jnp.zeros_like(v) for k, v in p.items()},
                 {k: jnp.zeros_like(v) for k, v in p.items()}, jnp.asarray(0, dtype=dt)]

        def step():
            *new, loss = adamw(*state, x, y)
            state[:] = new
            return loss.block_until_ready()
        step.state = state  # type: ignore[attr-defined]
        return step

    def results():
        value, grads = vg(p, x, y)
        step = stepper()
        step()
        return float(fwd(p, x, y)), {k: np.asarray(grads[k], dtype=np.float64) for k in pb.paths}, \
            {k: np.asarray(v, dtype=np.float64) for k, v in step.state[0].items()}  # type: ignore

    return Impl(f"JAX jit {dtype}", dtype,
                {"forward": lambda: fwd(p, x, y).block_until_ready(),
                 "value+gradient": lambda: jax.block_until_ready(vg(p, x, y)),
                 "AdamW step": stepper()}, results)


# --------------------------------------------------------------------------------------
# Agreement and timing
# --------------------------------------------------------------------------------------

def rel(got, ref) -> float:
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    scale = float(np.max(np.abs(ref)))
    d = float(np.max(np.abs(got - ref)))
    return d / scale if scale else d


def adamw_once(start: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """torch.optim.AdamW's first step from `start` with `grads`, in f64 (numpy)."""
    b1, b2 = BETAS
    out = {}
    for k, p in start.items():
        g = grads[k]
        m, v = (1 - b1) * g, (1 - b2) * g * g
        denom = np.sqrt(v) / np.sqrt(1 - b2) + ADAM_EPS
        out[k] = p * (1 - LR * DECAY) - (LR / (1 - b1)) * m / denom
    return out


def differences(mine, ref, start: dict[str, np.ndarray]) -> dict[str, tuple[float, str]]:
    """(forward, gradient, step) relative differences, the largest per kind and where. The
    step's update (new − start) is compared with AdamW's formulas applied in f64 to the
    implementation's own gradient: a first step moves an element by about lr·sign(g), so
    an element whose gradient is below f32's resolution may move the other way in any
    f32 implementation; the gradient itself is compared above."""
    (fv, fg, fp), (rv, rg, rp) = mine, ref
    grad = max(((rel(fg[k], rg[k]), k) for k in rg), default=(0.0, ""))
    expected = adamw_once(start, fg)
    step = max(((rel(fp[k] - start[k], expected[k] - start[k]), k) for k in rp),
               default=(0.0, ""))
    return {"forward": (rel(fv, rv), "loss"), "value+gradient": grad, "AdamW step": step}


def agree(impls: list[Impl], ref: Impl, pb: Problem) -> list[Impl]:
    """Prints each implementation's differences from `ref`; returns those in bounds."""
    expected = ref.results()
    print("  agreement with PyTorch eager f64, max |ours − torch f64| / max |torch f64| per "
          "tensor, the largest (the step: its update against AdamW's, in f64, from its own "
          "gradient):")
    print(f"    {'':<30} {'forward':>10} {'gradient':>10} {'AdamW step':>10}  bound")
    kept = []
    for impl in impls:
        d = differences(impl.results(), expected, pb.params)
        if impl.dtype == "budget":  # the solver bounds the loss; the rest is printed
            bound, good = BUDGET, d["forward"][0] <= BUDGET
        else:
            bound = TOL[impl.dtype]
            good = all(v <= bound for v, _ in d.values())
        worst = max(d.values())
        print(f"    {impl.label:<30} {d['forward'][0]:10.2e} {d['value+gradient'][0]:10.2e} "
              f"{d['AdamW step'][0]:10.2e}  {bound:g}  "
              + ("ok" if good else f"DISAGREES (at {worst[1]})"))
        if good:
            kept.append(impl)
    return kept


@dataclass
class Samples:
    per_call: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return float(np.median(self.per_call))

    @property
    def minimum(self) -> float:
        return min(self.per_call)


def calls_per_sample(fn: Callable[[], object], seconds: float) -> int:
    fn()
    fn()  # warm: compiled, caches filled
    n, took = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - t0
        if took >= seconds / 4 or n >= 1 << 20:
            return max(1, math.ceil(n * seconds / max(took, 1e-9)))
        n *= 4


def interleaved(calls: dict[str, Callable[[], object]], settings: Settings) -> dict[str, Samples]:
    per_sample = settings.min_seconds / settings.repeats
    counts = {k: calls_per_sample(fn, per_sample) for k, fn in calls.items()}
    out = {k: Samples() for k in calls}
    for _ in range(settings.repeats):
        for k, fn in calls.items():
            n = counts[k]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            out[k].per_call.append((time.perf_counter() - t0) / n)
    return out


def show(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"


def print_times(impls: list[Impl], presk: str, settings: Settings) -> dict:
    """Times every workload of every implementation interleaved; prints the table."""
    table = {}
    for w in WORKLOADS:
        got = interleaved({i.label: i.calls[w] for i in impls}, settings)
        table[w] = got
    head = "".join(f" {w + ' median (min)':>26} {'÷ Presk':>8}" for w in WORKLOADS)
    print(f"  {'implementation':<30}{head}")
    for i in impls:
        cells = ""
        for w in WORKLOADS:
            s, base = table[w][i.label], table[w][presk].median
            r = s.median / base
            cells += f" {show(s.median) + ' (' + show(s.minimum) + ')':>26} " \
                     f"{(f'{r:.1f}×' if r >= 10 else f'{r:.2f}×'):>8}"
        print(f"  {i.label:<30}{cells}")
    print(f"  (per call, {settings.repeats} interleaved samples each; ÷ Presk: the peer's "
          f"median / `{presk}`'s, > 1: Presk is faster)")
    return table


# --------------------------------------------------------------------------------------
# Peers available, threads, the run
# --------------------------------------------------------------------------------------

def available(wanted: list[str]) -> dict[str, str | None]:
    """Each wanted peer: None when usable, else why it is left out."""
    why: dict[str, str | None] = {}
    for peer in wanted:
        try:
            if peer == "jax":
                import jax
                jax.config.update("jax_enable_x64", True)
            else:
                import torch  # noqa: F401
                if peer == "compile":
                    import shutil
                    if not (shutil.which("gcc") or shutil.which("cc") or shutil.which("clang")):
                        why[peer] = "torch.compile: no C compiler on PATH"
                        continue
            why[peer] = None
        except ImportError as exc:
            why[peer] = f"{peer}: not installed ({exc.name or exc}); pip install -e '.[bench]'"
    return why


def pin_threads(n: int | None) -> int:
    cpus = sorted(os.sched_getaffinity(0))
    if n is not None:
        if not 1 <= n <= len(cpus):
            raise SystemExit(f"bench/peers.py: --threads {n}: this process may use "
                             f"{len(cpus)} CPUs")
        os.sched_setaffinity(0, cpus[:n])
        cpus = cpus[:n]
    return len(cpus)


def threads_line(n: int) -> str:
    import torch
    from presk.conversion.realize_to_kernel import workers
    return (f"threads: the process pinned to {n} CPU{'s' if n > 1 else ''} "
            f"({sorted(os.sched_getaffinity(0))}); torch.set_num_threads({torch.get_num_threads()}); "
            f"XLA's CPU pool sized by the affinity; Presk: contractions of 2M multiply-adds or "
            f"more and other nests of 32k iterations or more split on {workers()} thread(s) "
            f"(the affinity, or PRESK_THREADS), the rest on 1")


def run_case(case: Case, dtype: str, peers: dict[str, str | None], settings: Settings,
             solve_it: bool, native: bool = True) -> bool:
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\n== {case.title()}, {dtype}; load average {load} (the machine is shared: "
          "times are inflated alike, ratios less so)")
    pb = problem(case, case.batch)
    sys.path.insert(0, str(ROOT / "bench"))
    from native import all_f32, with_fma
    if dtype == "f64":
        presk = presk_impl(pb, "Presk native f64", "f64", None, native=native)
        impls = [presk]
    else:
        reals = {g: all_f32(pb.module, pb.prepared, g) for g in (False, True)}
        presk = presk_impl(pb, "Presk native f32", "f32", reals.get, native=native)
        fma = {g: with_fma(pb.module, r, g) for g, r in reals.items()}
        impls = [presk, presk_impl(pb, "Presk f32 fused", "f32", reals.get, fused=True,
                                   native=native),
                 presk_impl(pb, "Presk f32+fma", "f32", fma.get, native=native),
                 presk_impl(pb, "Presk f32+fma fused", "f32", fma.get, fused=True,
                            native=native)]
    print("  Presk's AdamW step: " + (
        "one native call a step (presk train's: the batch gathered from a data file's "
        "memory map, value and gradient, AdamW on f64 master copies)" if native else
        "the objective's native call and AdamW's native update, driven from Python "
        "(--step python)"))
    if solve_it and dtype == "f32":
        realization, line = solved(pb)
        print(f"  solved: {line}")
        impls.append(presk_impl(pb, f"Presk solved {BUDGET:g} fused", "budget",
                                lambda grad: realization, fused=True, native=native))
    ref = torch_impl(pb, "f64", compiled=False)
    if dtype == "f64":
        impls.append(ref)
    else:
        impls.append(torch_impl(pb, dtype, compiled=False))
    if peers.get("compile", "") is None:
        impls.append(torch_impl(pb, dtype, compiled=True))
    if peers.get("jax", "") is None:
        impls.append(jax_impl(pb, dtype))
    kept = agree(impls, ref, pb)
    if presk not in kept:
        return False
    print_times(kept, presk.label, settings)
    return len(kept) == len(impls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few samples (a smoke test)")
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--dtype", choices=["f32", "f64", "all"], default="all")
    parser.add_argument("--threads", type=int, default=None,
                        help="pin the process to N CPUs (default: all it may use)")
    parser.add_argument("--peers", default=",".join(PEERS),
                        help=f"comma-separated, of {', '.join(PEERS)} (eager always runs)")
    parser.add_argument("--no-solve", action="store_true",
                        help="leave out Presk under the solved realization")
    parser.add_argument("--step", choices=["native", "python"], default="native",
                        help="Presk's AdamW step: one native call (presk train's, the "
                        "default) or the objective's call and the update's driven from "
                        "Python")
    args = parser.parse_args(argv)
    wanted = [p for p in args.peers.split(",") if p]
    if bad := [p for p in wanted if p not in PEERS]:
        raise SystemExit(f"bench/peers.py: --peers: unknown {', '.join(bad)}; of {', '.join(PEERS)}")
    n = pin_threads(args.threads)  # before torch or jax start their pools
    sys.path.insert(0, str(ROOT))
    import torch
    torch.set_num_threads(n)
    peers = available(sorted(set(wanted) | {"eager"}))
    settings = Settings(3, 0.06) if args.quick else Settings(9, 1.5)
    started = time.perf_counter()
    print(f"bench/peers.py: torch {torch.__version__}, {threads_line(n)}")
    for peer in PEERS:
        if peer not in wanted:
            print(f"  peer {peer}: not asked for (--peers)")
        elif peers[peer] is not None:
            print(f"  peer missing — {peers[peer]}")
    if peers.get("jax", "") is None:
        import jax
        print(f"  jax {jax.__version__} ({jax.devices()[0].platform})")
    ok = True
    cases = list(CASES) if args.case == "all" else [args.case]
    dtypes = ["f32", "f64"] if args.dtype == "all" else [args.dtype]
    for c in cases:
        for dt in dtypes:
            ok &= run_case(CASES[c], dt, peers, settings, not args.no_solve,
                           args.step == "native")
    print(f"\n(bench/peers.py took {time.perf_counter() - started:.1f} s)")
    if not ok:
        print("bench/peers.py: an implementation disagrees (see above); it was not timed",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
