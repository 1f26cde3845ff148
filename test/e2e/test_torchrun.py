"""`presk export --target pytorch --train -o DIR`: DIR/train.py under `torchrun
--nproc_per_node=2` (gloo, CPU, f64) trains the tutorial's run as `presk train` does:
at every checkpoint (steps 50 and 100 of a 100-step run) its parameters and optimizer state
equal single-process `presk train`'s to 1e-10 relative, and its log's losses too; each side
resumes the other's run (torch → presk: `presk train --resume`; presk → torch: `train.py
--resume`) and ends where the uninterrupted run ends, to the same tolerance."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from presk.cli.main import main
from programs import TRAIN

STEPS, BOUND = 100, 1e-10


def torchrun(script: Path, *args: str) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc_per_node=2", str(script), *args], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def presk_train(*args: str) -> None:
    assert main(["train", TRAIN, "--quiet", *args]) == 0


def relative(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    assert sorted(a) == sorted(b)
    worst = 0.0
    for k, ref in b.items():
        if ref.ndim == 0 and ref.dtype.kind == "i":  # the optimizer's step counter
            assert int(a[k]) == int(ref), k
            continue
        diff, scale = float(np.max(np.abs(a[k] - ref))), float(np.max(np.abs(ref)))
        worst = max(worst, diff / scale if scale else diff)
    return worst


def checkpoint(run: Path, step: int) -> dict[str, np.ndarray]:
    return load_file(str(run / "ckpt" / f"step-{step:08d}.safetensors"))


def losses(run: Path) -> np.ndarray:
    return np.array([float(r.split(",")[2]) for r in
                     (run / "log.csv").read_text().splitlines()[1:]])


def drop_last(run: Path, into: Path) -> None:
    """A copy of the run without its step-100 checkpoint: where a stop at 50 leaves it."""
    shutil.copytree(run, into)
    for e in ("json", "safetensors"):
        (into / "ckpt" / f"step-{STEPS:08d}.{e}").unlink()


@pytest.mark.slow
def test_torchrun_follows_presk_train_and_each_resumes_the_other(tmp_path) -> None:
    assert main(["export", TRAIN, "--target", "pytorch", "--train",
                 "-o", str(tmp_path / "out")]) == 0
    script = tmp_path / "out" / "train.py"
    presk_train("--steps", str(STEPS), "--out", str(tmp_path / "presk"))
    out = torchrun(script, "--out", str(tmp_path / "torch"), "--steps", str(STEPS))
    assert f"trained `run` on 2 rank(s): {STEPS} steps" in out
    diffs = {s: relative(checkpoint(tmp_path / "torch", s), checkpoint(tmp_path / "presk", s))
             for s in (50, STEPS)}
    ref = losses(tmp_path / "presk")
    assert len(losses(tmp_path / "torch")) == STEPS
    loss_diff = float(np.max(np.abs(losses(tmp_path / "torch") - ref) / np.abs(ref)))

    drop_last(tmp_path / "torch", tmp_path / "torch-then-presk")
    presk_train("--resume", str(tmp_path / "torch-then-presk"))
    drop_last(tmp_path / "presk", tmp_path / "presk-then-torch")
    torchrun(script, "--out", str(tmp_path / "presk-then-torch"), "--resume")
    resumed = {name: relative(checkpoint(tmp_path / name, STEPS),
                              checkpoint(tmp_path / "presk", STEPS))
               for name in ("torch-then-presk", "presk-then-torch")}
    print(f"\ntorchrun (2 ranks, gloo) against presk train: parameters and optimizer state "
          f"per checkpoint {', '.join(f'{s}: {d:.1e}' for s, d in diffs.items())}; losses "
          f"{loss_diff:.1e}; resumed at 50, at step 100: "
          + ", ".join(f"{n} {d:.1e}" for n, d in resumed.items()))
    assert max(diffs.values()) <= BOUND, diffs
    assert loss_diff <= BOUND
    assert max(resumed.values()) <= BOUND, resumed
    for name in resumed:
        assert len(losses(tmp_path / name)) == STEPS
