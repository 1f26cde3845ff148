"""Presk's native code against PyTorch eager and numpy, per call of a loss and its gradient.

Usage, from anywhere (paths are the repository's):

    .venv/bin/python bench/native.py [--quick] [--case tutorial|scaled|compile|all]

Measured in one run and printed side by side, per call, each figure with its ratio to
Presk's on the same line (`peer / Presk`: 37× means Presk is 37 times faster):

- Presk native: the entry compiled by presk (presk.pipeline.run_native), its inputs
  bound once (`NativeEntry.bind`), timed by `presk.runtime.time_call` (median of repeats).
  The forward is the entry `loss`; the gradient is `loss.value_vjp` (`grad=True`): the
  value and the gradient with respect to every parameter.
- PyTorch eager (CPU), the same model written by hand below, in float64 and float32, at
  torch's default thread count and at 1 thread; the forward under `torch.no_grad()`, the
  gradient by `torch.autograd.grad` of the loss with respect to every parameter.
- numpy, the same forward and a hand-written backward, in float64 and float32 (numpy has
  no erf: gelu calls `math.erf` per element, through `np.frompyfunc`).

The model, the tutorial's Tower (tutorial/06_tower.psk): L blocks x + Linear(gelu(RMSNorm(x))),
then a final RMSNorm; loss = mean((Tower(x) − y)²). RMSNorm is x / sqrt(mean(x², model) +
1e-6) · γ, gelu the exact (erf) one, Linear x·W + b with W [In, Out].

Cases:
- `tutorial`: tutorial/07_train.psk, entry `loss` at B = 4 (D = 4, L = 3), all-f64 (Presk's
  default realization). The goal: Presk at least 20× faster than PyTorch eager (its
  fastest configuration, forward and gradient each).
- `scaled`: bench/scaled_tower.psk (D = 256, L = 4) at B = 1024, all-f32: a realization
  built here naming every site the entry reaches (for the gradient, the reverse sweep's
  too) and every parameter f32. The goal: Presk's time at most 2× PyTorch eager f32's.
- `compile`: the tutorial's entry compiled in a fresh process each, with an empty cache
  directory (cold) and the same directory again (warm), forward and gradient: the
  compile time `native_program` records (`program.timings.total`), the recording time,
  and the process's wall time from its start (interpreter, imports, recording, compile)
  to the callable entry. The goals: at most 1.5 s cold and 0.1 s warm (the compile time).

Before timing, every implementation's loss and gradient are compared with PyTorch
float64 on the same weights and inputs (presk's seeded ones, `presk.analysis.entry`):
max |ours − torch f64| / max |torch f64| per tensor, at most 1e-12 in f64 and 1e-4 in
f32. A benchmark asserts nothing about time; the exit code is 1 when the implementations
disagree (the table says which), 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "tutorial" / "07_train.psk"
SCALED = ROOT / "bench" / "scaled_tower.psk"
EPS = 1e-6
TOL = {"f64": 1e-12, "f32": 1e-4}
GOAL_TUTORIAL = 20.0  # Presk at least this many times faster than PyTorch eager
GOAL_SCALED = 2.0  # Presk's time at most this many times PyTorch f32's
GOAL_COLD, GOAL_WARM = 1.5, 0.1  # seconds of compile time
PATHS = ("blocks.norm.γ", "blocks.proj.w", "blocks.proj.b", "final.γ")


@dataclass
class Settings:
    repeats: int
    min_seconds: float
    compile_runs: int


# --------------------------------------------------------------------------------------
# The model in PyTorch
# --------------------------------------------------------------------------------------

def torch_loss(p: dict, x, y):
    import torch
    import torch.nn.functional as F

    def rms(v, g):
        return v / torch.sqrt(torch.mean(v * v, dim=-1, keepdim=True) + EPS) * g

    h = x
    for k in range(p["blocks.proj.w"].shape[0]):
        h = h + (F.gelu(rms(h, p["blocks.norm.γ"][k])) @ p["blocks.proj.w"][k]
                 + p["blocks.proj.b"][k])
    return torch.mean((rms(h, p["final.γ"]) - y) ** 2)


class TorchModel:
    """The loss and its gradient in torch, on tensors made once."""

    def __init__(self, params: dict, x: np.ndarray, y: np.ndarray, dtype: str) -> None:
        import torch
        dt = {"f64": torch.float64, "f32": torch.float32}[dtype]
        self.p = {k: torch.tensor(params[k], dtype=dt, requires_grad=True) for k in PATHS}
        self.plist = [self.p[k] for k in PATHS]
        self.x, self.y = torch.tensor(x, dtype=dt), torch.tensor(y, dtype=dt)

    def forward(self):
        return torch_loss(self.p, self.x, self.y)

    def gradient(self):
        import torch
        loss = torch_loss(self.p, self.x, self.y)
        return loss, torch.autograd.grad(loss, self.plist)

    def results(self) -> tuple[dict, dict]:
        import torch
        with torch.no_grad():
            value = float(self.forward())
        loss, grads = self.gradient()
        g = {"result": float(loss.detach())}
        g.update({f"grad.{k}": t.detach().double().numpy() for k, t in zip(PATHS, grads)})
        return {"result": value}, g

    def timed(self, settings: Settings) -> tuple[Any, Any]:
        import torch
        with torch.no_grad():
            fwd = time_it(self.forward, settings)
        return fwd, time_it(self.gradient, settings)


# --------------------------------------------------------------------------------------
# The model in numpy, forward and hand-written backward
# --------------------------------------------------------------------------------------

_ERF = np.frompyfunc(math.erf, 1, 1)
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _erf(x: np.ndarray) -> np.ndarray:
    return _ERF(x * _SQRT1_2).astype(x.dtype)  # erf(x / √2), in x's dtype


class NumpyModel:
    def __init__(self, params: dict, x: np.ndarray, y: np.ndarray, dtype: str) -> None:
        dt = {"f64": np.float64, "f32": np.float32}[dtype]
        self.dt = dt
        self.p = {k: np.ascontiguousarray(params[k], dtype=dt) for k in PATHS}
        self.x, self.y = np.asarray(x, dtype=dt), np.asarray(y, dtype=dt)
        self.half, self.two = dt(0.5), dt(2.0)
        self.eps, self.c = dt(EPS), dt(_INV_SQRT_2PI)

    def _rms(self, h, g):
        s = np.sqrt(np.mean(h * h, axis=-1, keepdims=True) + self.eps)
        u = h / s
        return u * g, u, s

    def _rms_back(self, dy, h, u, s, g):
        """dh and dγ of y = (h / s) · γ, s = sqrt(mean(h²) + eps)."""
        du = dy * g
        dg = np.sum(dy * u, axis=0)
        dh = du / s - h * (np.sum(du * h, axis=-1, keepdims=True) / (h.shape[-1] * s ** 3))
        return dh, dg

    def forward(self, keep: bool = False):
        p = self.p
        h, tape = self.x, []
        for k in range(p["blocks.proj.w"].shape[0]):
            n, u, s = self._rms(h, p["blocks.norm.γ"][k])
            phi = self.half * (1 + _erf(n))  # Φ(n)
            a = n * phi
            out = h + (a @ p["blocks.proj.w"][k] + p["blocks.proj.b"][k])
            if keep:
                tape.append((h, u, s, n, phi, a))
            h = out
        o, u, s = self._rms(h, p["final.γ"])
        d = o - self.y
        loss = np.mean(d * d)
        return (loss, tape, (h, u, s), d) if keep else loss

    def gradient(self):
        p = self.p
        loss, tape, (h, u, s), d = self.forward(keep=True)
        dh, d_final = self._rms_back(self.two * d / self.dt(d.size), h, u, s, p["final.γ"])
        grads = {"final.γ": d_final, "blocks.norm.γ": np.empty_like(p["blocks.norm.γ"]),
                 "blocks.proj.w": np.empty_like(p["blocks.proj.w"]),
                 "blocks.proj.b": np.empty_like(p["blocks.proj.b"])}
        for k in reversed(range(len(tape))):
            hk, uk, sk, n, phi, a = tape[k]
            grads["blocks.proj.b"][k] = np.sum(dh, axis=0)
            grads["blocks.proj.w"][k] = a.T @ dh
            da = dh @ p["blocks.proj.w"][k].T
            dn = da * (phi + n * (self.c * np.exp(-self.half * n * n)))  # gelu'(n)
            dx, grads["blocks.norm.γ"][k] = self._rms_back(dn, hk, uk, sk,
                                                           p["blocks.norm.γ"][k])
            dh = dh + dx
        return loss, grads

    def results(self) -> tuple[dict, dict]:
        loss, grads = self.gradient()
        g = {"result": float(loss)}
        g.update({f"grad.{k}": np.asarray(grads[k], dtype=np.float64) for k in PATHS})
        return {"result": float(self.forward())}, g

    def timed(self, settings: Settings) -> tuple[Any, Any]:
        return time_it(self.forward, settings), time_it(self.gradient, settings)


# --------------------------------------------------------------------------------------
# Presk
# --------------------------------------------------------------------------------------

def load_entry(path: Path, dims: dict[str, int]):
    from presk.analysis import entry as E
    from presk.pipeline import load_core
    module, _ = load_core(str(path))
    prepared = E.prepare(module, "loss", dict(dims))
    return module, prepared, E.weights(prepared, 0, None), E.inputs(prepared, 0, None)


def all_f32(module, prepared, grad: bool):
    """A realization naming every site the entry reaches (with `grad`, `loss.value_vjp`'s:
    the forward's sites, which the `.fwd` functions keep, and the reverse sweep's) and
    every parameter f32. Hyperparameters (f64 or nat values: `eps`) have no type to
    choose; a site the checker would refuse (a `.fwd` clone of an argument's unpacking)
    is left out."""
    from presk.analysis.realization import Realization
    from presk.analysis.sensitivity import reached
    from presk.dialects import core as C
    from presk.pipeline import differentiate
    if grad:
        module = module.clone()
        differentiate(module, ["loss"], "store")
    funcs = {f.sym_name.data: f for f in module.ops if isinstance(f, C.FuncOp)}

    def own(name, op):
        return op.results and "site" in op.attributes and \
            op.site.data.rpartition("/%")[0] == name

    known = {op.site.data for name, f in funcs.items() for op in f.body.block.ops
             if own(name, op)}
    sites = {}
    for name in reached(module, "loss.value_vjp" if grad else "loss"):
        for op in funcs[name].body.block.ops:
            if (op.results and "site" in op.attributes and op.site.data in known
                    and isinstance(op.results[0].type, (C.TensorAttr, C.ParamsAttr))):
                sites[op.site.data] = "f32"
    return Realization(entry="loss", sites=sites, params={f.path: "f32" for f in prepared.fields})


def with_fma(module, realization, grad: bool):
    """`realization` with every contraction `loss` reaches fused (with `grad`, the reverse
    sweep's too): its `fma` field (docs/artifacts.md)."""
    from dataclasses import replace

    from presk.analysis.sensitivity import contraction_sites
    from presk.pipeline import differentiate
    if grad:
        module = module.clone()
        differentiate(module, ["loss"], "store")
    sites = contraction_sites(module, "loss.value_vjp" if grad else "loss")
    return replace(realization, fma=tuple(sites))


@dataclass
class PreskSide:
    """The native runs of the forward and the gradient (results now, times on `timed`)."""

    runs: list[Any]
    label: str
    times: tuple[Any, Any] = (None, None)

    @property
    def results(self) -> tuple[dict, dict]:
        return tuple({k: (float(v) if np.ndim(v) == 0 else v) for k, v in r.result.items()}
                     for r in self.runs)  # type: ignore[return-value]

    @property
    def f64_left(self) -> list[str]:
        """The entry's f64 input buffers (what the realization left f64 at the entry)."""
        return [b.name for b in self.runs[1].entry.sig.inputs if b.element == "f64"]

    def timed(self, settings: Settings) -> None:
        self.times = tuple(time_it(r.entry.bind(r.call.inputs), settings)  # type: ignore
                           for r in self.runs)


def presk_side(module, prepared, params, values, label: str,
               realization: Callable[[bool], Any] | None = None) -> PreskSide:
    from presk.pipeline import run_native
    runs = [run_native(module, "loss", prepared.dims, params, values,
                       realization(grad) if realization else None, grad=grad)
            for grad in (False, True)]
    return PreskSide(runs, label)


# --------------------------------------------------------------------------------------
# Measuring and printing
# --------------------------------------------------------------------------------------

def _threads() -> str:
    """How Presk's native code uses the machine: large nests split among its cores (the
    default layout's `split`), everything else on one thread."""
    from presk.conversion.realize_to_kernel import workers
    n = workers()
    return ("1 thread" if n == 1 else
            f"contractions of 2M multiply-adds or more and other nests of 32k iterations or "
            f"more on {n} threads, the rest on 1")


def time_it(fn: Callable[[], object], settings: Settings):
    from presk.runtime import time_call
    return time_call(fn, repeats=settings.repeats, min_seconds=settings.min_seconds)


def show_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds:8.3f} s "


def show_ratio(peer: float, presk: float) -> str:
    r = peer / presk
    return f"{r:8.1f}×" if r >= 10 else f"{r:8.2f}×"


def difference(got, expected) -> float:
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    scale = np.max(np.abs(expected))
    diff = np.max(np.abs(got - expected))
    return float(diff / scale) if scale else float(diff)


def agreement(label: str, got: tuple[dict, dict], ref: tuple[dict, dict]) -> tuple[float, str]:
    """The largest per-tensor difference of (forward, gradient) results against ref, and
    which tensor it is."""
    worst, where = 0.0, ""
    for kind, mine, theirs in zip(("forward", "gradient"), got, ref):
        if set(mine) != set(theirs):
            raise SystemExit(f"bench/native.py: {label} gives {sorted(mine)}, torch f64 "
                             f"{sorted(theirs)}")
        for k in theirs:
            d = difference(mine[k], theirs[k])
            if d >= worst:
                worst, where = d, f"{kind} {k}"
    return worst, where


def check_all(rows: list[tuple[str, str, tuple[dict, dict]]], ref: tuple[dict, dict]) -> bool:
    print("  agreement with PyTorch f64, max |ours − torch f64| / max |torch f64| per tensor, "
          "the largest over the loss and every gradient:")
    ok = True
    for label, dtype, res in rows:
        d, where = agreement(label, res, ref)
        good = d <= TOL[dtype]
        ok &= good
        print(f"    {label:<30} {d:10.3e}   (bound {TOL[dtype]:g}) "
              f"{'ok       ' if good else 'DISAGREES'}  at {where}")
    return ok


def print_table(presk: PreskSide, peers: list[tuple[str, Any, Any]]) -> dict[str, tuple]:
    fwd, grad = presk.times
    print(f"  {'implementation':<34} {'forward/call':>12} {'peer/Presk':>10}   "
          f"{'gradient/call':>13} {'peer/Presk':>10}")
    print(f"  {presk.label:<34} {show_time(fwd.median):>12} "
          f"{'1':>9}×   {show_time(grad.median):>13} {'1':>9}×")
    ratios = {}
    for label, f, g in peers:
        print(f"  {label:<34} {show_time(f.median):>12} {show_ratio(f.median, fwd.median):>10}"
              f"   {show_time(g.median):>13} {show_ratio(g.median, grad.median):>10}")
        ratios[label] = (f.median / fwd.median, g.median / grad.median)
    print(f"  (medians of {fwd.repeats} samples each; peer/Presk > 1: Presk is faster)")
    return ratios


def peer_models(params, values) -> dict[str, Any]:
    x, y = values["batch.0"], values["batch.1"]
    models = {}
    for dt in ("f64", "f32"):
        models[f"torch {dt}"] = TorchModel(params, x, y, dt)
        models[f"numpy {dt}"] = NumpyModel(params, x, y, dt)
    return models


def time_peers(models: dict[str, Any], settings: Settings) -> list[tuple[str, Any, Any]]:
    """Times of torch (f32, f64 × its default thread count and 1) and numpy (f64, f32)."""
    import torch
    default = torch.get_num_threads()
    peers = []
    try:
        for dt in ("f32", "f64"):
            for n in (default, 1):
                torch.set_num_threads(n)
                f, g = models[f"torch {dt}"].timed(settings)
                peers.append((f"PyTorch eager {dt}, {n} thread{'s' if n > 1 else ''}", f, g))
    finally:
        torch.set_num_threads(default)
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    for dt in ("f64", "f32"):
        f, g = models[f"numpy {dt}"].timed(settings)
        peers.append((f"numpy {dt} (BLAS threads: {blas})", f, g))
    return peers


def header(what: str) -> None:
    import torch
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    print(f"\n== {what}")
    print(f"   torch {torch.__version__} CPU, default threads {torch.get_num_threads()}; "
          f"{os.cpu_count()} CPUs, load average {load} (other processes skew the times)")


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


# --------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------

def case_tutorial(settings: Settings) -> bool:
    header(f"tutorial: {TUTORIAL.relative_to(ROOT)}, entry loss at B = 4 (D = 4, L = 3), "
           "all-f64")
    module, prepared, params, values = load_entry(TUTORIAL, {"B": 4})
    models = peer_models(params, values)
    presk = presk_side(module, prepared, params, values, "Presk native (all-f64)")
    ok = check_all([("Presk native f64", "f64", presk.results),
                    ("numpy f64", "f64", models["numpy f64"].results()),
                    ("PyTorch eager f32", "f32", models["torch f32"].results()),
                    ("numpy f32", "f32", models["numpy f32"].results())],
                   models["torch f64"].results())
    if not ok:
        return False
    presk.timed(settings)
    ratios = print_table(presk, time_peers(models, settings))
    torch_rows = {k: v for k, v in ratios.items() if k.startswith("PyTorch")}
    for i, what in enumerate(("forward", "gradient")):
        best = min(torch_rows, key=lambda k: torch_rows[k][i])
        r = torch_rows[best][i]
        print(f"  goal ({what}): Presk ≥ {GOAL_TUTORIAL:g}× faster than PyTorch eager: "
              f"{verdict(r >= GOAL_TUTORIAL)} — {r:.1f}× against its fastest "
              f"configuration here ({best})")
    return True


def case_scaled(settings: Settings) -> bool:
    header(f"scaled: {SCALED.relative_to(ROOT)}, entry loss at B = 1024 (D = 256, L = 4), "
           "all-f32")
    module, prepared, params, values = load_entry(SCALED, {"B": 1024})
    reals = {g: all_f32(module, prepared, g) for g in (False, True)}
    models = peer_models(params, values)
    presk = presk_side(module, prepared, params, values, "Presk native (all-f32)",
                       reals.get)
    f64 = presk_side(module, prepared, params, values, "Presk native all-f64")
    print(f"  realization: forward {reals[False].summary()}, gradient "
          f"{reals[True].summary()} (every site the entry reaches, every parameter); f64 "
          f"left at the entry: {', '.join(presk.f64_left)} (presk types parameters, not "
          "the batch or the seed)")
    ok = check_all([("Presk native f32", "f32", presk.results),
                    ("numpy f64", "f64", models["numpy f64"].results()),
                    ("PyTorch eager f32", "f32", models["torch f32"].results()),
                    ("numpy f32", "f32", models["numpy f32"].results()),
                    ("Presk native f64", "f64", f64.results)],
                   models["torch f64"].results())
    if not ok:
        return False
    presk.timed(settings)
    peers = time_peers(models, settings)
    f64.timed(settings)
    ratios = print_table(presk, [(f64.label, *f64.times), *peers])
    f32_rows = {k: v for k, v in ratios.items() if k.startswith("PyTorch eager f32")}
    for i, what in enumerate(("forward", "gradient")):
        best = min(f32_rows, key=lambda k: f32_rows[k][i])
        times = 1 / f32_rows[best][i]
        print(f"  goal ({what}): Presk's time ≤ {GOAL_SCALED:g}× PyTorch eager f32's: "
              f"{verdict(times <= GOAL_SCALED)} — Presk takes {times:.2f}× the time of its "
              f"fastest configuration here ({best}); Presk: {_threads()}")
    return True


# Runs in a fresh process: record and compile the tutorial's entry, print the figures.
_COMPILE_SCRIPT = r"""
import json, sys, time
spawned = float(sys.argv[1]); started = time.time(); t0 = time.perf_counter()
from presk.analysis import entry as E
from presk.pipeline import entry_call, load_core
from presk.runtime.compile import native_program
t1 = time.perf_counter()
module, _ = load_core(sys.argv[2])
prepared = E.prepare(module, "loss", {"B": 4})
call = entry_call(module, "loss", prepared.dims, E.weights(prepared, 0, None),
                  E.inputs(prepared, 0, None), None, True, sys.argv[3] == "grad")
t2 = time.perf_counter()
program = native_program(call.pipeline.kernel)
entry = program.entry(call.host)
t3 = time.perf_counter()
json.dump({"compile": program.timings.total, "cached": program.cached, "imports": t1 - t0,
           "record": t2 - t1, "native_program": t3 - t2,
           "startup": started - spawned, "wall": time.time() - spawned}, sys.stdout)
"""


def compile_once(cache_dir: str, grad: bool) -> dict:
    env = {**os.environ, "PRESK_CACHE_DIR": cache_dir}
    env.pop("PRESK_CACHE", None)
    result = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, repr(time.time()),
                             str(TUTORIAL), "grad" if grad else "fwd"],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"bench/native.py: the compile subprocess failed:\n{result.stderr}")
    return json.loads(result.stdout)


def case_compile(settings: Settings) -> bool:
    n = settings.compile_runs
    print(f"\n== compile: {TUTORIAL.relative_to(ROOT)}, entry loss at B = 4, all-f64, "
          f"a fresh process per figure, median of {n}")
    print(f"  {'':<18} {'compile':>9} {'recording':>10} {'imports':>9} {'wall':>9}"
          f"  {'cache':<6} goal")
    ok = True
    for grad in (False, True):
        runs: dict[str, list[dict]] = {"cold": [], "warm": []}
        for _ in range(n):
            with tempfile.TemporaryDirectory(prefix="presk-bench-cache-") as d:
                runs["cold"].append(compile_once(d, grad))
                runs["warm"].append(compile_once(d, grad))
        for how, goal in (("cold", GOAL_COLD), ("warm", GOAL_WARM)):
            got = runs[how]
            med = {k: float(np.median([r[k] for r in got])) for k in got[0] if k != "cached"}
            hit = {r["cached"] for r in got}
            expected = {how == "warm"}
            cache = "hit" if hit == {True} else "miss" if hit == {False} else "mixed"
            met = med["compile"] <= goal
            label = f"{'gradient' if grad else 'forward'}, {how}"
            print(f"  {label:<18} {med['compile']:8.3f}s {med['record']:9.3f}s "
                  f"{med['imports']:8.3f}s {med['wall']:8.3f}s  {cache:<6} ≤ {goal:g} s: "
                  f"{verdict(met)}" + ("" if hit == expected else "  (unexpected cache state)"))
    print("  compile: native_program's timings.total (lowering, LLVM, codegen, load; on a "
          "hit, loading the object code); recording: the .psk file to PSK-Kernel; wall: "
          "from the spawn of the process to the callable entry (interpreter start, imports, "
          "recording, compile)")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke test)")
    parser.add_argument("--case", choices=["tutorial", "scaled", "compile", "all"],
                        default="all")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    settings = (Settings(repeats=3, min_seconds=0.03, compile_runs=1) if args.quick
                else Settings(repeats=7, min_seconds=0.3, compile_runs=3))
    started = time.perf_counter()
    ok = True
    if args.case in ("tutorial", "all"):
        ok &= case_tutorial(settings)
    if ok and args.case in ("scaled", "all"):
        ok &= case_scaled(settings)
    if ok and args.case in ("compile", "all"):
        ok &= case_compile(settings)
    print(f"\n(bench/native.py took {time.perf_counter() - started:.1f} s)")
    if not ok:
        print("bench/native.py: the implementations disagree (see above); no times printed "
              "for that case", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
