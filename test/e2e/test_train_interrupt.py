"""Ctrl-C in the middle of a step: the interrupt's checkpoint must hold a whole step (the
batch read, the update made and counted, together), so that the resumed run ends with the
bits of a run never stopped. The signal is sent from inside the objective's call, after
the stream has handed out the step's batch and before the update: the place where an
exception raised at once would leave the stream a batch ahead of the parameters."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from safetensors.numpy import load_file

ROOT = Path(__file__).resolve().parents[2]
TRAIN = str(ROOT / "tutorial" / "07_train.psk")


def newest(run: Path) -> Path:
    return sorted((run / "ckpt").glob("step-*.json"))[-1]


@pytest.mark.parametrize("native", [True, False], ids=["native-step", "python-step"])
def test_sigint_mid_step_checkpoints_a_whole_step(tmp_path: Path, monkeypatch, capsys,
                                                  native: bool) -> None:
    """Ctrl-C inside a native call: the call ends, a checkpoint holds the steps done. The
    native step's calls (the first one step, timed; then up to a checkpoint every 50,
    across epochs of 32) start at steps 0, 1, 50, 100: a SIGINT in the 3rd stops the run
    at 100, in epoch 3; in the Python-driven step's 70th objective call, at 70."""
    from presk.cli.main import main
    from presk.train import loop
    from presk.train.native_step import NativeStep
    from presk.train.objective import NativeObjective
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loop, "CALL_SECONDS", 1e6)  # calls end where the counts say only
    args = ["train", TRAIN, "--quiet", "--epochs", "4",
            *([] if native else ["--steps-per-call", "0"])]
    assert main([*args, "--out", "ref"]) == 0
    owner, name, at, stop = (NativeStep, "run", 3, 100) if native else \
        (NativeObjective, "call_bound", 70, 70)
    call, calls = getattr(owner, name), []  # the step's native call (all-f64)

    def interrupting(self, *a):
        calls.append(1)
        if len(calls) == at:
            os.kill(os.getpid(), signal.SIGINT)
        return call(self, *a)

    monkeypatch.setattr(owner, name, interrupting)
    assert main([*args, "--out", "run"]) == 130
    assert f"interrupted at step {stop} of 128" in capsys.readouterr().err
    saved = json.loads(newest(tmp_path / "run").read_text())
    assert saved["step"] == stop
    assert saved["data"]["epoch"] * 32 + saved["data"]["index"] == stop  # 32 batches an epoch
    monkeypatch.setattr(owner, name, call)
    assert main(["train", TRAIN, "--quiet", "--resume", "run"]) == 0
    mine = load_file(str(newest(tmp_path / "run")).replace(".json", ".safetensors"))
    ref = load_file(str(newest(tmp_path / "ref")).replace(".json", ".safetensors"))
    assert sorted(mine) == sorted(ref)
    assert all(mine[k].tobytes() == ref[k].tobytes() for k in ref)
    assert (tmp_path / "run" / "log.csv").read_text() == (tmp_path / "ref" / "log.csv").read_text()
