"""Optimizers and learning-rate schedules: the language's `optimizer` blocks, run on numpy.

`AdamW` and `SGD` follow `torch.optim.AdamW` and `torch.optim.SGD` (CPU, single-tensor
path, the one torch takes for CPU tensors) operation for operation, and a `Schedule`
is the learning-rate multiplier a PyTorch user gives `torch.optim.lr_scheduler.LambdaLR`
(its `__call__` is such a lambda). `docs/training.md` ("Optimizers and schedules") holds
the formulas and defaults; the per-element order of operations below is the spec a
native kernel replacing this module follows, so both compute the same bits.

Conventions shared by both optimizers:
- Parameters and gradients are numpy arrays keyed by parameter path (`blocks.proj.w`);
  `step` updates the parameters in place. All parameters step together: one step count.
- Step `t` (0-based: the number of updates done before this one) uses the learning rate
  `lr_at(t) = lr * schedule(t)`, computed in Python floats: LambdaLR's
  `base_lr * lmbda(last_epoch)`, with `scheduler.step()` called after each
  `optimizer.step()`.
- Per-step scalars are computed once per step in Python floats (IEEE double) exactly as
  torch's Python code computes them, then rounded to the parameter's dtype; every
  element-wise operation runs in the parameter's dtype (torch's opmath for float32 and
  float64). `a * b + c` is always two roundings, never a fused multiply-add: torch's CPU
  kernels for `lerp_`, `add_(…, alpha=…)` and `addcmul_` fuse, so an element may differ
  from torch's in its last bit; over 100 float64 steps on the tutorial's shapes the
  relative difference stays below 6e-16 (test/unit/test_optim.py).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

if TYPE_CHECKING:
    from ..frontend.program import OptimizerInfo

Arrays = dict[str, np.ndarray]

STEP_KEY = "step"


# ---- schedules ----

@dataclass(frozen=True)
class Schedule:
    """A learning-rate multiplier of the step `t` (0-based), given `total` steps and a
    `warmup` of W steps. The formulas are those of Hugging Face's
    `get_{constant,linear,cosine}_schedule_with_warmup`, the schedules PyTorch users build:

    - `constant`: 1.
    - warmup, for `linear` and `cosine` when t < W: `t / W` (0 at the first step).
    - after warmup, with `p = (t - W) / max(1, total - W)`:
      `linear`: `(total - t) / max(1, total - W)`;
      `cosine`: `0.5 * (1 + cos(π·p))`.
    - `linear` and `cosine` at t ≥ total: 0 (training is over; Hugging Face's cosine would
      rise again past its half cycle).

    An instance is a callable of the step, so `LambdaLR(torch_optimizer, schedule)`
    reproduces it.
    """

    kind: str
    total: int
    warmup: int = 0

    KINDS: ClassVar[tuple[str, ...]] = ("constant", "cosine", "linear")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown schedule `{self.kind}`: one of {', '.join(self.KINDS)}")
        if self.total < 0 or self.warmup < 0:
            raise ValueError(f"a schedule counts steps: total {self.total}, "
                             f"warmup {self.warmup} must be naturals")
        if self.kind == "constant" and self.warmup:
            raise ValueError("the constant schedule has no warmup")

    def __call__(self, step: int) -> float:
        if self.kind == "constant":
            return 1.0
        if step < self.warmup:
            return float(step) / float(self.warmup)
        if step >= self.total:
            return 0.0
        span = float(max(1, self.total - self.warmup))
        if self.kind == "linear":
            return float(self.total - step) / span
        return 0.5 * (1.0 + math.cos(math.pi * (float(step - self.warmup) / span)))


# ---- optimizers ----

@dataclass(eq=False)
class _Group:
    """The parameters of one dtype laid end to end, so that a step is a few vectorized
    operations over all of them rather than a few per tensor: every operation is
    element-wise, so the layout changes no bit. `views` reshape `p` to each parameter;
    the optimizer's per-path buffers are views of `bufs`."""

    paths: list[str]
    p: np.ndarray
    g: np.ndarray
    tmp: np.ndarray
    tmp2: np.ndarray
    views: dict[str, np.ndarray]
    segments: dict[str, slice]
    bufs: dict[str, np.ndarray]
    fresh: dict[str, list[str]]  # per buffer, the paths whose buffer does not exist yet


class Optimizer(ABC):
    """An optimizer over parameters keyed by path; its state is a step count and, per
    parameter, the buffers named in `BUFFERS`, created at a parameter's first step (as
    torch creates them). Subclasses give the per-step scalars and the update of a group."""

    BUFFERS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, lr: float, schedule: Schedule | None) -> None:
        _check(lr >= 0.0, f"the learning rate must be ≥ 0, not {lr}")
        self.lr = float(lr)
        self.schedule = schedule if schedule is not None else Schedule("constant", 0)
        self.steps = 0  # updates done
        self.buffers: dict[str, Arrays] = {name: {} for name in self.BUFFERS}
        self._layout: tuple | None = None
        self._groups: list[_Group] = []

    def lr_at(self, step: int) -> float:
        """The learning rate of the update that follows `step` updates."""
        return self.lr * self.schedule(step)

    def step(self, params: Arrays, grads: Arrays) -> None:
        """One update of every parameter in place, from its gradient."""
        _check_grads(params, grads)
        layout = tuple((k, v.shape, v.dtype) for k, v in params.items())
        if layout != self._layout:
            self._regroup(params, layout)
        for grp in self._groups:
            np.concatenate([params[k] for k in grp.paths], axis=None, out=grp.p)
            np.concatenate([grads[k] for k in grp.paths], axis=None, out=grp.g,
                           casting="same_kind")
        self.step_laid_out()
        for grp in self._groups:
            for path, view in grp.views.items():
                np.copyto(params[path], view)

    def lay_out(self, params: Arrays) -> list[_Group]:
        """Lay the parameters out in the groups' arrays (their values copied in) and return
        the groups: a caller that keeps its parameters as the groups' `views` and writes
        the gradient into `grad_views(grp)` then steps with `step_laid_out`, no copies."""
        layout = tuple((k, v.shape, v.dtype) for k, v in params.items())
        if layout != self._layout:
            self._regroup(params, layout)
        for grp in self._groups:
            np.concatenate([params[k] for k in grp.paths], axis=None, out=grp.p)
        return self._groups

    @staticmethod
    def grad_views(grp: _Group) -> Arrays:
        """The group's gradient array as one view per parameter, shaped as it."""
        return {k: grp.g[grp.segments[k]].reshape(grp.views[k].shape) for k in grp.paths}

    def step_laid_out(self) -> None:
        """One update of the groups' parameters from the gradients already in their
        arrays (`lay_out`)."""
        scalars = self._scalars(self.lr_at(self.steps), self.steps + 1)
        for grp in self._groups:
            kind = grp.p.dtype.type
            self._update(grp, {k: kind(v) for k, v in scalars.items()})
        self.steps += 1

    def _regroup(self, params: Arrays, layout: tuple) -> None:
        """Lay the parameters out by dtype, moving the existing buffers into the groups."""
        by_dtype: dict[np.dtype, list[str]] = {}
        for path, p in params.items():
            if not np.issubdtype(p.dtype, np.floating):
                raise ValueError(f"parameter `{path}` is {p.dtype}, not a float")
            by_dtype.setdefault(p.dtype, []).append(path)
        self._groups = [self._group(dtype, paths, params) for dtype, paths in by_dtype.items()]
        self._layout = layout

    def _group(self, dtype: np.dtype, paths: list[str], params: Arrays) -> _Group:
        sizes = [params[k].size for k in paths]
        ends = np.cumsum([0, *sizes]).tolist()
        segments = {k: slice(a, b) for k, a, b in zip(paths, ends, ends[1:])}
        n = ends[-1]
        from ..runtime.buffers import aligned_empty

        def empty() -> np.ndarray:  # 64-byte aligned, as native buffers: the objective
            return aligned_empty(n * dtype.itemsize).view(dtype)  # reads p, writes g

        p = empty()
        grp = _Group(paths, p, empty(), empty(), empty(),
                     {k: p[segments[k]].reshape(params[k].shape) for k in paths}, segments,
                     {}, {})
        for name in self.BUFFERS:
            flat = grp.bufs[name] = empty()
            flat[...] = 0
            grp.fresh[name] = []
            for k in paths:
                old = self.buffers[name].get(k)
                view = flat[segments[k]].reshape(params[k].shape)
                if old is None:
                    grp.fresh[name].append(k)
                    continue
                if old.shape != view.shape:
                    raise ValueError(f"optimizer state `{name}.{k}` has shape {old.shape}, "
                                     f"the parameter {view.shape}")
                view[...] = old
                self.buffers[name][k] = view
        return grp

    def _made(self, grp: _Group, name: str) -> None:
        """The group's buffers `name` exist from now on: its fresh ones join the state."""
        for path in grp.fresh[name]:
            shape = grp.views[path].shape
            self.buffers[name][path] = grp.bufs[name][grp.segments[path]].reshape(shape)
        grp.fresh[name].clear()

    @abstractmethod
    def _scalars(self, lr: float, t: int) -> dict[str, float]:
        """The step's scalars in Python floats, as torch's Python code computes them;
        `t` counts this update (1 at the first)."""

    @abstractmethod
    def _update(self, grp: _Group, s: dict[str, np.floating]) -> None:
        """Update a group's parameters `grp.p` from `grp.g` in place; `s` holds the
        scalars in the group's dtype."""

    def state(self) -> Arrays:
        """A copy of the state for a checkpoint: `step` (an int64 scalar) and one array
        per existing buffer and parameter, keyed `<buffer>.<path>` (`exp_avg.blocks.proj.w`)."""
        out: Arrays = {STEP_KEY: np.array(self.steps, dtype=np.int64)}
        for name, bufs in self.buffers.items():
            for path, buf in bufs.items():
                out[f"{name}.{path}"] = buf.copy()
        return out

    def load_state(self, d: Arrays) -> None:
        """Replace the state by one `state()` gave; continuing then computes the same bits
        as an optimizer that never stopped."""
        if STEP_KEY not in d:
            raise ValueError(f"optimizer state has no `{STEP_KEY}`")
        step = np.asarray(d[STEP_KEY])
        if step.shape != () or not float(step).is_integer() or float(step) < 0:
            raise ValueError(f"optimizer state `{STEP_KEY}` is not a natural: {step}")
        buffers: dict[str, Arrays] = {name: {} for name in self.BUFFERS}
        for key, value in d.items():
            if key == STEP_KEY:
                continue
            name, dot, path = key.partition(".")
            if name not in buffers or not dot or not path:
                raise ValueError(f"unknown optimizer state `{key}` for {type(self).__name__}")
            buffers[name][path] = np.array(value, copy=True)
        self.steps = int(step)
        self.buffers = buffers
        self._layout, self._groups = None, []


class AdamW(Optimizer):
    """torch.optim.AdamW (amsgrad, maximize off). Per step, host scalars in Python floats
    (t counts this update, lr = lr_at(t − 1)):

        decay = 1 − lr·weight_decay           w1 = 1 − beta1       w2 = 1 − beta2
        c1 = 1 − beta1**t    c2 = 1 − beta2**t    c2s = c2**0.5    neg_step = −(lr / c1)

    then, rounded to the parameter's dtype (and 1 − w1 in that dtype), per element, each
    operation one rounding, in this order:

        p ← p · decay                          (skipped when weight_decay = 0)
        m ← m + w1 · (g − m)                   (|w1| < 0.5; else m ← g − (g − m) · (1 − w1))
        v ← v · beta2
        v ← v + (w2 · g) · g
        d ← sqrt(v) / c2s + eps
        p ← p + (neg_step · m) / d

    m (`exp_avg`) and v (`exp_avg_sq`) start at 0.
    """

    BUFFERS = ("exp_avg", "exp_avg_sq")

    def __init__(self, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                 eps: float = 1e-8, weight_decay: float = 1e-2,
                 schedule: Schedule | None = None) -> None:
        super().__init__(lr, schedule)
        for name, beta in (("beta1", beta1), ("beta2", beta2)):
            _check(0.0 <= beta < 1.0, f"{name} must be in [0, 1), not {beta}")
        _check(eps > 0.0, f"eps must be > 0, not {eps}")
        _check(weight_decay >= 0.0, f"weight_decay must be ≥ 0, not {weight_decay}")
        self.beta1, self.beta2 = float(beta1), float(beta2)
        self.eps, self.weight_decay = float(eps), float(weight_decay)

    def _scalars(self, lr: float, t: int) -> dict[str, float]:
        step = float(t)
        return {
            "decay": 1 - lr * self.weight_decay,
            "w1": 1 - self.beta1,
            "beta2": self.beta2,
            "w2": 1 - self.beta2,
            "c2s": (1 - self.beta2 ** step) ** 0.5,
            "eps": self.eps,
            "neg_step": -(lr / (1 - self.beta1 ** step)),
        }

    def _update(self, grp: _Group, s: dict[str, np.floating]) -> None:
        p, g, tmp, step = grp.p, grp.g, grp.tmp, grp.tmp2
        m, v = grp.bufs["exp_avg"], grp.bufs["exp_avg_sq"]
        for name in self.BUFFERS:  # a fresh buffer is zeros, as allocated
            self._made(grp, name)
        if self.weight_decay != 0:
            np.multiply(p, s["decay"], out=p)
        _lerp(m, g, s["w1"], tmp)
        np.multiply(v, s["beta2"], out=v)
        np.multiply(g, s["w2"], out=tmp)
        np.multiply(tmp, g, out=tmp)
        np.add(v, tmp, out=v)
        np.sqrt(v, out=tmp)
        np.divide(tmp, s["c2s"], out=tmp)
        np.add(tmp, s["eps"], out=tmp)
        np.multiply(m, s["neg_step"], out=step)
        np.divide(step, tmp, out=step)
        np.add(p, step, out=p)


class SGD(Optimizer):
    """torch.optim.SGD (nesterov, maximize off). Per step, host scalars in Python floats
    (lr = lr_at(t − 1)): `neg_lr = −lr`, `keep = 1 − dampening`; then, rounded to the
    parameter's dtype, per element, each operation one rounding, in this order:

        e ← g + weight_decay · p               (e ← g when weight_decay = 0)
        b ← e                                  (momentum ≠ 0, the parameter's first step)
        b ← b · momentum;  b ← b + keep · e    (momentum ≠ 0, later steps)
        e ← b                                  (momentum ≠ 0)
        p ← p + neg_lr · e

    The first step copies the gradient into the buffer (`momentum`) without dampening,
    as torch does.
    """

    BUFFERS = ("momentum",)

    def __init__(self, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, schedule: Schedule | None = None) -> None:
        super().__init__(lr, schedule)
        _check(momentum >= 0.0, f"momentum must be ≥ 0, not {momentum}")
        _check(0.0 <= dampening <= 1.0, f"dampening must be in [0, 1], not {dampening}")
        _check(weight_decay >= 0.0, f"weight_decay must be ≥ 0, not {weight_decay}")
        self.momentum, self.dampening = float(momentum), float(dampening)
        self.weight_decay = float(weight_decay)

    def _scalars(self, lr: float, t: int) -> dict[str, float]:
        return {"wd": self.weight_decay, "momentum": self.momentum,
                "keep": 1 - self.dampening, "neg_lr": -lr}

    def _update(self, grp: _Group, s: dict[str, np.floating]) -> None:
        p, e, tmp = grp.p, grp.g, grp.tmp
        if self.weight_decay != 0:
            np.multiply(p, s["wd"], out=tmp)
            np.add(e, tmp, out=e)
        if self.momentum != 0:
            buf = grp.bufs["momentum"]
            np.multiply(buf, s["momentum"], out=buf)
            np.multiply(e, s["keep"], out=tmp)
            np.add(buf, tmp, out=buf)
            for path in grp.fresh["momentum"]:  # a first step: the buffer is the gradient
                buf[grp.segments[path]] = e[grp.segments[path]]
            self._made(grp, "momentum")
            e = buf
        np.multiply(e, s["neg_lr"], out=tmp)
        np.add(p, tmp, out=p)


def _lerp(m: np.ndarray, g: np.ndarray, w: np.floating, tmp: np.ndarray) -> None:
    """m ← lerp(m, g, w) in place, in torch's two forms (better accuracy near each end)."""
    np.subtract(g, m, out=tmp)
    if abs(w) < 0.5:
        np.multiply(tmp, w, out=tmp)
        np.add(m, tmp, out=m)
    else:
        np.multiply(tmp, type(w)(1) - w, out=tmp)
        np.subtract(g, tmp, out=m)


def _check_grads(params: Arrays, grads: Arrays) -> None:
    """Refuse, before any update, gradients that do not match the parameters."""
    if params.keys() != grads.keys():
        differ = sorted(params.keys() ^ grads.keys())
        raise ValueError("parameters and gradients differ in paths: " + ", ".join(differ))
    for path, p in params.items():
        if grads[path].shape != p.shape:
            raise ValueError(f"the gradient of `{path}` has shape {grads[path].shape}, "
                             f"the parameter {p.shape}")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def from_info(info: "OptimizerInfo", total_steps: int) -> Optimizer:
    """The optimizer an elaborated `optimizer` block describes, for a run of `total_steps`
    updates (the schedule's horizon)."""
    schedule = Schedule(info.schedule, total_steps, info.schedule_args.get("warmup", 0))
    v = info.values
    if info.kind == "adamw":
        return AdamW(v["lr"], v["beta1"], v["beta2"], v["eps"], v["weight_decay"], schedule)
    if info.kind == "sgd":
        return SGD(v["lr"], v["momentum"], v["dampening"], v["weight_decay"], schedule)
    raise ValueError(f"unknown optimizer kind `{info.kind}`")
