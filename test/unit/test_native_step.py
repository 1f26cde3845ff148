"""The training step in one native call (presk/train/native_step.py) computes the bits of the
step driven from Python (`Trainer.one_step`: the batch read by positioned reads, the
objective's native call, the schedule and the optimizer's scalars in Python floats, the
native update), step for step: every logged loss and learning rate, the final weights,
the optimizer's state and the stream's position, on the tutorial's run (AdamW, cosine
warmup, a shuffled stream) and on one that exercises the other paths (SGD with momentum
and weight decay, a linear schedule run past its end, an f32 data file in file order
widened into the f64 batch buffers)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]

# make test-fast leaves these cases out (test/conftest.py); make test runs them: the
# constant schedule with decay runs in test_calls_across_epochs_equal_steps_made_an_epoch_
# at_a_time[adamw-constant], all-f32 parameters in test_all_f32_realization_native_equals_
# the_python_step, the pool in test_a_wide_groups_step_on_the_pool_equals_the_python_step[f64],
# the builtin step in its gil-held case.
SLOW_CASES = {
    "test_calls_across_epochs_equal_steps_made_an_epoch_at_a_time[adamw-constant]",
    "test_the_builtin_step_is_run_of_one[gil-released]",
    "test_adamw_decay_wide_w1_constant_native_equals_the_python_step",
    "test_a_wide_groups_step_on_the_pool_equals_the_python_step[all-f32]",
}

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


def _adamw_constant_pair(tmp_path: Path):
    """ADAMW_CONSTANT's run as a native trainer and a Python-driven one."""
    from presk.train.loop import Trainer
    program = tmp_path / "run.psk"
    program.write_text(ADAMW_CONSTANT.format(tower=ROOT / "tutorial" / "06_tower.psk",
                                             data=ROOT / "tutorial" / "data" / "pairs.psk.d"))
    core, training = _load(program)
    return (Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=64),
            Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=0))


def test_adamw_decay_wide_w1_constant_native_equals_the_python_step(tmp_path: Path) -> None:
    """The forms the tutorial's run does not take: decoupled weight decay, lerp's second
    form (1 − beta1 = 0.7 ≥ 0.5), the constant schedule; B = 5 over 256 samples (51 steps
    an epoch, one dropped sample), 60 steps into a second epoch."""
    native, python = _adamw_constant_pair(tmp_path)
    assert native.native is not None and native.native.geometry.form == (True, False)
    _run(native, 60, True)
    _run(python, 60, False)
    assert native.history[-1].epoch == 1 and {r.lr for r in native.history} == {0.02}
    _same(native, python)


@pytest.mark.parametrize("beta", [0.9, 0.999, 0.3, 0.5, 0.0])
def test_a_spent_beta_makes_its_bias_correction_one(beta: float) -> None:
    """`spent(β)`: the first t with β**t ≤ 2^−60, and from there on 1 − β**t is 1 exactly
    (the step skips its pow calls there)."""
    from presk.train.native_step import SPENT, spent
    t = int(spent(beta))
    assert beta ** t <= SPENT and (t == 1 or beta ** (t - 1) > SPENT)
    assert all(1.0 - beta ** u == 1.0 and (1.0 - beta ** u) ** 0.5 == 1.0
               for u in range(t, t + 5000))
    assert spent(1.0) == spent(-0.5) == math.inf


def test_steps_across_the_betas_spent_counts_equal_the_python_step(tmp_path: Path) -> None:
    """Native steps whose bias corrections become 1 mid-call (the optimizer's count moved
    to just before β₁ = 0.3's, then β₂ = 0.999's spent count) make the Python-driven
    steps' bits, which compute every pow."""
    from presk.train.native_step import spent
    native, python = _adamw_constant_pair(tmp_path)
    for start in (spent(0.3) - 4, spent(0.999) - 4):
        for trainer in (native, python):
            trainer.optimizer.steps = int(start)
        steps = native.step + 8
        _run(native, steps, True)
        _run(python, steps, False)
        _same(native, python)
    assert native.optimizer.steps == python.optimizer.steps == spent(0.999) + 4


def test_two_steps_of_one_geometry_keep_their_own_arguments(tmp_path: Path,
                                                            monkeypatch) -> None:
    """Each loaded step module has its own argv global (the argument-free entry's): two
    trainers of one geometry in one process, stepped in turns by different amounts, each
    end where a lone Python-driven run of its length ends."""
    from presk.train import loop
    from presk.train.loop import Trainer
    monkeypatch.setattr(loop, "CALL_SECONDS", 1e6)  # calls end where the counts say only
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


def test_one_step_at_a_time_is_run_of_one(tmp_path: Path) -> None:
    """`NativeStep.step` (one step, its loss a float) makes `run(1, …)`'s step: the same
    loss, parameters and optimizer state, call after call — after a `run` into another
    caller's buffers too; a batch past the order's end is refused."""
    from presk.train.loop import Trainer
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    a = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=5)
    b = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=5)
    order = np.arange(a.stream.header.count, dtype=np.int64)[::-1].copy()
    batch = a.native.geometry.batch
    elsewhere = np.zeros((2, 5))
    for t in range(6):
        first = (t * batch) % (order.size - batch)
        if t == 3:  # a's run writes its losses and learning rates elsewhere
            a.native.run(1, t, first, order, (elsewhere[0].ctypes.data,
                                              elsewhere[1].ctypes.data))
            loss = float(elsewhere[0][0])
        else:
            loss = a.native.step(t, first, order)
        losses, _ = b.native.run(1, t, first, order)
        assert type(loss) is float and loss == losses[0], t
    _same(a, b)
    with pytest.raises(ValueError, match="steps from place"):
        a.native.step(6, order.size - batch + 1, order)



@pytest.mark.parametrize("release", [False, True], ids=["gil-held", "gil-released"])
def test_the_builtin_step_is_run_of_one(tmp_path: Path, monkeypatch, release: bool) -> None:
    """`NativeStep.stepper()`'s builtin (presk/train/step_builtin.py) makes `run(1, …)`'s
    steps: `step(t0, first, order)` that one, `step()` the next (t0 + 1, the next batch,
    the order's first again after its last whole batch), the same bits call after call;
    what its fast path does not take goes to the Python twin, which raises or rebinds; a
    `run` ends the sequence; the builtin frees what it holds. `gil-released`: the step
    built to release the GIL while it runs (the threshold lowered, the cache off)."""
    import gc

    from presk.train import native_step as NS
    from presk.train import step_builtin as SB
    from presk.train.loop import Trainer
    if release:
        monkeypatch.setattr(NS, "RELEASE_GIL_AT", 1)
        monkeypatch.setenv("PRESK_CACHE", "off")
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    a = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=5)
    b = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=5)
    assert ("call @PyEval_SaveThread" in str(NS.build_step(a.native.geometry)[0])) is release
    order = np.arange(a.stream.header.count, dtype=np.int64)[::-1].copy()
    batch, places = a.native.geometry.batch, order.size
    step, live = a.native.stepper(), len(SB._LIVE)
    assert type(step).__name__ == "builtin_function_or_method"
    first = places - 2 * batch
    for t in range(5):
        loss = step(t, first, order) if t == 0 else step()
        losses, _ = b.native.run(1, t, first, order)
        assert type(loss) is float and loss == losses[0], t
        assert (a.native.ctl[1], a.native.ctl[2]) == (
            t + 1, first + batch if first + 2 * batch <= places else 0), t
        first = int(a.native.ctl[2])
    moved = order.copy()  # another order: rebound by the Python twin, then fast again
    for t in (5, 6):
        assert step(t, 0, moved) == b.native.run(1, t, 0, moved)[0][0]
    _same(a, b)
    for bad, error in [((1.5, 0, moved), TypeError), ((7, places, moved), ValueError),
                       ((7, 0), TypeError)]:
        with pytest.raises(error):
            step(*bad)
    with pytest.raises(TypeError, match="keyword"):
        step(7, 0, moved, extra=1)
    a.native.run(1, 7, 0, moved)
    with pytest.raises(ValueError, match="no step to go on from"):
        step()
    del step
    gc.collect()
    assert len(SB._LIVE) == live - 1


def _epoch_at_a_time(trainer, steps: int) -> None:
    """Native calls that end at each epoch's end, as `advance` made them before calls ran
    on across epochs."""
    per_epoch = trainer.stream.steps_per_epoch
    while trainer.step < steps:
        trainer.advance(min(steps - trainer.step, per_epoch - trainer.stream.position.index))


@pytest.mark.parametrize("program", ["tutorial", "adamw-constant"])
def test_calls_across_epochs_equal_steps_made_an_epoch_at_a_time(tmp_path: Path, monkeypatch,
                                                                 program: str) -> None:
    """One native call that spans epochs' ends (up to 256 steps: the tutorial's 32 batches
    an epoch, or 51 of B = 5 with a sample dropped) gives the losses, learning rates,
    records (each step's own epoch), parameters, optimizer state and stream position of
    calls that stop at each epoch's end; every epoch number is the step's."""
    from presk.train import loop
    from presk.train.loop import Trainer
    monkeypatch.setattr(loop, "CALL_SECONDS", 1e6)  # calls end where the counts say only
    if program == "tutorial":
        path = ROOT / "tutorial" / "07_train.psk"
    else:
        path = tmp_path / "run.psk"
        path.write_text(ADAMW_CONSTANT.format(tower=ROOT / "tutorial" / "06_tower.psk",
                                              data=ROOT / "tutorial" / "data" / "pairs.psk.d"))
    core, training = _load(path)
    across = Trainer.create(core, training, str(tmp_path / "a"), steps=600,
                            steps_per_call=256)
    apart = Trainer.create(core, training, str(tmp_path / "b"), steps=600,
                           steps_per_call=256)
    per_epoch = across.stream.steps_per_epoch
    made, spans = [], []
    for limit in (1, 300, 37, 200, 106):  # calls from mid-epoch and from an epoch's start
        records = across.advance(limit)
        made.append(len(records))
        spans.append({r.epoch for r in records})
    assert made == [1, 256, 37, 200, 106] and across.step == 600  # k = 256 caps the 2nd
    assert sum(len(s) >= 2 for s in spans) >= 3 and max(len(s) for s in spans) >= 5
    _epoch_at_a_time(apart, 600)
    _same(across, apart)
    assert [r.epoch for r in across.history] == [(r.step - 1) // per_epoch
                                                 for r in across.history]


def test_a_checkpoint_due_mid_call_is_honoured(tmp_path: Path) -> None:
    """`run_steps` never lets a call pass a due checkpoint (every 50 steps, epochs of 32,
    256 steps a call): every call ends at or before the next multiple of 50, and the log
    and checkpoints are, byte for byte, those of the Python-driven step."""
    from presk.train import loop
    from presk.train.loop import LOG, LogWriter, Trainer, run_steps
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    ends: list[int] = []
    for name, k in (("native", 256), ("python", 0)):
        trainer = Trainer.create(core, training, str(tmp_path / name), steps=160,
                                 steps_per_call=k)
        (tmp_path / name).mkdir()
        log = LogWriter(str(tmp_path / name / LOG), trainer.history)
        assert run_steps(trainer, log, (lambda r: ends.append(r.step)) if k else None)
    assert ends[-1] == 160 and {50, 100, 150} <= set(ends)
    assert all(a // 50 == (b - 1) // 50 for a, b in zip([0, *ends], ends)), ends
    assert max(b - a for a, b in zip([0, *ends], ends)) > 32  # calls crossed epochs
    native, python = tmp_path / "native", tmp_path / "python"
    files = sorted(p.relative_to(native) for p in native.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(python) for p in python.rglob("*") if p.is_file())
    assert len([f for f in files if f.suffix == ".safetensors"]) >= 3
    for f in files:
        assert (native / f).read_bytes() == (python / f).read_bytes(), f
    assert loop.CALL_SECONDS > 0


WIDE_RUN = """\
import "{linear}" as lin
dim B

fn loss(θ : params lin.Linear{{256, 256}}, batch : (ℝ[batch: B, model: 256], ℝ[batch: B, model: 256])) -> ℝ[] =
  let (x, y) = batch
  mean((lin.Linear.apply(θ, x) - y)^2)

optimizer adamw {{
  lr           : f64 = 0.01
  weight_decay : f64 = 0.01
  schedule     : cosine(warmup = 2)
}}

training run {{
  model     = lin.Linear{{256, 256}}
  objective = loss
  optimizer = adamw
  data      = stream "wide.psk.d" |> shuffle(seed = 3) |> batch(B = {batch})
  epochs    : nat = 2
}}
"""


@pytest.mark.parametrize("f32", [False, True], ids=["f64", "all-f32"])
def test_a_wide_groups_step_on_the_pool_equals_the_python_step(tmp_path: Path,
                                                                f32: bool) -> None:
    """65 792 parameters (past native_optim.SPLIT_ELEMENTS): the step's AdamW update runs
    in ranges on the worker pool, every step of a call — the Python-driven step's bits;
    all-f32, the parameters' rounding into the objective's buffers and the gradient's
    widening too, and the batch's gather (64 rows of 512 reals, rounded to f32)."""
    from presk.runtime import pool
    from presk.train.loop import Trainer
    from presk.train.native_optim import update_parts
    if update_parts(65_792) < 2:
        pytest.skip(f"no second worker here (pool: {pool.available()})")
    made = subprocess.run([str(Path(sys.executable).parent / "presk"), "data", "linear",
                           "--count", "200", "--width", "256", "-o",
                           str(tmp_path / "wide.psk.d")], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    program = tmp_path / "run.psk"
    program.write_text(WIDE_RUN.format(linear=ROOT / "tutorial" / "01_linear.psk",
                                       batch=64 if f32 else 4))
    core, training = _load(program)
    real = None
    if f32:
        sys.path.insert(0, str(ROOT / "bench"))
        from native import all_f32  # bench/native.py: every site and parameter f32

        from presk.analysis import entry as E
        real = all_f32(core, E.prepare(core, "loss", dict(training.dims)), grad=True)
    native = Trainer.create(core, training, str(tmp_path / "a"), steps_per_call=5,
                            realization=real)
    python = Trainer.create(core, training, str(tmp_path / "b"), steps_per_call=0,
                            realization=real)
    assert native.native is not None and native.native.geometry.parts >= 2
    assert bool(native.native.geometry.rounded) == f32
    _run(native, 12, True)
    _run(python, 12, False)
    _same(native, python)


def test_a_mixed_realization_with_bf16_parameters_native_equals_the_python_step(
        tmp_path: Path) -> None:
    """The tutorial under test/fixtures/realization_mixed.json (a solved realization: w
    f32, γ and b bf16): the objective's own buffers are f32 and bf16, and the native step
    rounds the f64 master copies into them (bf16 through f32 rounded to odd, as
    `to_storage` does) and widens the gradients back, with the bits of the Python-driven
    step, call after call."""
    from presk.analysis.realization import load_realization
    from presk.train.loop import Trainer
    core, training = _load(ROOT / "tutorial" / "07_train.psk")
    mixed = load_realization(str(ROOT / "test" / "fixtures" / "realization_mixed.json"))
    native = Trainer.create(core, training, str(tmp_path / "a"), realization=mixed,
                            steps_per_call=7)
    python = Trainer.create(core, training, str(tmp_path / "b"), realization=mixed,
                            steps_per_call=0)
    assert not native.laid_out and native.native is not None and python.native is None
    types = {r[2] for r in native.native.geometry.rounded}
    assert types == {"f32", "bf16"}
    # a master copy just above a bf16 midpoint (1 + 2⁻⁸ + 2⁻⁴⁰): rounded to f32 first it
    # would land on the midpoint and round to even (1); one correct rounding takes it up
    for name, ty in mixed.params.items():
        if ty == "bf16":
            for t in (native, python):
                t.params[name].reshape(-1)[0] = 1 + 2.0 ** -8 + 2.0 ** -40
    _run(native, 40, True)
    _run(python, 40, False)
    _same(native, python)
