"""`presk train` against PyTorch: over 100 float64 steps of the tutorial's run, the
parameters equal those of a PyTorch reference to 1e-10 relative at every checkpoint and
after every step, for AdamW (the tutorial's optimizer) and for SGD with momentum and
weight decay (a copy of the program whose optimizer block is `sgd`).

The reference shares nothing with Presk's training code but the inputs a user would
hand both: the model is `presk export --target pytorch`'s (torch autograd takes its
gradient), the initial weights `presk init`'s safetensors file, the batches the documented
order (`epoch_order`, the last partial batch dropped) read from the same `.psk.d` file by
`presk.datafile.read_samples`, the optimizer `torch.optim.AdamW` / `torch.optim.SGD` with
the program's hyperparameters written out here, and `LambdaLR(opt, Schedule)` stepped
after each `opt.step()` (docs/training.md).

Two Presk sides: the CLI (`presk train --steps 100`, in-process, the copy checkpointing
every 10 steps; pruning is switched off so that all ten checkpoints stay to be compared)
and `presk.train.loop.Trainer` driven step by step, compared after each step.
"""

from __future__ import annotations

import importlib
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from presk.datafile import read_header, read_samples
from presk.train.data import epoch_order
from presk.train.optim import Schedule
from programs import presk_in_process

ROOT = Path(__file__).resolve().parents[2]
STEPS, EVERY, B, SEED = 100, 10, 8, 3  # the copy's run; B and the shuffle seed are 07's
BOUND = 1e-10

# The tutorial's run, checkpointing every 10 steps; `{optimizer}` is the optimizer block.
PROGRAM = """\
import "06_tower.psk" as t
dim B

fn loss(θ : params t.Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean((t.Tower.apply(θ, x) - y)^2)

{optimizer}

training run {{
  model     = t.Tower
  objective = loss
  optimizer = opt
  data      = stream "data/pairs.psk.d" |> shuffle(seed = 3) |> batch(B = 8)
  epochs    : nat = 10
  checkpoint every 10 steps to "ckpt/"
}}
"""


@dataclass(frozen=True)
class Case:
    """An optimizer block of the copy and the PyTorch optimizer and schedule it means."""

    block: str
    torch_optimizer: Callable[[list[torch.Tensor]], torch.optim.Optimizer]
    schedule: Schedule


CASES = {
    # tutorial/07_train.psk's own block (lr 0.01, no weight decay, cosine with 20 warmup)
    "adamw": Case("optimizer opt : adamw {\n  lr : f64 = 0.01\n  weight_decay : f64 = 0.0\n"
                  "  schedule : cosine(warmup = 20)\n}",
                  lambda ps: torch.optim.AdamW(ps, lr=0.01, betas=(0.9, 0.999), eps=1e-8,
                                               weight_decay=0.0),
                  Schedule("cosine", STEPS, 20)),
    "sgd": Case("optimizer opt : sgd {\n  lr : f64 = 0.05\n  momentum : f64 = 0.9\n"
                "  weight_decay : f64 = 0.01\n  schedule : linear(warmup = 10)\n}",
                lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
                Schedule("linear", STEPS, 10)),
}


def test_the_adamw_case_is_the_tutorials_block() -> None:
    """The AdamW copy trains with the tutorial's own optimizer block, not a lookalike."""
    text = (ROOT / "tutorial" / "07_train.psk").read_text()
    block = text[text.index("optimizer adamw {"):]
    block = block[:block.index("}") + 1].replace("optimizer adamw {", "optimizer opt : adamw {")
    assert " ".join(block.split()) == " ".join(CASES["adamw"].block.split())


# --------------------------------------------------------------------------------------
# The programs, the seed weights, the export
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """The tutorial's files and data, plus one copy of 07 per optimizer case."""
    d = tmp_path_factory.mktemp("train_torch")
    for p in (ROOT / "tutorial").glob("0[1-6]_*.psk"):
        shutil.copy(p, d / p.name)
    shutil.copytree(ROOT / "tutorial" / "data", d / "data")
    for name, case in CASES.items():
        (d / f"{name}.psk").write_text(PROGRAM.format(optimizer=case.block))
    return d


def presk(*args: str, cwd: Path) -> None:
    """`presk *args` in `cwd`, in this process (test/programs.py): the commands are the
    tests' set-up, not what they test."""
    done = presk_in_process(list(args), cwd)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def seed_weights(work: Path) -> dict[str, np.ndarray]:
    """`presk init`'s weights at seed 0, the ones `presk train` starts from by default."""
    presk("init", "adamw.psk", "--entry", "loss", "--dim", f"B={B}", "-o", "w.safetensors",
          cwd=work)
    return load_file(str(work / "w.safetensors"))


@pytest.fixture(scope="module")
def exported(work: Path) -> Iterator[tuple[type, Callable]]:
    """The exported Tower class and loss function (imported here, removed afterwards)."""
    presk("export", "adamw.psk", "--target", "pytorch", "-o", "torch_out", cwd=work)
    names = ("_01_linear", "_02_norm", "_06_tower", "_adamw")
    sys.path.insert(0, str(work / "torch_out"))
    try:
        tower = importlib.import_module("_06_tower")
        train = importlib.import_module("_adamw")
        yield tower.Tower, train.loss
    finally:
        sys.path.remove(str(work / "torch_out"))
        for n in names:
            sys.modules.pop(n, None)


# --------------------------------------------------------------------------------------
# The PyTorch reference
# --------------------------------------------------------------------------------------


def batches(data: Path, steps: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The documented batch order: epoch e reads `epoch_order(count, seed, e)`, B at a time,
    its last partial batch dropped; each batch read from the file by the data reader."""
    header = read_header(data)
    per_epoch = header.count // B
    for t in range(steps):
        epoch, i = divmod(t, per_epoch)
        order = epoch_order(header.count, SEED, epoch)
        x, y = read_samples(data, header, order[i * B:(i + 1) * B].tolist())
        yield x, y


def torch_trajectory(case: Case, exported: tuple[type, Callable], weights: dict,
                     data: Path) -> tuple[list[dict[str, np.ndarray]], list[float]]:
    """The parameters after each of STEPS updates, and the loss before each."""
    tower_cls, loss_fn = exported
    model = tower_cls(dtype=torch.float64)
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.items()},
                          strict=True)
    opt = case.torch_optimizer(list(model.parameters()))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, case.schedule)
    params, losses = [], []
    for x, y in batches(data, STEPS):
        opt.zero_grad()
        loss = loss_fn(model, (torch.from_numpy(x), torch.from_numpy(y)))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        params.append({k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    return params, losses


@pytest.fixture(scope="module")
def reference(work: Path, exported, seed_weights) -> dict[str, tuple[list, list[float]]]:
    return {name: torch_trajectory(case, exported, seed_weights, work / "data" / "pairs.psk.d")
            for name, case in CASES.items()}


def relative(mine: dict[str, np.ndarray], torch_p: dict[str, np.ndarray]) -> float:
    """The largest over tensors of max |presk − torch| / max |torch| (the absolute
    difference for a tensor torch holds at 0: the biases before the first update with a
    learning rate above 0, the warmup's first being 0)."""
    assert sorted(mine) == sorted(torch_p)
    worst = 0.0
    for k, ref in torch_p.items():
        got = np.asarray(mine[k], dtype=np.float64)
        assert got.shape == ref.shape, k
        diff, scale = float(np.max(np.abs(got - ref))), float(np.max(np.abs(ref)))
        worst = max(worst, diff / scale if scale else diff)
    return worst


# --------------------------------------------------------------------------------------
# The tests
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_cli_checkpoints_follow_pytorch(name: str, work: Path, reference, monkeypatch,
                                        capsys) -> None:
    """`presk train COPY --steps 100`: each of its ten checkpoints (steps 10, 20, … 100)
    holds the reference's parameters after that step; the log's losses are torch's."""
    import presk.train.checkpoint as checkpoint
    from presk.cli.main import main
    monkeypatch.chdir(work)
    monkeypatch.setattr(checkpoint, "prune", lambda directory, keep: None)
    out = f"run-{name}"
    assert main(["train", f"{name}.psk", "--quiet", "--steps", str(STEPS), "--out", out]) == 0
    assert f"trained `run`: {STEPS} steps" in capsys.readouterr().out
    params, losses = reference[name]
    ckpts = sorted((work / out / "ckpt").glob("step-*.safetensors"))
    assert [p.name for p in ckpts] == [f"step-{s:08d}.safetensors"
                                       for s in range(EVERY, STEPS + 1, EVERY)]
    diffs = {}
    for path in ckpts:
        step = int(path.stem.split("-")[1])
        saved = {k[len("param."):]: v for k, v in load_file(str(path)).items()
                 if k.startswith("param.")}
        diffs[step] = relative(saved, params[step - 1])
    print(f"\n{name}: max relative difference per checkpoint (CLI): "
          + ", ".join(f"{s}: {d:.2e}" for s, d in diffs.items()))
    assert max(diffs.values()) <= BOUND, diffs
    rows = (work / out / "log.csv").read_text().splitlines()[1:]
    logged = np.array([float(r.split(",")[2]) for r in rows])
    assert len(logged) == STEPS
    assert np.max(np.abs(logged - losses) / np.abs(losses)) <= BOUND


@pytest.mark.parametrize("name", list(CASES))
def test_trainer_steps_follow_pytorch(name: str, work: Path, reference, seed_weights) -> None:
    """`Trainer.create` + `one_step`, compared after every one of the 100 steps; the
    starting weights are `presk init`'s bit for bit."""
    from presk.frontend.lower import lower_program
    from presk.frontend.elaborate import elaborate
    from presk.train.loop import Trainer
    program = elaborate(str(work / f"{name}.psk"))
    training = program.main.trainings["run"]
    trainer = Trainer.create(lower_program(program), training, str(work / f"lib-{name}"),
                             steps=STEPS)
    assert all(trainer.params[k].tobytes() == v.tobytes() for k, v in seed_weights.items())
    params, losses = reference[name]
    worst = []
    try:
        for t in range(STEPS):
            record = trainer.one_step()
            assert abs(record.loss - losses[t]) <= BOUND * abs(losses[t]), (t, record.loss)
            worst.append(relative(trainer.params, params[t]))
    finally:
        trainer.stream.close()
    print(f"\n{name}: max relative difference after every step (Trainer): "
          f"{max(worst):.2e} (at step {int(np.argmax(worst)) + 1}); per tenth step "
          + ", ".join(f"{d:.1e}" for d in worst[EVERY - 1::EVERY]))
    assert max(worst) <= BOUND
    # the run learned: its loss fell, in both the reference and presk
    assert losses[-1] < 0.5 * losses[0]
