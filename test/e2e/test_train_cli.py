"""`presk train`: the tutorial's run learns; a run killed (SIGKILL) or interrupted (SIGINT)
and resumed ends with the bits of a run never stopped; a truncated newest checkpoint is
refused in one line and the one before it used; the log, the curve and the errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from programs import presk_in_process

ROOT = Path(__file__).resolve().parents[2]
PRESK = str(Path(sys.executable).parent / "presk")
TRAIN = str(ROOT / "tutorial" / "07_train.psk")


def train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`presk train TRAIN --quiet *args` in `cwd`, in this process (test/programs.py): the
    runs stopped by a signal and `--plot` are the script's own processes."""
    return presk_in_process(["train", TRAIN, "--quiet", *args], cwd)


def final(run: Path) -> dict[str, np.ndarray]:
    newest = sorted((run / "ckpt").glob("step-*.safetensors"))[-1]
    return load_file(str(newest))


def same_bits(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return sorted(a) == sorted(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)


def log_rows(run: Path) -> list[str]:
    return (run / "log.csv").read_text().splitlines()


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """The reference: 200 epochs (6 400 steps) of the tutorial's run, never stopped."""
    cwd = tmp_path_factory.mktemp("ref")
    done = train("--epochs", "200", "--out", "ref", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return cwd / "ref"


def test_the_tutorial_learns(uninterrupted: Path) -> None:
    rows = log_rows(uninterrupted)
    assert rows[0] == "step,epoch,loss,lr" and len(rows) == 6401
    first, last = float(rows[1].split(",")[2]), float(rows[-1].split(",")[2])
    assert last < 0.2 * first, (first, last)
    assert (uninterrupted / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the run's `checkpoint every 50 steps to "ckpt/"`, the last three kept
    assert sorted(p.name for p in (uninterrupted / "ckpt").glob("*.json")) == [
        "step-00006300.json", "step-00006350.json", "step-00006400.json"]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_stopped_run_resumes_to_the_same_bits(uninterrupted: Path, tmp_path: Path,
                                                sig: signal.Signals) -> None:
    proc = subprocess.Popen([PRESK, "train", TRAIN, "--quiet", "--epochs", "200", "--out",
                             "run"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ckpt = tmp_path / "run" / "ckpt"
    deadline = time.time() + 120
    while not list(ckpt.glob("step-0000[1-9]*.json")) and time.time() < deadline:
        time.sleep(0.01)  # stop it once it is past step 1000
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal reached it")
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert "interrupted at step" in err and "--resume" in err and "Traceback" not in err
    resumed = train("--resume", "run", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming `run` at step" in resumed.stdout
    assert same_bits(final(tmp_path / "run"), final(uninterrupted))
    assert log_rows(tmp_path / "run") == log_rows(uninterrupted)


def test_a_truncated_checkpoint_is_refused_and_the_one_before_used(tmp_path: Path) -> None:
    assert train("--epochs", "20", "--out", "run", cwd=tmp_path).returncode == 0
    reference = final(tmp_path / "run")
    newest = sorted((tmp_path / "run" / "ckpt").glob("step-*.safetensors"))[-1]
    newest.write_bytes(newest.read_bytes()[:-100])
    resumed = train("--resume", "run", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    warning = [line for line in resumed.stderr.splitlines() if "truncated or altered" in line]
    assert len(warning) == 1 and "using the checkpoint before it" in warning[0]
    assert same_bits(final(tmp_path / "run"), reference)


def test_user_errors_are_one_line(tmp_path: Path) -> None:
    assert train("--epochs", "1", "--out", "run", cwd=tmp_path).returncode == 0
    again = train("--epochs", "1", "--out", "run", cwd=tmp_path)
    assert again.returncode == 2 and "holds a run already" in again.stderr
    nothing = train("--resume", "none", cwd=tmp_path)
    assert nothing.returncode == 2 and nothing.stderr.count("\n") == 1
    other = train("--resume", "run", "--epochs", "3", cwd=tmp_path)
    assert other.returncode == 2 and "this run has" in other.stderr


def test_plot_redraws_the_curve(tmp_path: Path) -> None:
    assert train("--epochs", "2", "--out", "run", cwd=tmp_path).returncode == 0
    (tmp_path / "run" / "loss.png").unlink()
    done = subprocess.run([PRESK, "train", "--plot", "run"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "redrawn from 64 steps" in done.stdout
    assert (tmp_path / "run" / "loss.png").exists()


def test_epoch_means_follow_the_log(uninterrupted: Path) -> None:
    """The curve's bold line and the closing line's `epoch mean`: each epoch's mean loss at
    its last step (32 steps an epoch: 256 samples, B = 8)."""
    from presk.train.loop import epoch_means, read_log
    records = read_log(str(uninterrupted / "log.csv"))
    ends, means = epoch_means(records)
    assert ends[:3] == [32, 64, 96] and len(ends) == 200
    assert means[0] == pytest.approx(np.mean([r.loss for r in records[:32]]), rel=1e-15)
    assert means[-1] < means[0]


@pytest.mark.parametrize("native", [True, False], ids=["native-step", "python-step"])
def test_a_data_file_cut_short_during_the_run_is_one_line(tmp_path: Path, capsys,
                                                           native: bool) -> None:
    """The stream opens the file at the start and reads batch by batch (the Python-driven
    step) or through its memory map, its size checked before each native call: a file
    truncated under a running run is reported in one line (exit 2), the log kept, no
    traceback. The native step's calls start at steps 0, 1 (the first makes one step,
    timed), 50 (epoch 1, batch 18), …: the cut before the call at step 50 stops it there;
    the Python step reads batch (1, 3) at 35."""
    import shutil

    from presk.cli.main import main
    data = tmp_path / "data"
    shutil.copytree(ROOT / "tutorial" / "data", data)
    program = tmp_path / "07_train.psk"
    program.write_text((ROOT / "tutorial" / "07_train.psk").read_text()
                       .replace('"06_tower.psk"', f'"{ROOT / "tutorial" / "06_tower.psk"}"'))
    from presk.train import data as D
    name = "check_size" if native else "read"
    original = getattr(D.Stream, name)

    def cut_then(self, *position):
        where = position[0] if position else self.position
        if where.epoch == 1 and where.index == (18 if native else 3):
            path = data / "pairs.psk.d"
            path.write_bytes(path.read_bytes()[:200])
        return original(self, *position)

    setattr(D.Stream, name, cut_then)
    try:
        cwd = os.getcwd()
        os.chdir(tmp_path)
        rc = main(["train", str(program), "--quiet", "--out", "run",
                   *([] if native else ["--steps-per-call", "0"])])
    finally:
        os.chdir(cwd)
        setattr(D.Stream, name, original)
    stop = 50 if native else 35
    assert rc == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("presk train: ") and f"at step {stop}" in err[0], err
    assert (tmp_path / "run" / "log.csv").read_text().count("\n") == stop + 1  # the header too
