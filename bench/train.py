"""`presk train`'s steps per second against PyTorch eager's, on the same model and data.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/train.py [--quick] [--case tutorial|scaled|all]

Measured in one run and printed side by side, steps per second, each with its ratio to
Presk's (`Presk / peer`: 12× means Presk makes 12 times as many steps a second):

- Presk: the training loop as `presk train` runs it (presk/train/loop.py; the process's
  garbage collector tuned as the `presk` command tunes its own, presk/gc_pause.py
  `tune_process`, which the peers share): `Trainer.create`
  (the objective's value and gradient compiled natively, the data stream, the optimizer),
  then a block of `Trainer.advance` calls timed by `presk.runtime.time_call` (median of
  repeats), divided by its steps (the fewest steps that are whole epochs and whole calls:
  `block_of_steps`): the native step (presk/train/native_step.py), up to
  `--steps-per-call` steps (`presk train`'s default) in one native call across epochs'
  ends, each
  gathering its batch from the `.psk.d` file's memory map (the shuffled order), the
  objective's value and gradient, the schedule and AdamW; and, as before it, the step
  driven from Python (`--steps-per-call 0`: the batch read by positioned reads, one native
  call for the objective and one for the update). Checkpoints, the log and the progress
  bar are not in the step; the history the steps append is cleared after each block.
- JAX jit (when jax is installed: `pip install jax`; the bench says so otherwise): the same
  Tower, `jax.value_and_grad` and torch's AdamW update in one `jax.jit` function, the
  learning rate (presk's Schedule, as LambdaLR gives it) handed in each step, and
  `float(loss)` each step (a synchronization, as PyTorch's `loss.item()`), the batches
  already on the device, in the same order; float64 (`jax_enable_x64`) and float32, XLA's
  CPU default threads.
- PyTorch eager (CPU), the same Tower written by hand (bench/native.py `torch_loss`, the
  fastest of the PyTorch forms we have; the exported module builds a view module per
  block and call), in float64 and float32, at torch's default thread count and at 1
  thread: `zero_grad`, the loss, `backward`, `torch.optim.AdamW.step`, `LambdaLR.step`
  and `loss.item()` (Presk's step returns the loss too), the batches already in memory
  as tensors, in the same order.

Cases:
- `tutorial`: tutorial/07_train.psk as it is: B = 8 over tutorial/data/pairs.psk.d (D = 4,
  L = 3, 76 reals), AdamW with a cosine schedule, all-f64 (Presk's default realization).
  The goals: Presk at least 50× JAX jit's steps/s (its faster dtype here) and 10× PyTorch
  eager's, its fastest configuration here.
- `scaled`: bench/scaled_tower.psk's Tower (D = 256, L = 4), given a training run here (the
  tutorial's objective and optimizer) over `presk data linear --width 256` pairs
  (generated into a temporary directory), B = 64; Presk all-f64 and all-f32 (a
  realization naming every site of the gradient and every parameter, bench/native.py
  `all_f32`). No goal: the ratio is reported.

Before timing, each case trains K steps from presk's seed-0 weights with Presk (f64) and
with PyTorch f64 and f32, and compares the parameters: max |ours − torch f64| /
max |torch f64| per tensor, at most 1e-10 for f64 and 1e-3 for f32 (and for Presk's f32
realization). A benchmark asserts nothing about time; the exit code is 1 when the
implementations disagree (no times are printed for that case), 0 otherwise.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from presk.runtime import Timing

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from native import EPS, _threads, all_f32, header, torch_loss, verdict  # noqa: E402  (bench/native.py)

TUTORIAL = ROOT / "tutorial" / "07_train.psk"
SCALED = ROOT / "bench" / "scaled_tower.psk"
GOAL_TUTORIAL = 10.0  # Presk's steps/s at least this many times PyTorch eager's
GOAL_JAX = 50.0  # and this many times JAX jit's
TOL = {"f64": 1e-10, "f32": 1e-3}
SCALED_B, SCALED_COUNT = 64, 4096

# The scaled Tower given the tutorial's objective, optimizer and kind of data.
SCALED_RUN = """\
import "{tower}" as s
dim B

fn loss(θ : params s.Tower, batch : (ℝ[batch: B, model: 256], ℝ[batch: B, model: 256])) -> ℝ[] =
  let (x, y) = batch
  mean((s.Tower.apply(θ, x) - y)^2)

optimizer adamw {{
  lr           : f64 = 0.01
  weight_decay : f64 = 0.0
  schedule     : cosine(warmup = 20)
}}

training run {{
  model     = s.Tower
  objective = loss
  optimizer = adamw
  data      = stream "pairs.psk.d" |> shuffle(seed = 3) |> batch(B = {b})
  epochs    : nat = 10
}}
"""


@dataclass
class Settings:
    repeats: int
    min_seconds: float  # per implementation, all repeats together
    check_steps: int  # the agreement run


# --------------------------------------------------------------------------------------
# The two sides
# --------------------------------------------------------------------------------------


PRESK_F64 = "Presk (all-f64)"
PRESK_F32 = "Presk (all-f32)"
PYTHON_STEP = ", Python-driven step"


def load_run(path: Path):
    """The program's core module and its one training run."""
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    program = elaborate(str(path))
    training = next(iter(program.main.trainings.values()))
    return lower_program(program), training


def presk_trainer(core, training, directory: str, steps: int, realization=None,
                  steps_per_call: int | None = None):
    """A Trainer whose schedule spans `steps` (the agreement run, or every timed step)."""
    from presk.train.loop import STEPS_PER_CALL, Trainer
    return Trainer.create(core, training, directory, steps=steps, realization=realization,
                          steps_per_call=STEPS_PER_CALL if steps_per_call is None
                          else steps_per_call)


def block_of_steps(trainer):
    """A call that makes a block of the trainer's steps by `advance`, as `presk train`
    makes them between checkpoints (native calls of up to `steps_per_call` steps, across
    epochs' ends; `one_step` each for the Python-driven one), and forgets their history;
    and the block's steps: the fewest that are whole epochs and whole calls (the least
    common multiple; an epoch for the Python-driven step), so that every sample times
    the same mix of calls and epochs' orders."""
    per_epoch = trainer.stream.steps_per_epoch
    steps = math.lcm(per_epoch, trainer.native.k) if trainer.native else per_epoch

    def block() -> None:
        done = 0
        while done < steps:
            done += len(trainer.advance(steps - done))
        trainer.history.clear()
    return block, steps


def jax_available() -> bool:
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


class JaxRun:
    """The hand-written Tower, its gradient and torch's AdamW in one jax.jit function, on
    batches held on the device, in one dtype; the learning rate of each step from presk's
    Schedule (as LambdaLR)."""

    def __init__(self, trainer, batches: list[tuple[np.ndarray, np.ndarray]], dtype: str,
                 total: int) -> None:
        import jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        opt = trainer.optimizer
        dt = {"f64": jnp.float64, "f32": jnp.float32}[dtype]
        self.p = {k: jnp.asarray(v, dtype=dt) for k, v in trainer.params.items()}
        self.m = {k: jnp.zeros_like(v) for k, v in self.p.items()}
        self.v = {k: jnp.zeros_like(v) for k, v in self.p.items()}
        self.batches = [(jnp.asarray(x, dtype=dt), jnp.asarray(y, dtype=dt))
                        for x, y in batches]
        self.schedule = type(opt.schedule)(opt.schedule.kind, total, opt.schedule.warmup)
        self.lr, self.t, self.i = opt.lr, 0, 0
        b1, b2, eps, wd = opt.beta1, opt.beta2, opt.eps, opt.weight_decay

        def loss(p, x, y):
            def rms(v, g):
                return v / jnp.sqrt(jnp.mean(v * v, axis=-1, keepdims=True) + EPS) * g
            h = x
            for k in range(p["blocks.proj.w"].shape[0]):
                h = h + (jax.nn.gelu(rms(h, p["blocks.norm.γ"][k]), approximate=False)
                         @ p["blocks.proj.w"][k] + p["blocks.proj.b"][k])
            return jnp.mean((rms(h, p["final.γ"]) - y) ** 2)

        def step(p, m, v, t, lr, x, y):
            value, g = jax.value_and_grad(loss)(p, x, y)
            c1, c2s = 1 - b1 ** t, jnp.sqrt(1 - b2 ** t)
            p = {k: p[k] * (1 - lr * wd) for k in p}
            m = {k: m[k] + (1 - b1) * (g[k] - m[k]) for k in m}
            v = {k: v[k] * b2 + (1 - b2) * g[k] * g[k] for k in v}
            p = {k: p[k] - (lr / c1) * m[k] / (jnp.sqrt(v[k]) / c2s + eps) for k in p}
            return p, m, v, value
        self._step = jax.jit(step)

    def step(self) -> float:
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        lr = self.lr * self.schedule(self.t)
        self.t += 1
        self.p, self.m, self.v, value = self._step(self.p, self.m, self.v, float(self.t),
                                                   lr, x, y)
        return float(value)

    def params(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, dtype=np.float64) for k, v in self.p.items()}


class TorchRun:
    """The hand-written Tower trained by torch.optim.AdamW + LambdaLR(presk's Schedule) on
    batches held in memory, in one dtype."""

    def __init__(self, trainer, batches: list[tuple[np.ndarray, np.ndarray]], dtype: str,
                 total: int) -> None:
        import torch
        from presk.train.optim import AdamW
        opt = trainer.optimizer
        assert isinstance(opt, AdamW), "the bench's runs use AdamW"
        dt = {"f64": torch.float64, "f32": torch.float32}[dtype]
        self.p = {k: torch.tensor(v, dtype=dt, requires_grad=True)
                  for k, v in trainer.params.items()}
        self.batches = [(torch.tensor(x, dtype=dt), torch.tensor(y, dtype=dt))
                        for x, y in batches]
        self.opt = torch.optim.AdamW(list(self.p.values()), lr=opt.lr,
                                     betas=(opt.beta1, opt.beta2), eps=opt.eps,
                                     weight_decay=opt.weight_decay)
        schedule = type(opt.schedule)(opt.schedule.kind, total, opt.schedule.warmup)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, schedule)
        self.i = 0

    def step(self) -> float:
        x, y = self.batches[self.i % len(self.batches)]
        self.i += 1
        self.opt.zero_grad(set_to_none=True)
        loss = torch_loss(self.p, x, y)
        loss.backward()
        self.opt.step()
        self.sched.step()
        return loss.item()

    def params(self) -> dict[str, np.ndarray]:
        return {k: v.detach().double().numpy() for k, v in self.p.items()}


def batches_of(trainer, steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first `steps` batches of the run's stream, in its order (read once, kept)."""
    from presk.train.data import Position
    s = trainer.stream
    out = []
    for t in range(steps):
        epoch, i = divmod(t, s.steps_per_epoch)
        x, y = s.read(Position(epoch, i))
        out.append((x, y))
    return out


# --------------------------------------------------------------------------------------
# Agreement, then timing
# --------------------------------------------------------------------------------------


def difference(mine: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> float:
    worst = 0.0
    for k, r in ref.items():
        d, scale = float(np.max(np.abs(mine[k] - r))), float(np.max(np.abs(r)))
        worst = max(worst, d / scale if scale else d)
    return worst


def agree(core, training, directory: str, settings: Settings,
          f32_realization=None) -> bool:
    """K steps from the same weights and batches: Presk (f64, and f32 when given) against
    PyTorch f64; PyTorch f32 too. Prints the differences; True when all are in bounds."""
    k = settings.check_steps
    ref_trainer = presk_trainer(core, training, directory, k)
    batches = batches_of(ref_trainer, k)
    runs = {f"PyTorch eager {dt}": TorchRun(ref_trainer, batches, dt, k) for dt in ("f64", "f32")}
    if jax_available():
        runs.update({f"JAX jit {dt}": JaxRun(ref_trainer, batches, dt, k) for dt in ("f64", "f32")})
    presk_runs = {"Presk f64": ref_trainer,
                  "Presk f64" + PYTHON_STEP: presk_trainer(core, training, directory, k,
                                                          steps_per_call=0)}
    if f32_realization is not None:
        presk_runs["Presk f32"] = presk_trainer(core, training, directory, k, f32_realization)
    for _ in range(k):
        for r in runs.values():
            r.step()
    for t in presk_runs.values():
        while t.step < k:
            t.advance(k - t.step)
    ref = runs["PyTorch eager f64"].params()
    print(f"  agreement after {k} steps from the same weights and batches, the parameters' "
          "max |ours − torch f64| / max |torch f64|, the largest over tensors:")
    ok = True
    rows = [(n, "f32" if "f32" in n else "f64", t.params) for n, t in presk_runs.items()]
    rows += [(n, n[-3:], r.params()) for n, r in runs.items() if n != "PyTorch eager f64"]
    for name, dt, params in rows:
        d = difference(params, ref)
        good = d <= TOL[dt]
        ok &= good
        print(f"    {name:<36} {d:10.3e}   (bound {TOL[dt]:g}) "
              f"{'ok' if good else 'DISAGREES'}")
    same = all(np.array_equal(ref_trainer.params[p], presk_runs["Presk f64" + PYTHON_STEP]
                              .params[p]) for p in ref_trainer.params) and \
        [r.loss for r in ref_trainer.history] == \
        [r.loss for r in presk_runs["Presk f64" + PYTHON_STEP].history]
    ok &= same
    print(f"    the native step and the Python-driven one: {'the same bits' if same else 'DIFFER'}"
          f" (losses and parameters after {k} steps)")
    if not jax_available():
        print("    JAX: not installed (pip install jax): no JAX rows")
    for t in presk_runs.values():
        t.stream.close()
    return ok


def time_it(fn, settings: Settings):
    from presk.runtime import time_call
    return time_call(fn, repeats=settings.repeats, min_seconds=settings.min_seconds)


def steps_needed(settings: Settings, per_step_guess: float) -> int:
    """An upper bound of the steps time_call makes (warm-up, calibration, samples), so that
    a schedule spans them all and the in-memory batches need not repeat too soon."""
    return int(4 * settings.min_seconds / per_step_guess) + 64


def time_all(core, training, directory: str, settings: Settings, presk_sides: dict,
             total: int, torch_batches: int) -> list[tuple[str, Any]]:
    """The time of a step (presk.runtime.Timing) of each Presk side and of PyTorch (f64,
    f32 × default threads, 1 thread)."""
    import torch
    rates = []
    for label, realization in presk_sides.items():
        for suffix, per_call in (("", None), (PYTHON_STEP, 0)):
            trainer = presk_trainer(core, training, directory, total, realization, per_call)
            if per_call is None and trainer.native is None:
                print(f"  ({label}: no native step — its objective rounds the f64 parameters "
                      "into its own buffers — so both its rows are the Python-driven step)")
            block, steps = block_of_steps(trainer)
            t = time_it(block, settings)
            rates.append((label + suffix, Timing(t.median / steps, t.minimum / steps,
                                                 t.repeats, t.number * steps)))
            trainer.stream.close()
    source = presk_trainer(core, training, directory, total)
    batches = batches_of(source, torch_batches)
    source.stream.close()
    if jax_available():
        for dt in ("f64", "f32"):
            rates.append((f"JAX jit {dt}", time_it(JaxRun(source, batches, dt, total).step,
                                                   settings)))
    default = torch.get_num_threads()
    try:
        for dt in ("f64", "f32"):
            for n in (default, 1):
                torch.set_num_threads(n)
                run = TorchRun(source, batches, dt, total)
                rates.append((f"PyTorch eager {dt}, {n} thread{'s' if n > 1 else ''}",
                              time_it(run.step, settings)))
    finally:
        torch.set_num_threads(default)
    return rates


def print_table(timings: list[tuple[str, Any]], presk_label: str,
                settings: Settings) -> dict[str, float]:
    """The table (steps/s from the median time of a step, and from the best sample: the
    machine is shared, and the gap between them shows how much); returns each row's
    steps/s (median)."""
    rates = {label: 1 / t.median for label, t in timings}
    base = rates[presk_label]
    print(f"  {'implementation':<38} {'steps/s':>9} {'µs/step':>9} {'best steps/s':>12}"
          f"   {'Presk / peer':>12}")
    for label, t in timings:
        r = base / rates[label]
        print(f"  {label:<38} {rates[label]:9,.0f} {t.median * 1e6:9.1f} "
              f"{1 / t.minimum:12,.0f}   {(f'{r:.1f}×' if r >= 10 else f'{r:.2f}×'):>12}")
    print(f"  (medians of {settings.repeats} samples each; Presk / peer > 1: Presk makes "
          f"more steps a second; Presk is `{presk_label}`)")
    return rates


# --------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------


def case_tutorial(settings: Settings) -> bool:
    header(f"tutorial: {TUTORIAL.relative_to(ROOT)} (B = 8, D = 4, L = 3, 76 reals), "
           "AdamW + cosine, a training step")
    core, training = load_run(TUTORIAL)
    with tempfile.TemporaryDirectory(prefix="presk-bench-train-") as d:
        if not agree(core, training, d, settings):
            return False
        total = steps_needed(settings, 5e-6)
        rates = time_all(core, training, d, settings, {PRESK_F64: None},
                         total, 2048)
    label = PRESK_F64
    got = print_table(rates, label, settings)
    for peer, goal in (("JAX jit", GOAL_JAX), ("PyTorch eager", GOAL_TUTORIAL)):
        rows = {k: v for k, v in got.items() if k.startswith(peer)}
        if not rows:
            print(f"  goal: Presk ≥ {goal:g}× {peer}'s steps/s: not measured ({peer} missing)")
            continue
        best = max(rows, key=rows.__getitem__)
        r, before = got[label] / rows[best], got[label + PYTHON_STEP] / rows[best]
        print(f"  goal: Presk ≥ {goal:g}× {peer}'s steps/s: {verdict(r >= goal)} — {r:.1f}× "
              f"against its fastest configuration here ({best}); the Python-driven step: "
              f"{before:.1f}×")
    print(f"  Presk: {_threads()}")
    return True


def case_scaled(settings: Settings) -> bool:
    header(f"scaled: {SCALED.relative_to(ROOT)}'s Tower (D = 256, L = 4) at B = {SCALED_B}, "
           f"AdamW + cosine, over {SCALED_COUNT} generated pairs, a training step")
    from presk.analysis import entry as E
    with tempfile.TemporaryDirectory(prefix="presk-bench-train-") as d:
        presk = str(Path(sys.executable).parent / "presk")
        made = subprocess.run([presk, "data", "linear", "--width", "256", "--count",
                               str(SCALED_COUNT), "-o", os.path.join(d, "pairs.psk.d")],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise SystemExit(f"bench/train.py: presk data linear failed:\n{made.stderr}")
        program = Path(d) / "scaled_run.psk"
        program.write_text(SCALED_RUN.format(tower=SCALED, b=SCALED_B))
        core, training = load_run(program)
        prepared = E.prepare(core, "loss", dict(training.dims))
        f32 = all_f32(core, prepared, grad=True)
        if not agree(core, training, d, settings, f32):
            return False
        total = steps_needed(settings, 3e-3)
        rates = time_all(core, training, d, settings,
                         {PRESK_F64: None, PRESK_F32: f32},
                         total, 64)
    got = print_table(rates, PRESK_F64, settings)
    for dt in ("f64", "f32"):
        rows = {k: r for k, r in got.items() if k.startswith(f"PyTorch eager {dt}")}
        best = max(rows, key=rows.__getitem__)
        mine = got[f"Presk (all-{dt})"] / rows[best]
        print(f"  ratio: Presk {dt}'s steps/s / PyTorch eager {dt}'s (its fastest here, "
              f"{best}): {mine:.2f}× (no goal)")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    parser.add_argument("--case", choices=["tutorial", "scaled", "all"], default="all")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from presk.gc_pause import tune_process
    tune_process()  # the collector as `presk train` sets it (its main does this first)
    settings = (Settings(repeats=3, min_seconds=0.05, check_steps=20) if args.quick
                else Settings(repeats=7, min_seconds=1.0, check_steps=100))
    started = time.perf_counter()
    ok = True
    if args.case in ("tutorial", "all"):
        ok &= case_tutorial(settings)
    if ok and args.case in ("scaled", "all"):
        ok &= case_scaled(settings)
    print(f"\n(bench/train.py took {time.perf_counter() - started:.1f} s)")
    if not ok:
        print("bench/train.py: the implementations disagree (see above); no times printed "
              "for that case", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
