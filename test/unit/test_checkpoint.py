"""Checkpoints (presk/train/checkpoint.py): a round trip keeps every bit; a truncated or
altered tensor file, a JSON cut short, another artifact are refused in one line and
`latest` falls back to the checkpoint before; only the last `keep` stay; nothing is left
half-written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from presk.train.checkpoint import (
    Checkpoint, CheckpointError, checkpoints, latest, load, save,
)


def _ck(step: int, rng: np.random.Generator) -> Checkpoint:
    params = {"blocks.proj.w": rng.standard_normal((3, 4, 4)), "final.γ": rng.standard_normal(4),
              "s": np.array(rng.standard_normal())}
    optim = {"exp_avg.final.γ": rng.standard_normal(4), "step": np.array(step, np.int64)}
    return Checkpoint(step, params, optim, {"epoch": 1, "index": step % 7},
                      {"run": "run", "loss": 0.5})


def _same(a: Checkpoint, b: Checkpoint) -> None:
    assert a.step == b.step and a.data == b.data and a.meta == b.meta
    for mine, theirs in ((a.params, b.params), (a.optimizer, b.optimizer)):
        assert sorted(mine) == sorted(theirs)
        for k in mine:
            assert mine[k].shape == theirs[k].shape and mine[k].tobytes() == theirs[k].tobytes()


def test_round_trip_keeps_every_bit(tmp_path: Path) -> None:
    ck = _ck(50, np.random.default_rng(0))
    path = save(str(tmp_path / "ckpt"), ck)
    assert path.endswith("step-00000050.json")
    _same(load(path), ck)
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["step-00000050.json",
                                                      "step-00000050.safetensors"]


def test_only_the_last_ones_are_kept(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    for step in (10, 20, 30, 40):
        save(str(tmp_path), _ck(step, rng), keep=2)
    assert [os.path.basename(p) for p in checkpoints(str(tmp_path))] == [
        "step-00000040.json", "step-00000030.json"]
    assert len(os.listdir(tmp_path)) == 4


@pytest.mark.parametrize("damage", ["truncate", "alter", "json", "missing", "kind"])
def test_a_damaged_checkpoint_is_refused_and_the_one_before_used(tmp_path: Path,
                                                                 damage: str) -> None:
    rng = np.random.default_rng(2)
    older, newer = _ck(10, rng), _ck(20, rng)
    save(str(tmp_path), older)
    json_path = save(str(tmp_path), newer)
    tensors = tmp_path / "step-00000020.safetensors"
    if damage == "truncate":
        tensors.write_bytes(tensors.read_bytes()[:-9])
    elif damage == "alter":
        raw = bytearray(tensors.read_bytes())
        raw[-1] ^= 1
        tensors.write_bytes(bytes(raw))
    elif damage == "json":
        Path(json_path).write_text(Path(json_path).read_text()[:20])
    elif damage == "missing":
        tensors.unlink()
    else:
        Path(json_path).write_text(json.dumps({"format": "presk-plan/1"}))
    with pytest.raises(CheckpointError) as err:
        load(json_path)
    assert "\n" not in str(err.value)
    warnings: list[str] = []
    found = latest(str(tmp_path), warnings.append)
    assert found is not None
    _same(found, older)
    assert len(warnings) == 1 and "using the checkpoint before it" in warnings[0]


def test_no_checkpoint(tmp_path: Path) -> None:
    assert latest(str(tmp_path / "none"), print) is None


def test_an_unwritable_place_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(CheckpointError) as err:
        save(str(blocker / "ckpt"), _ck(1, np.random.default_rng(3)))
    assert "cannot create" in str(err.value) and "\n" not in str(err.value)
