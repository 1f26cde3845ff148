"""Damaged artifacts and state (issue 14, item 3), one regression test per class: JSON
nested too deeply, a non-finite number, a field of the wrong type (a checkpoint's: resume
falls back to the checkpoint before it); a checkpoint whose checksum holds but whose
tensors do not fit the program (a renamed key, a wrong shape), whose data position is
negative or was saved for another shuffle seed; a damaged `log.csv` on --resume. Each is
one line naming the file and what is wrong, exit code 2 (or the documented fallback).
`presk train` runs in this process (test/programs.py presk_in_process: the same exit code
and output, without a new interpreter each run); the script itself is test_train_cli's."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from presk.analysis.envelope import EnvelopeError, load_envelope
from presk.analysis.realization import RealizationError, load_realization
from programs import presk_in_process

ROOT = Path(__file__).resolve().parents[2]
TRAIN = str(ROOT / "tutorial" / "07_train.psk")


def train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`presk train TRAIN --quiet *args` in `cwd`, in this process."""
    return presk_in_process(["train", TRAIN, "--quiet", *args], cwd)


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A run of 4 epochs (checkpoints at steps 50, 100 and its last, 128)."""
    cwd = tmp_path_factory.mktemp("state")
    done = train("--epochs", "4", "--out", "run", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd / "run"


@pytest.fixture
def run(finished: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished, tmp_path / "run")
    return tmp_path / "run"


def newest(run: Path) -> Path:
    return sorted((run / "ckpt").glob("step-*.json"))[-1]


def rewrite(json_path: Path, record=None, tensors=None) -> None:
    """Change a checkpoint's JSON and/or tensors, its SHA-256 made to hold again."""
    data = json.loads(json_path.read_text())
    if record:
        record(data)
    tensor_path = json_path.parent / data["tensors"]
    if tensors:
        t = load_file(str(tensor_path))
        tensors(t)
        save_file(t, str(tensor_path))
    data["sha256"] = hashlib.sha256(tensor_path.read_bytes()).hexdigest()
    json_path.write_text(json.dumps(data))


def refused(run: Path, *words: str) -> str:
    done = train("--resume", "run", cwd=run.parent)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert all(w in done.stderr for w in words), done.stderr
    return done.stderr


def test_json_nested_too_deeply():
    deep = '{"format": "presk-realization/1", "sites": ' + "[" * 100000 + "]" * 100000 + "}"
    with pytest.raises(RealizationError, match="nested deeper than 64"):
        load_realization(deep)
    shallow = '{"format": "presk-realization/1", "sites": ' + "[" * 70 + "]" * 70 + "}"
    with pytest.raises(RealizationError, match="nested deeper than 64"):
        load_realization(shallow)


def test_json_non_finite_numbers(tmp_path: Path):
    for token, what in (("NaN", "holds NaN"), ("1e999", "beyond float64"),
                        ("-Infinity", "holds -Infinity")):
        path = tmp_path / "env.json"
        path.write_text('{"format": "presk-envelope/1", "entry": "loss", "dims": {}, '
                        f'"bits": 128, "samples": 1, "weights": "none", "inputs": "seed 0", '
                        f'"sites": {{"f/%1": {{"max_abs": {token}}}}}, "params": {{}}}}')
        with pytest.raises(EnvelopeError, match=what):
            load_envelope(str(path))


def test_json_wrong_type_falls_back_to_the_checkpoint_before(run: Path):
    rewrite(newest(run), record=lambda d: d.update(step="128"))
    done = train("--resume", "run", cwd=run.parent)
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "using the checkpoint before" in line]
    assert len(warning) == 1 and '"step" is "128", not a natural number' in warning[0]
    assert "resuming `run` at step 100" in done.stdout or "at step 100" in done.stdout


def test_checkpoint_with_a_renamed_key(run: Path):
    def rename(t):
        t["param.blocks.proj.W"] = t.pop("param.blocks.proj.w")
    rewrite(newest(run), tensors=rename)
    refused(run, "step-00000128.safetensors", "no parameter `param.blocks.proj.w`")


def test_checkpoint_with_a_wrong_shape(run: Path):
    def widen(t):
        t["param.final.γ"] = np.zeros(5)
    rewrite(newest(run), tensors=widen)
    refused(run, "step-00000128.safetensors", "`param.final.γ` has shape [5]")


def test_checkpoint_with_a_negative_data_position(run: Path):
    rewrite(newest(run), record=lambda d: d["data"].update(index=-1))
    refused(run, "`index` is -1, not a natural number")


def test_checkpoint_saved_for_another_seed(run: Path):
    rewrite(newest(run), record=lambda d: d["data"].update(seed=d["data"]["seed"] + 1))
    refused(run, "the data position was saved for seed")


def test_a_damaged_log_on_resume(run: Path):
    log = run / "log.csv"
    rows = log.read_text().splitlines()
    log.write_text("\n".join(rows[:10] + ["10,0,not-a-number"] + rows[11:]) + "\n")
    refused(run, "log.csv: line 11 is not a step's row")
    log.write_text("\n".join(rows[:20]) + "\n")
    refused(run, "log.csv: holds 19 steps, the checkpoint is at step 128")


def test_weights_with_a_renamed_key_a_wrong_shape_or_dtype(tmp_path: Path):
    from presk.analysis import entry as E
    from presk.analysis.weights import WeightsError
    from presk.pipeline import load_core
    module, _ = load_core(TRAIN)
    entry = E.prepare(module, "loss", {"B": 4})
    good = E.weights(entry, 0, None)
    cases = {
        "no tensor `final.γ`": {**{k: v for k, v in good.items() if k != "final.γ"},
                                "final.g": good["final.γ"]},
        "has shape [5]": {**good, "final.γ": np.zeros(5)},
        "has dtype int64, not a float": {**good, "final.γ": np.zeros(4, dtype=np.int64)},
    }
    for message, tensors in cases.items():
        path = tmp_path / "w.safetensors"
        save_file(tensors, str(path))
        with pytest.raises(WeightsError, match=re.escape(message)):
            E.weights(entry, 0, str(path))


def test_inputs_of_a_non_float_dtype(tmp_path: Path):
    from presk.analysis import entry as E
    from presk.analysis.weights import WeightsError
    from presk.pipeline import load_core
    module, _ = load_core(TRAIN)
    entry = E.prepare(module, "loss", {"B": 4})
    path = tmp_path / "x.safetensors"
    save_file({"batch.0": np.zeros((4, 4), dtype=np.int32)}, str(path))
    with pytest.raises(WeightsError, match="input `batch.0` has dtype int32, not a float"):
        E.inputs(entry, 0, str(path))


def _files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("value, shown", [(np.nan, "nan"), (-np.inf, "-inf")])
def test_checkpoint_with_non_finite_values(run: Path, value: float, shown: str):
    """A parameter or an optimizer buffer that is not finite (a run that diverged, an
    edited file): the resumed run could only compute NaN — refused, the run untouched."""
    def poison(t):
        t["optim.exp_avg_sq.final.γ"] = t["optim.exp_avg_sq.final.γ"].copy()
        t["optim.exp_avg_sq.final.γ"][1] = value
    rewrite(newest(run), tensors=poison)
    before = _files(run)
    refused(run, "step-00000128.safetensors", f"`optim.exp_avg_sq.final.γ` holds {shown} "
            "at [1] (1 of 4 values not finite)")
    assert _files(run) == before


def test_checkpoint_of_another_version_or_cut_short(run: Path):
    """A JSON of another format version, or one cut short, is skipped with a warning for
    the one before; when every checkpoint is so, the resume is refused, nothing changed."""
    for path in sorted((run / "ckpt").glob("step-*.json")):
        text = path.read_text()
        path.write_text(text.replace("presk-checkpoint/1", "presk-checkpoint/2")
                        if "50" in path.name else text[:len(text) // 2])
    before = _files(run)
    done = train("--resume", "run", cwd=run.parent)
    assert done.returncode == 2 and done.stderr.splitlines()[-1] == (
        "presk train: run holds no checkpoint to resume from"), done.stderr
    assert "checkpoint format version 2 is not supported" in done.stderr
    assert "using the checkpoint before" in done.stderr
    assert _files(run) == before
