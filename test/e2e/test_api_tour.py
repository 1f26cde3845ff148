"""The README's tour, once on the command line (presk.cli.main in-process) and once through
the Python API (docs/python.md), compared bit for bit: `presk init`'s weights, `presk run`'s
value natively (all-f64 and under the mixed realization) and its gradient, `presk
calibrate`'s envelope and `presk solve`'s realization at 1e-3 (their files byte for byte),
and `presk train`'s log and checkpoints (also after resuming)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

import presk
from presk.cli.main import main
from solved_tutorial import tutorial_solved
from programs import AT_MIXED, TRAIN

pytestmark = pytest.mark.early(0.41)  # CPU minutes (test/conftest.py)


@pytest.fixture(scope="module")
def prog() -> presk.Program:
    return presk.load(TRAIN)


def cli(*args: str) -> None:
    assert main(list(args)) == 0


@pytest.mark.slow
def test_init_and_run(prog, tmp_path, capsys) -> None:
    cli("init", TRAIN, "--entry", "loss", "--dim", "B=4", "-o", str(tmp_path / "w.st"))
    params = prog.init("loss", B=4)
    saved = load_file(str(tmp_path / "w.st"))
    assert sorted(saved) == sorted(params)
    assert all(saved[p].tobytes() == params[p].tobytes() for p in params)
    (batch,) = prog.sample_inputs("loss", B=4)
    for realize, grad in [(None, False), (AT_MIXED, False), (None, True), (AT_MIXED, True)]:
        out = tmp_path / f"run-{realize is None}-{grad}.st"
        cli("run", TRAIN, "--entry", "loss", "--dim", "B=4", "--out", str(out),
            *(["--realize", realize] if realize else []), *(["--grad"] if grad else []))
        printed = load_file(str(out))
        got = prog.compile("loss", B=4, realize=realize, grad=grad)(params, batch)
        value, grads = got if grad else (got, {})
        assert np.float64(value).tobytes() == printed["result"].tobytes(), (realize, grad)
        for p, g in grads.items():
            assert g.tobytes() == printed[f"grad.{p}"].tobytes(), (realize, p)
    capsys.readouterr()


@pytest.mark.slow
def test_calibrate_and_solve(tmp_path, monkeypatch, capsys) -> None:
    from presk.analysis.envelope import save_envelope
    from presk.analysis.realization import save_realization
    monkeypatch.chdir(tmp_path)
    cli("calibrate", "--precision", TRAIN, "--entry", "loss", "--dim", "B=4",
        "--out", "env.json")
    _, envelope, solution = tutorial_solved()  # prog.calibrate, prog.solve (shared)
    save_envelope(envelope, "env-api.json")
    assert Path("env-api.json").read_bytes() == Path("env.json").read_bytes()
    cli("solve", TRAIN, "--precision", "env.json", "--budget", "1e-3", "--out", "real.json")
    assert solution.inside
    save_realization(solution.realization, "real-api.json")
    assert Path("real-api.json").read_bytes() == Path("real.json").read_bytes()
    capsys.readouterr()


@pytest.mark.slow
def test_train_and_resume(prog, tmp_path, capsys) -> None:
    """The tutorial's run (320 steps, a checkpoint every 50 and at the end) by `presk
    train` and by `prog.train`: the same log and checkpoints, byte for byte; then the
    CLI's run with its last checkpoint removed, resumed by the API, ends the same."""
    cli("train", TRAIN, "--quiet", "--out", str(tmp_path / "cli"))
    trainer = prog.train(out=tmp_path / "api")
    assert trainer.step == 320
    for name in ("log.csv", *(f"ckpt/step-{s:08d}.{e}" for s in (250, 300, 320)
                              for e in ("json", "safetensors"))):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert (tmp_path / "api" / "loss.png").stat().st_size > 0
    shutil.copytree(tmp_path / "cli", tmp_path / "resumed")
    for e in ("json", "safetensors"):
        (tmp_path / "resumed" / "ckpt" / f"step-00000320.{e}").unlink()
    resumed = prog.train(out=tmp_path / "resumed", resume=True)
    assert resumed.step == 320 and len(resumed.history) == 320
    for name in ("log.csv", "ckpt/step-00000320.safetensors"):
        assert (tmp_path / "resumed" / name).read_bytes() == \
            (tmp_path / "cli" / name).read_bytes(), name
    with pytest.raises(presk.PreskError, match="holds a run already"):
        prog.train(out=tmp_path / "api")
    capsys.readouterr()
