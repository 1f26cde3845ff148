"""presk.torch.function: a Presk entry as a torch.autograd.Function. torch's gradcheck (f64,
finite differences of the native value against the native vjp) passes on the tutorial's
loss and on a tensor-result entry (whose backward takes the incoming cotangent); and 100
steps of torch.optim.AdamW with LambdaLR over the op follow `presk train`'s trajectory
(presk.train.loop.Trainer, the same weights, batches and schedule) to 1e-10 relative."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import presk
import presk.torch as ptorch
from presk.datafile import read_header, read_samples
from presk.train.data import epoch_order
from presk.train.optim import Schedule
from programs import ROOT, TRAIN

STEPS, B, SEED, BOUND = 100, 8, 3, 1e-10  # the tutorial's batch size and shuffle seed

PREDICT = """\
import "06_tower.psk" as t
dim B

fn predict(θ : params t.Tower, x : ℝ[batch: B, model: 4]) -> ℝ[batch: B, model: 4] =
  t.Tower.apply(θ, x)
"""


@pytest.fixture(scope="module")
def prog() -> presk.Program:
    return presk.load(TRAIN)


def leaves(params: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {p: torch.nn.Parameter(torch.from_numpy(v.copy())) for p, v in params.items()}


@pytest.mark.slow
def test_gradcheck_on_the_tutorial_loss(prog) -> None:
    op = ptorch.function(prog, "loss", B=4)
    params = prog.init("loss", B=4)
    (batch,) = prog.sample_inputs("loss", B=4)
    xy = tuple(torch.from_numpy(a) for a in batch)
    paths = op.paths
    tensors = tuple(torch.from_numpy(params[p].copy()).requires_grad_() for p in paths)
    assert torch.autograd.gradcheck(lambda *ts: op(dict(zip(paths, ts)), xy), tensors,
                                    eps=1e-6, atol=1e-7, rtol=1e-6)


def test_gradcheck_on_a_tensor_result(tmp_path) -> None:
    """`predict` returns ℝ[B, 4]: its backward seeds value_vjp with torch's cotangent."""
    for p in (ROOT / "tutorial").glob("0[1-6]_*.psk"):
        shutil.copy(p, tmp_path / p.name)
    (tmp_path / "predict.psk").write_text(PREDICT)
    prog = presk.load(tmp_path / "predict.psk")
    op = ptorch.function(prog, "predict", B=3)
    assert not op.scalar
    params = prog.init("predict", B=3)
    (x,) = prog.sample_inputs("predict", B=3)
    paths = op.paths
    tensors = tuple(torch.from_numpy(params[p].copy()).requires_grad_() for p in paths)
    assert torch.autograd.gradcheck(lambda *ts: op(dict(zip(paths, ts)), torch.from_numpy(x)),
                                    tensors, eps=1e-6, atol=1e-7, rtol=1e-6)


def test_the_op_takes_an_nn_module_and_refuses_wrong_trees(prog, tmp_path, monkeypatch
                                                           ) -> None:
    """The PyTorch export's Tower (its parameter names are Presk's paths) is a parameter
    tree the op takes: the gradient lands in its parameters, the native gradient's bits."""
    import importlib
    import sys

    from presk.emit.pytorch import pytorch_sources
    for name, text in pytorch_sources(prog.elaborated).items():
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    tower = importlib.import_module("_06_tower").Tower(dtype=torch.float64)
    for n in ("_01_linear", "_02_norm", "_06_tower", "_07_train"):
        sys.modules.pop(n, None)
    weights = prog.init("loss", B=4)
    tower.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    op = ptorch.function(prog, "loss", B=4)
    (batch,) = prog.sample_inputs("loss", B=4)
    xy = tuple(torch.from_numpy(a) for a in batch)
    loss = op(tower, xy)
    loss.backward()
    value, grads = prog.compile("loss", B=4, grad=True)(weights, batch)
    assert loss.item() == value
    named = dict(tower.named_parameters())
    assert all(named[p].grad.numpy().tobytes() == g.tobytes() for p, g in grads.items())
    params = leaves(weights)
    with pytest.raises(presk.PreskError, match="no parameter `final.γ`"):
        op({k: v for k, v in params.items() if k != "final.γ"}, xy)
    with pytest.raises(presk.PreskError, match="`extra` is no parameter"):
        op({**params, "extra": params["final.γ"]}, xy)


def batches(data: Path, steps: int):
    """The documented batch order (docs/training.md): epoch e reads epoch_order(count,
    seed, e), B at a time."""
    header = read_header(data)
    per_epoch = header.count // B
    for t in range(steps):
        epoch, i = divmod(t, per_epoch)
        order = epoch_order(header.count, SEED, epoch)
        yield read_samples(data, header, order[i * B:(i + 1) * B].tolist())


def relative(mine: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> float:
    worst = 0.0
    for k, r in ref.items():
        diff, scale = float(np.max(np.abs(mine[k] - r))), float(np.max(np.abs(r)))
        worst = max(worst, diff / scale if scale else diff)
    return worst


@pytest.mark.slow
def test_adamw_over_the_op_follows_presk_train(prog, tmp_path) -> None:
    from presk.train.loop import Trainer
    training = prog.training()
    trainer = Trainer.create(prog.core, training, str(tmp_path / "run"), steps=STEPS)
    op = ptorch.function(prog, "loss", B=B)
    theta = leaves(prog.init())
    assert all(theta[p].detach().numpy().tobytes() == v.tobytes()
               for p, v in trainer.params.items())
    opt = torch.optim.AdamW(list(theta.values()), lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.0)  # the tutorial's optimizer block
    sched = torch.optim.lr_scheduler.LambdaLR(opt, Schedule("cosine", STEPS, 20))
    worst = []
    try:
        for t, (x, y) in enumerate(batches(ROOT / "tutorial" / "data" / "pairs.psk.d", STEPS)):
            opt.zero_grad()
            loss = op(theta, (torch.from_numpy(x), torch.from_numpy(y)))
            loss.backward()
            opt.step()
            sched.step()
            record = trainer.one_step()
            assert abs(record.loss - loss.item()) <= BOUND * abs(record.loss), t
            worst.append(relative({p: v.detach().numpy() for p, v in theta.items()},
                                  trainer.params))
    finally:
        trainer.stream.close()
    print(f"\nAdamW over the Presk op against presk train, 100 steps: largest relative "
          f"difference {max(worst):.2e} (step {int(np.argmax(worst)) + 1})")
    assert max(worst) <= BOUND
