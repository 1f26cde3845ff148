"""The optimizers and schedules of presk/train/optim.py against torch.optim.

Each trajectory runs 100 steps on random parameters of the tutorial tower's shapes (its
76 reals) with seeded random gradients, once with our optimizer and once with
`torch.optim.AdamW`/`SGD` (`foreach=False`: the single-tensor path torch takes on CPU)
driven by `LambdaLR` with the schedule written here from its formula. After every step
each tensor's difference, max |ours − torch| / max |torch|, stays below 1e-10 in
float64; it is not 0 because torch's CPU kernels fuse multiply-adds and ours do not.

Run with `-s` to see the largest difference per case.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import safetensors.numpy
import torch

from presk.frontend.elaborate import elaborate
from presk.frontend.program import flatten
from presk.frontend.training import OPTIMIZERS
from presk.train.optim import SGD, AdamW, Optimizer, Schedule, from_info

ROOT = Path(__file__).resolve().parents[2]
STEPS = 100
BOUND = 1e-10


@pytest.fixture(scope="module")
def shapes() -> dict[str, tuple[int, ...]]:
    """The tutorial tower's parameter paths and shapes."""
    run = elaborate(str(ROOT / "tutorial" / "07_train.psk")).main.trainings["run"]
    out = {path: tuple(int(a.size) for a in t.axes) for path, t in flatten(run.model)}
    assert sum(math.prod(s) for s in out.values()) == 76
    return out


def hf_factor(kind: str, total: int, warmup: int) -> Callable[[int], float]:
    """The schedules as a PyTorch user writes them for LambdaLR (Hugging Face's
    get_*_schedule_with_warmup, at 0 once the run is over)."""
    def f(t: int) -> float:
        if kind == "constant":
            return 1.0
        if t < warmup:
            return t / warmup
        if t >= total:
            return 0.0
        if kind == "linear":
            return (total - t) / max(1, total - warmup)
        progress = (t - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return f


def problem(shapes, seed: int, dtype=np.float64):
    rng = np.random.default_rng(seed)
    p0 = {k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}
    grads = [{k: rng.standard_normal(s).astype(dtype) for k, s in shapes.items()}
             for _ in range(STEPS)]
    return p0, grads


def copy(d: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.copy() for k, v in d.items()}


# kind, our constructor's keywords (torch's take the same but for the betas), schedule
CASES = [
    ("adamw", {}, ("constant", 0)),
    ("adamw", {"lr": 0.01, "weight_decay": 0.1}, ("cosine", 20)),
    ("adamw", {"lr": 0.05, "weight_decay": 0.0, "beta2": 0.99, "eps": 1e-6}, ("linear", 10)),
    ("adamw", {"lr": 0.01, "beta1": 0.3}, ("cosine", 0)),  # lerp's large-weight form
    ("sgd", {"lr": 0.05}, ("constant", 0)),
    ("sgd", {"lr": 0.05, "weight_decay": 0.01}, ("linear", 5)),
    ("sgd", {"lr": 0.01, "momentum": 0.9}, ("cosine", 20)),
    ("sgd", {"lr": 0.01, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
     ("linear", 10)),
]


def ours(kind: str, kw: dict, schedule: tuple[str, int]) -> Optimizer:
    s = Schedule(schedule[0], STEPS, schedule[1])
    return AdamW(**kw, schedule=s) if kind == "adamw" else SGD(**kw, schedule=s)


def theirs(kind: str, kw: dict, tensors: list[torch.Tensor]) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(tensors, **kw, foreach=False)
    kw = dict(kw)
    betas = (kw.pop("beta1", 0.9), kw.pop("beta2", 0.999))
    return torch.optim.AdamW(tensors, **kw, betas=betas, foreach=False)


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("dtype,bound", [(np.float64, BOUND), (np.float32, 1e-5)])
@pytest.mark.parametrize("kind,kw,schedule", CASES)
def test_trajectory_equals_torch(shapes, kind, kw, schedule, dtype, bound):
    p0, grads = problem(shapes, seed=len(kw) + 7 * schedule[1])
    p0 = {k: v.astype(dtype) for k, v in p0.items()}
    params = copy(p0)
    opt = ours(kind, kw, schedule)
    tensors = {k: torch.tensor(v, requires_grad=True) for k, v in p0.items()}
    topt = theirs(kind, kw, list(tensors.values()))
    sched = torch.optim.lr_scheduler.LambdaLR(topt, hf_factor(schedule[0], STEPS, schedule[1]))
    worst = 0.0
    for t, g in enumerate(grads):
        assert opt.lr_at(t) == sched.get_last_lr()[0]
        opt.step(params, {k: v.astype(dtype) for k, v in g.items()})
        for k, x in tensors.items():
            x.grad = torch.tensor(g[k].astype(dtype))
        topt.step()
        sched.step()
        for k, x in tensors.items():
            assert params[k].dtype == dtype
            worst = max(worst, relative(params[k], x.detach().numpy()))
        assert worst <= bound, f"step {t + 1}: {worst:.3e}"
    # the buffers are torch's too, under the documented keys
    state = opt.state()
    assert int(state["step"]) == STEPS
    for k, x in tensors.items():
        for name, value in topt.state[x].items():
            if name != "step":
                key = "momentum" if name == "momentum_buffer" else name
                assert relative(state[f"{key}.{k}"], value.numpy()) <= bound
    print(f"\n{kind} {kw} {schedule} {np.dtype(dtype).name}: max relative difference "
          f"{worst:.3e}")


@pytest.mark.parametrize("kind,kw,schedule", [CASES[1], CASES[3], CASES[7]])
@pytest.mark.parametrize("stop", [0, 1, 37])
def test_resume_gives_the_same_bits(shapes, kind, kw, schedule, stop):
    p0, grads = problem(shapes, seed=11)
    straight = copy(p0)
    opt = ours(kind, kw, schedule)
    for g in grads:
        opt.step(straight, g)

    params = copy(p0)
    first = ours(kind, kw, schedule)
    for g in grads[:stop]:
        first.step(params, g)
    saved = safetensors.numpy.save(first.state())  # as a checkpoint stores it
    params = {k: np.array(v) for k, v in safetensors.numpy.load(
        safetensors.numpy.save(params)).items()}
    second = ours(kind, kw, schedule)
    second.load_state(safetensors.numpy.load(saved))
    assert second.steps == stop
    for g in grads[stop:]:
        second.step(params, g)
    for k in p0:
        assert np.array_equal(params[k], straight[k])
    after, before = second.state(), opt.state()
    assert after.keys() == before.keys()
    assert all(np.array_equal(after[k], before[k]) for k in after)


def test_state_keys(shapes):
    p0, grads = problem(shapes, seed=3)
    sgd = SGD(lr=0.1, momentum=0.9)
    assert set(sgd.state()) == {"step"}
    params = copy(p0)
    sgd.step(params, grads[0])
    assert set(sgd.state()) == {"step"} | {f"momentum.{k}" for k in shapes}
    assert np.array_equal(sgd.state()["momentum.final.γ"], grads[0]["final.γ"])
    adam = AdamW()
    adam.step(params, grads[0])
    assert set(adam.state()) == ({"step"} | {f"exp_avg.{k}" for k in shapes}
                                 | {f"exp_avg_sq.{k}" for k in shapes})
    assert adam.state()["step"].dtype == np.int64
    plain = SGD(lr=0.1)  # no momentum: no buffers
    plain.step(params, grads[1])
    assert set(plain.state()) == {"step"}


@pytest.mark.parametrize("kind", ["constant", "cosine", "linear"])
@pytest.mark.parametrize("total,warmup", [(100, 0), (100, 1), (100, 20), (10, 30), (1, 0)])
def test_schedule_values(kind, total, warmup):
    if kind == "constant" and warmup:
        with pytest.raises(ValueError, match="no warmup"):
            Schedule(kind, total, warmup)
        return
    s = Schedule(kind, total, warmup)
    f = hf_factor(kind, total, warmup)
    values = [s(t) for t in range(total + 5)]
    assert values == [f(t) for t in range(total + 5)]
    assert all(0.0 <= v <= 1.0 for v in values)
    if kind != "constant" and warmup < total:
        assert values[warmup] == 1.0
        assert values[total] == 0.0


def test_schedule_landmarks():
    cos = Schedule("cosine", 120, 20)
    assert [cos(t) for t in (0, 10, 20, 70, 120)] == [0.0, 0.5, 1.0, 0.5 * (1 + math.cos(
        math.pi * 0.5)), 0.0]
    lin = Schedule("linear", 120, 20)
    assert [lin(t) for t in (0, 10, 20, 70, 119, 120)] == [0.0, 0.5, 1.0, 0.5, 0.01, 0.0]
    assert AdamW(lr=0.01, schedule=lin).lr_at(70) == 0.01 * 0.5


def test_defaults_are_torchs():
    adam = torch.optim.AdamW([torch.zeros(1)]).defaults
    ours_ = AdamW()
    assert (ours_.lr, (ours_.beta1, ours_.beta2), ours_.eps, ours_.weight_decay) == (
        adam["lr"], adam["betas"], adam["eps"], adam["weight_decay"])
    sgd = torch.optim.SGD([torch.zeros(1)]).defaults
    mine = SGD()
    assert (mine.lr, mine.momentum, mine.dampening, mine.weight_decay) == (
        sgd["lr"], sgd["momentum"], sgd["dampening"], sgd["weight_decay"])
    assert OPTIMIZERS["adamw"] == {"lr": adam["lr"], "beta1": adam["betas"][0],
                                   "beta2": adam["betas"][1], "eps": adam["eps"],
                                   "weight_decay": adam["weight_decay"]}
    assert OPTIMIZERS["sgd"] == {k: sgd[k] for k in ("lr", "momentum", "dampening",
                                                     "weight_decay")}
    assert ours_.schedule(12345) == 1.0  # no schedule: constant


def test_from_info_reads_the_tutorial():
    run = elaborate(str(ROOT / "tutorial" / "07_train.psk")).main.trainings["run"]
    opt = from_info(run.optimizer, total_steps=250)
    assert isinstance(opt, AdamW)
    assert (opt.lr, opt.beta1, opt.beta2, opt.eps, opt.weight_decay) == (
        0.01, 0.9, 0.999, 1e-8, 0.0)
    assert opt.schedule == Schedule("cosine", 250, 20)


def test_from_info_sgd(tmp_path):
    (tmp_path / "s.psk").write_text(
        "optimizer fast : sgd { lr : f64 = 0.1  momentum : f64 = 0.9 "
        "schedule : linear(warmup = 3) }\n")
    info = elaborate(str(tmp_path / "s.psk")).main.optimizers["fast"]
    opt = from_info(info, total_steps=10)
    assert isinstance(opt, SGD)
    assert (opt.lr, opt.momentum, opt.dampening, opt.weight_decay) == (0.1, 0.9, 0.0, 0.0)
    assert opt.schedule == Schedule("linear", 10, 3)


def test_mixed_dtypes_step_each_in_its_own(shapes):
    p0, grads = problem(shapes, seed=5)
    mixed = {k: v.astype(np.float32 if k.startswith("final") else np.float64)  # copies
             for k, v in p0.items()}
    opt = AdamW(lr=0.01)
    for g in grads[:3]:
        opt.step(mixed, g)
    for k, v in p0.items():
        alone = {k: v.astype(mixed[k].dtype)}
        solo = AdamW(lr=0.01)
        for g in grads[:3]:
            solo.step(alone, {k: g[k].astype(mixed[k].dtype)})
        assert mixed[k].dtype == alone[k].dtype
        assert np.array_equal(mixed[k], alone[k])


def test_groups_are_aligned_and_moments_start_at_zero(shapes):
    """A group's arrays (parameters, gradient, moments) start on 64-byte boundaries, as the
    native code's own buffers do (the objective reads the parameters and writes the
    gradient there: an unaligned base splits vector loads across cache lines), and a fresh
    moment is zeros."""
    p0, _ = problem(shapes, seed=5)
    for dtype in (np.float64, np.float32):
        (grp,) = AdamW(lr=0.01).lay_out({k: v.astype(dtype) for k, v in p0.items()})
        for a in (grp.p, grp.g, *grp.bufs.values()):
            assert a.ctypes.data % 64 == 0 and a.dtype == dtype and a.size == grp.p.size
        assert all(not b.any() for b in grp.bufs.values())
        assert all(np.array_equal(grp.views[k], p0[k].astype(dtype)) for k in p0)


def test_refusals(shapes):
    p0, grads = problem(shapes, seed=2)
    opt = AdamW()
    params = copy(p0)
    with pytest.raises(ValueError, match="differ in paths: final.γ"):
        opt.step(params, {k: v for k, v in grads[0].items() if k != "final.γ"})
    with pytest.raises(ValueError, match="shape"):
        opt.step(params, {**grads[0], "final.γ": np.zeros(5)})
    assert all(np.array_equal(params[k], p0[k]) for k in p0) and opt.steps == 0
    with pytest.raises(ValueError, match="no `step`"):
        opt.load_state({})
    with pytest.raises(ValueError, match="unknown optimizer state `momentum.final.γ`"):
        opt.load_state({"step": np.array(1), "momentum.final.γ": np.zeros(4)})
    with pytest.raises(ValueError, match="not a natural"):
        opt.load_state({"step": np.array(-1)})
    opt.load_state({"step": np.array(1), "exp_avg.final.γ": np.zeros(5)})
    with pytest.raises(ValueError, match="shape"):
        opt.step(params, grads[0])
    for bad in ({"beta1": 1.0}, {"beta2": -0.1}, {"eps": -1.0}, {"lr": -1.0},
                {"weight_decay": -1.0}):
        with pytest.raises(ValueError):
            AdamW(**bad)
    with pytest.raises(ValueError):
        SGD(momentum=-0.5)
    with pytest.raises(ValueError, match="unknown schedule"):
        Schedule("step", 10)


@pytest.mark.parametrize("kind,kw,schedule", [CASES[1], CASES[7]])
def test_new_layout_mid_run_keeps_the_state(shapes, kind, kw, schedule):
    """Parameters handed in another order (or as new arrays) regroup without losing a bit."""
    p0, grads = problem(shapes, seed=13)
    straight, moved = copy(p0), copy(p0)
    a, b = ours(kind, kw, schedule), ours(kind, kw, schedule)
    for t, g in enumerate(grads[:20]):
        a.step(straight, g)
        if t == 10:
            moved = {k: moved[k].copy() for k in reversed(list(moved))}
        b.step(moved, g)
    assert all(np.array_equal(straight[k], moved[k]) for k in p0)
    sa, sb = a.state(), b.state()
    assert sa.keys() == sb.keys() and all(np.array_equal(sa[k], sb[k]) for k in sa)
