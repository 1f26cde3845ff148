"""The training step in one native call (presk/train/native_step.py) computes the bits of the
step driven from Python (`Trainer.one_step`: the batch read by positioned reads, the
objective's native call, the schedule and the optimizer's scalars in Python floats, the
native update), step for step: every logged loss and learning rate, the final weights,
the optimizer's state and the stream's position, on the tutorial's run (AdamW, cosine
warmup, a shuffled stream) and on one that exercises the other paths (SGD with momentum
and weight decay, a linear schedule run past its end, an f32 data file in file order
widened into the f64 batch buffers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

SGD_RUN = """\
import "{tower}" as t
dim B

fn loss(θ : params t.Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean((t.Tower.apply(θ, x) - y)^2)

optimizer sgd {{
  lr           : f64 = 0.05
  momentum     : f64 = 0.9
  dampening    : f64 = 0.1
  weight_decay : f64 = 0.01
  schedule     : linear(warmup = 5)
}}

training run {{
  model     = t.Tower
  objective = loss
  optimizer = sgd
  data      = stream "pairs32.psk.d" |> batch(B = 6)
  epochs    : nat = 2
}}
"""


ADAMW_CONSTANT = """\
import "{tower}" as t
dim B

fn loss(θ : params t.Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[] =
  let (x, y) = batch
  mean((t.Tower.apply(θ, x) - y)^2)

optimizer adamw {{
  lr           : f64 = 0.02
  beta1        : f64 = 0.3
  weight_decay : f64 = 0.1
  schedule     : constant
}}

training run {{
  model     = t.Tower
  objective = loss
  optimizer = adamw
  data      = stream "{data}" |> shuffle(seed = 5) |> batch(B = 5)
  epochs    : nat = 1
}}
"""


def _load(path: Path):
    from presk.frontend.elaborate import elaborate
    from presk.frontend.lower import lower_program
    program = elaborate(str(path))
    return lower_program(program), next(iter(program.main.trainings.values()))


def _run(trainer, steps: int, native: bool) -> list:
    while trainer.step < steps:
        if native:
            trainer.advance(steps - trainer.step)
        else:
            trainer.one_step()
    return trainer.history


def _same(a, b) -> None:
    assert a.history == b.history  # step, epoch, loss and lr: floats compared exactly
    assert a.params.keys() == b.params.keys()
    for k in a.params:
        assert a.params[k].tobytes() == b.params[k].tobytes(), k
    sa, sb = a.optimizer.state(), b.optimizer.state()
    assert sa.keys() == sb.keys()
    assert all(sa[k].tobytes() == sb[k].tobytes() for k in sa)
    assert a.stream.state() == b.stream.state()


@pytest.mark.parametrize("k", [64, 7])
def test_the_tutorials_run_native_equals_the_python_step(tmp_path: Path, k: int) -> None:
    from presk.train.loop import Trainer
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    native = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=k)
    python = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=0)
    assert native.native is not None and python.native is None
    _run(native, native.total, True)
    _run(python, python.total, False)
    assert len(native.history) == 320
    _same(native, python)
    # calls never cross an epoch (32 batches) and make at most k steps
    assert native.native.k == k


def test_sgd_f32_file_order_native_equals_the_python_step(tmp_path: Path) -> None:
    from presk.train.loop import Trainer
    made = subprocess.run([str(Path(sys.executable).parent / "presk"), "data", "linear",
                           "--count", "40", "--dtype", "f32", "-o",
                           str(tmp_path / "pairs32.psk.d")], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    program = tmp_path / "run.psk"
    program.write_text(SGD_RUN.format(tower=ROOT / "tutorial" / "06_tower.psk"))
    core, training = _load(program)
    # 6 batches an epoch (40 // 6, 4 samples dropped), 12 steps the schedule's horizon:
    # 20 steps run 8 past its end (a learning rate of 0)
    native = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=5)
    python = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=0)
    assert native.native is not None
    assert native.native.geometry.tensors == ((4, "f32", "f64"), (4, "f32", "f64"))
    _run(native, 20, True)
    _run(python, 20, False)
    assert native.history[-1].lr == 0.0 and native.history[3].lr > 0.0
    _same(native, python)


def test_all_f32_realization_native_equals_the_python_step(tmp_path: Path) -> None:
    """An all-f32 objective rounds the f64 master copies into buffers of its own: the
    native step rounds them there and widens the f32 gradient into the group's array
    itself, with the bits of the Python-driven step (which calls the objective with the
    parameters and hands AdamW the widened gradient); the master copies stay f64."""
    from presk.train.loop import Trainer
    sys.path.insert(0, str(ROOT / "bench"))
    from native import all_f32  # bench/native.py: every site and parameter f32

    from presk.analysis import entry as E
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    f32 = all_f32(core, E.prepare(core, "loss", dict(training.dims)), grad=True)
    native = Trainer.create(core, training, str(tmp_path / "a"), realization=f32,
                            steps_per_call=7)
    python = Trainer.create(core, training, str(tmp_path / "b"), realization=f32,
                            steps_per_call=0)
    assert not native.laid_out and native.native is not None and python.native is None
    assert [r[2:] for r in native.native.geometry.rounded] == [("f32", "f32")] * \
        len(native.params)
    _run(native, 40, True)  # into the second epoch (32 batches)
    _run(python, 40, False)
    assert all(p.dtype == np.float64 for p in native.params.values())
    assert len(native.history) == 40 and native.history[-1].epoch == 1
    _same(native, python)
    # the f32 objective at the f64 master copies, independently: the last loss logged
    # is the objective's value before the last update, so one more step's loss is
    # the objective at the parameters now
    loss, _ = python.objective(python.params, list(python.stream.read(
        python.stream.position)))
    assert native.advance(1)[0].loss == loss


def test_adamw_decay_wide_w1_constant_native_equals_the_python_step(tmp_path: Path) -> None:
    """The forms the tutorial's run does not take: decoupled weight decay, lerp's second
    form (1 − beta1 = 0.7 ≥ 0.5), the constant schedule; B = 5 over 256 samples (51 steps
    an epoch, one dropped sample), 60 steps into a second epoch."""
    from presk.train.loop import Trainer
    program = tmp_path / "run.psk"
    program.write_text(ADAMW_CONSTANT.format(tower=ROOT / "tutorial" / "06_tower.psk",
                                             data=ROOT / "tutorial" / "data" / "pairs.psk.d"))
    core, training = _load(program)
    native = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=64)
    python = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=0)
    assert native.native is not None and native.native.geometry.form == (True, False)
    _run(native, 60, True)
    _run(python, 60, False)
    assert native.history[-1].epoch == 1 and {r.lr for r in native.history} == {0.02}
    _same(native, python)


def test_two_steps_of_one_geometry_keep_their_own_arguments(tmp_path: Path) -> None:
    """Each loaded step module has its own argv global (the argument-free entry's): two
    trainers of one geometry in one process, stepped in turns by different amounts, each
    end where a lone Python-driven run of its length ends."""
    from presk.train.loop import Trainer
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    a = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=5)
    b = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=5)
    assert a.native.geometry == b.native.geometry
    assert a.native._argv_slot != b.native._argv_slot
    for _ in range(4):
        a.advance(3)
        b.advance(5)
    ref_a = Trainer.create(core, training, str(tmp_path / "c"), steps_per_call=0)
    ref_b = Trainer.create(core, training, str(tmp_path / "d"), steps_per_call=0)
    _run(ref_a, a.step, False)
    _run(ref_b, b.step, False)
    assert (a.step, b.step) == (10, 16)  # each trainer's first call makes one step (timed)
    _same(a, ref_a)
    _same(b, ref_b)
