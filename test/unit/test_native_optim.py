"""The optimizers' native update (presk/train/native_optim.py) computes numpy's bits
(presk/train/optim.py, itself checked against torch.optim): every form of AdamW (weight
decay on or off, both forms of torch's lerp) and SGD (plain, momentum, dampening, weight
decay), f64 and f32, over 60 steps of a schedule; a state saved mid-way and loaded into a
new native optimizer continues to the same bits."""

from __future__ import annotations

import numpy as np
import pytest

from presk.train.native_optim import NativeAdamW, NativeSGD
from presk.train.optim import SGD, AdamW, Schedule

SHAPES = {"blocks.proj.w": (3, 4, 4), "final.γ": (4,), "blocks.norm.γ": (3, 4)}
CASES = [
    ("adamw", dict(lr=0.01, weight_decay=0.01)),
    ("adamw", dict(lr=0.01, weight_decay=0.0)),
    ("adamw", dict(lr=0.01, beta1=0.3, weight_decay=0.1)),  # lerp's other form
    ("sgd", dict(lr=0.05)),
    ("sgd", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
    ("sgd", dict(lr=0.05, momentum=0.9, dampening=0.5)),
]


def _pair(kind: str, kw: dict):
    schedule = Schedule("cosine", 60, 10)
    if kind == "adamw":
        return AdamW(**kw, schedule=schedule), NativeAdamW(**kw, schedule=schedule)
    return SGD(**kw, schedule=schedule), NativeSGD(**kw, schedule=schedule)


def _same(a: dict, b: dict) -> bool:
    return all(a[k].tobytes() == b[k].tobytes() for k in a)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind, kw", CASES)
def test_native_update_has_numpys_bits(kind: str, kw: dict, dtype) -> None:
    rng = np.random.default_rng(len(kw))
    reference, native = _pair(kind, kw)
    p_ref = {k: rng.standard_normal(s).astype(dtype) for k, s in SHAPES.items()}
    p_nat = {k: v.copy() for k, v in p_ref.items()}
    native.prepare(p_nat)  # compiled before the first step
    resumed = None
    for step in range(60):
        grads = {k: rng.standard_normal(s).astype(dtype) for k, s in SHAPES.items()}
        reference.step(p_ref, {k: v.copy() for k, v in grads.items()})
        native.step(p_nat, {k: v.copy() for k, v in grads.items()})
        assert _same(p_ref, p_nat), step
        if step == 30:  # a checkpoint: a new native optimizer from the state
            resumed = _pair(kind, kw)[1]
            resumed.load_state(native.state())
            native = resumed
    assert resumed is not None and _same(reference.state(), native.state())


@pytest.mark.parametrize("kind, kw", [CASES[0], CASES[4]])
def test_a_large_group_split_over_the_pool_has_numpys_bits(kind: str, kw: dict,
                                                           monkeypatch) -> None:
    """A group of ≥ 2¹⁵ elements updates in ranges on the worker pool (one per worker,
    PRESK_THREADS = 3 here: an odd cut, starts a multiple of 16): the same bits."""
    from presk.runtime import pool
    from presk.train import native_optim
    if not pool.available():
        pytest.skip("no worker pool (no C compiler)")
    monkeypatch.setenv("PRESK_THREADS", "3")
    shapes = {"w": (native_optim.SPLIT_ELEMENTS + 37,), "b": (5,)}
    n = sum(int(np.prod(s)) for s in shapes.values())
    assert native_optim.update_parts(n) == 3
    assert native_optim._ranges(n, 3)[-1][1] == n
    assert all(a % native_optim.ALIGN == 0 for a, _ in native_optim._ranges(n, 3))
    rng = np.random.default_rng(7)
    reference, native = _pair(kind, kw)
    p_ref = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    p_nat = {k: v.copy() for k, v in p_ref.items()}
    for step in range(3):
        grads = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        reference.step(p_ref, {k: v.copy() for k, v in grads.items()})
        native.step(p_nat, {k: v.copy() for k, v in grads.items()})
        assert _same(p_ref, p_nat), step
