"""`presk export --target pytorch --realize R`: the exported module stores each parameter
in the realization's type and computes each site in its site's type. Checked while it
runs: a tracer reads, after each statement of the generated code that computes a site,
the dtype of the tensor it bound, and each parameter's dtype; both must be the types the
realization gives (its listed sites and parameters; the followers as the recorded
PSK-Realize module has them). On the tutorial and the scaled Tower solved at 1e-3, the
exported module's loss is within the budget of the exact (MPFR, 128 bits) loss.
A ℝ[] parameter constructs, realized or not."""

from __future__ import annotations

import importlib
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import presk
from presk.cli.main import main
from solved_tutorial import tutorial_solved

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "tutorial" / "07_train.psk"
MIXED = ROOT / "test" / "fixtures" / "realization_mixed.json"
DTYPE = {"f64": torch.float64, "f32": torch.float32, "bf16": torch.bfloat16}
SITE_LINE = re.compile(r"^\s*(\w+) = .*  # (\S+/%\d+) .* in (f64|f32|bf16)$")


def export(program: Path, realization: Path, out: Path, *extra: str) -> dict:
    """Export under the realization and import the modules (removed from sys.modules
    afterwards by the caller's `forget`)."""
    assert main(["export", str(program), "--target", "pytorch", "--realize",
                 f"@{realization}", "-o", str(out), *extra]) == 0
    sys.path.insert(0, str(out))
    try:
        return {p.stem: importlib.import_module(p.stem) for p in sorted(out.glob("_*.py"))}
    finally:
        sys.path.remove(str(out))


def forget(modules: dict) -> None:
    for name in modules:
        sys.modules.pop(name, None)


class SiteDtypes:
    """sys.settrace over the generated files: after each statement that computes a site
    (`name = …  # site type in f32`), the dtype of the tensor `name` holds."""

    def __init__(self, directory: Path):
        self.lines: dict[tuple[str, int], tuple[str, str]] = {}
        for path in directory.glob("_*.py"):
            for no, text in enumerate(path.read_text().splitlines(), 1):
                m = SITE_LINE.match(text)
                if m:
                    self.lines[(str(path), no)] = (m.group(1), m.group(2))
        self.files = {f for f, _ in self.lines}
        self.seen: dict[str, set[torch.dtype]] = {}
        self.pending: dict[int, tuple[str, str]] = {}

    def _check(self, frame) -> None:
        name, site = self.pending.pop(id(frame), (None, None))
        value = frame.f_locals.get(name) if name else None
        if isinstance(value, torch.Tensor):
            self.seen.setdefault(site, set()).add(value.dtype)

    def trace(self, frame, event, arg):
        if frame.f_code.co_filename not in self.files:
            return None
        if event in ("line", "return"):
            self._check(frame)
            here = self.lines.get((frame.f_code.co_filename, frame.f_lineno))
            if event == "line" and here is not None:
                self.pending[id(frame)] = here
        return self.trace

    def run(self, fn, *args):
        sys.settrace(self.trace)
        try:
            return fn(*args)
        finally:
            sys.settrace(None)


def check_dtypes(out: Path, modules: dict, realization, tower_file: str, loss_file: str,
                 weights: dict, batch) -> float:
    """Build the root module with the realization's dtypes, check every parameter's and
    every site's dtype while the loss runs, and return the loss."""
    tower_mod, loss_mod = modules[tower_file], modules[loss_file]
    assert {k: v for k, v in tower_mod.PARAMETER_DTYPES.items()} == \
        {p: DTYPE[realization.param_type(p)] for p in weights}
    for site, t in realization.sites.items():
        assert loss_mod.SITE_DTYPES[site] == DTYPE[t], site
    theta = tower_mod.Tower(dtype=torch.float64)
    for path, p in theta.named_parameters():
        assert p.dtype == DTYPE[realization.param_type(path)], path
    theta.load_state_dict({k: torch.from_numpy(v) for k, v in weights.items()}, strict=True)
    for path, p in theta.named_parameters():  # load_state_dict copies into the dtype
        assert p.dtype == DTYPE[realization.param_type(path)], path
    tracer = SiteDtypes(out)
    loss = tracer.run(loss_mod.loss, theta, tuple(torch.from_numpy(a) for a in batch))
    assert tracer.seen, "no site traced"
    for site, dtypes in tracer.seen.items():
        assert dtypes == {loss_mod.SITE_DTYPES[site]}, (site, dtypes)
    assert set(tracer.seen) >= {s for s in realization.sites if s.startswith(("loss/",))}
    return loss.detach().item()


def test_the_mixed_fixture(tmp_path) -> None:
    """test/fixtures/realization_mixed.json: bf16 and f32 parameters, nine f32 sites."""
    from presk.pipeline import load_realization
    prog = presk.load(TUTORIAL)
    modules = export(TUTORIAL, MIXED, tmp_path / "out")
    try:
        real = load_realization(f"@{MIXED}")
        weights = prog.init("loss", B=4)
        (batch,) = prog.sample_inputs("loss", B=4)
        loss = check_dtypes(tmp_path / "out", modules, real, "_06_tower", "_07_train",
                            weights, batch)
        native = prog.compile("loss", B=4, realize=f"@{MIXED}")(weights, batch)
        assert abs(loss - native) <= 1e-6 * abs(native)  # the same types, other sums
    finally:
        forget(modules)


def exact_loss(prog, dims, weights, values):
    from presk.analysis import entry as E
    from presk.analysis.interpret import Interpreter
    from presk.analysis.numbers import number_system
    numbers = number_system(128)
    prepared = E.prepare(prog.core, "loss", dims)
    return Interpreter(prog.core, numbers).run(
        "loss", E.arguments(prepared, numbers, weights, values), prepared.dims)


@pytest.mark.slow
@pytest.mark.parametrize("program, B", [(TUTORIAL, 4), (ROOT / "bench" / "scaled_tower.psk", 2)],
                         ids=["tutorial", "scaled-tower"])
def test_solved_at_1e_3(program: Path, B: int, tmp_path) -> None:
    from presk.analysis.realization import save_realization
    from presk.analysis.solver import measure_error
    if program == TUTORIAL:
        prog, _, solution = tutorial_solved()  # shared with test_api_tour
    else:
        prog = presk.load(program)
        solution = prog.solve(prog.calibrate("loss", B=B), budget=1e-3)
    assert solution.inside
    save_realization(solution.realization, str(tmp_path / "real.json"))
    stem = "_07_train" if program == TUTORIAL else "_scaled_tower"
    tower = "_06_tower" if program == TUTORIAL else stem
    modules = export(program, tmp_path / "real.json", tmp_path / "out", "--dim", f"B={B}")
    try:
        weights = prog.init("loss", B=B)
        (batch,) = prog.sample_inputs("loss", B=B)
        loss = check_dtypes(tmp_path / "out", modules, solution.realization, tower, stem,
                            weights, batch)
    finally:
        forget(modules)
    values = {"batch.0": batch[0], "batch.1": batch[1]}
    error = measure_error({"result": np.asarray(loss)}, exact_loss(prog, {"B": B}, weights,
                                                                   values))
    print(f"\n{program.name}: {solution.realization.summary()}, the exported module's error "
          f"{error:.3e} against MPFR, the budget {solution.absolute:.3e} (Presk measured "
          f"{solution.measured:.3e})")
    assert error <= solution.absolute


SCALAR = """\
module Scale {
  param s : ℝ[] init = ones
  param w : ℝ[4] init = zeros
  fn apply(x : ℝ[batch: 2, model: 4]) -> ℝ[batch: 2, model: 4] = x * s + w
}

fn loss(θ : params Scale, x : ℝ[batch: 2, model: 4]) -> ℝ[] = mean(Scale.apply(θ, x))
"""


def test_a_scalar_parameter_constructs(tmp_path) -> None:
    (tmp_path / "scale.psk").write_text(SCALAR)
    (tmp_path / "real.json").write_text('{"format": "presk-realization/1", "sites": {}, '
                                        '"params": {"s": "f32"}}')
    for realized in (False, True):
        out = tmp_path / f"out{realized}"
        args = ["export", str(tmp_path / "scale.psk"), "--target", "pytorch", "-o", str(out)]
        if realized:
            args += ["--realize", f"@{tmp_path / 'real.json'}", "--entry", "loss"]
        assert main(args) == 0
        sys.path.insert(0, str(out))
        try:
            mod = importlib.import_module("_scale")
            theta = mod.Scale(dtype=torch.float64)
            assert theta.s.shape == () and theta.s.dtype == (torch.float32 if realized
                                                             else torch.float64)
            x = torch.ones(2, 4, dtype=torch.float64)
            assert mod.loss(theta, x).item() == 1.0
        finally:
            sys.path.remove(str(out))
            sys.modules.pop("_scale", None)
    shutil.rmtree(tmp_path / "outTrue")
