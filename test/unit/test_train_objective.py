"""The training objective as native code (presk/train/objective.py) computes what `presk
run --grad` computes: the loss and its gradient of the kernel engine, bit for bit, under
all-f64 and under a mixed realization (parameters and batch rounded into their buffers'
types each call), and its buffers are reused from call to call."""

from __future__ import annotations

import numpy as np
import pytest

from presk.analysis import entry as E
from presk.pipeline import load_core, run_kernel
from presk.train.objective import NativeObjective
from programs import AT_MIXED, TRAIN

# make test-fast leaves these cases out (test/conftest.py); make test runs them
# (each over 2 s of CPU; a lighter case of the same feature stays in the fast set).
SLOW_CASES = {
    "test_value_and_gradient_are_the_kernel_engines[mixed]",
}




@pytest.mark.parametrize("realization", [None, AT_MIXED], ids=["f64", "mixed"])
def test_value_and_gradient_are_the_kernel_engines(realization, monkeypatch, tmp_path):
    monkeypatch.setenv("PRESK_CACHE_DIR", str(tmp_path))
    core, _ = load_core(TRAIN)
    objective = NativeObjective(core, "loss", {"B": 8}, realization)
    prepared = E.prepare(core, "loss", {"B": 8})
    assert objective.batch_names == ["batch.0", "batch.1"]
    rng = np.random.default_rng(5)
    for step in range(3):  # new parameters and batches each call, the same buffers
        params = {f.path: rng.standard_normal(f.shape) for f in prepared.fields}
        batch = {n: rng.standard_normal(s) for n, s in prepared.inputs.items()}
        loss, grads = objective(params, [batch["batch.0"], batch["batch.1"]])
        want = run_kernel(core, "loss", {"B": 8}, params, batch, realization, grad=True).result
        assert np.float64(loss).tobytes() == want["result"].tobytes()
        assert sorted(grads) == sorted(f.path for f in prepared.fields)
        for path, g in grads.items():
            assert g.tobytes() == want[f"grad.{path}"].tobytes(), (step, path)


def test_a_laid_out_run_has_the_bits_of_a_copying_one(monkeypatch, tmp_path) -> None:
    """All-f64: the native code reads the parameters from the optimizer's arrays and
    writes the gradient there (no copies); 100 steps end at the bits of a run that copies
    parameters and gradients in and out each step."""
    from presk.train.loop import Trainer
    core, program = load_core(TRAIN)
    training = program.main.trainings["run"]
    laid = Trainer.create(core, training, str(tmp_path / "a"), steps=100)
    assert laid.laid_out
    monkeypatch.setattr(NativeObjective, "can_bind", lambda self, dtype: False)
    copying = Trainer.create(core, training, str(tmp_path / "b"), steps=100)
    assert not copying.laid_out
    for _ in range(100):
        a, b = laid.one_step(), copying.one_step()
        assert np.float64(a.loss).tobytes() == np.float64(b.loss).tobytes()
    for path, value in laid.params.items():
        assert value.tobytes() == copying.params[path].tobytes(), path
