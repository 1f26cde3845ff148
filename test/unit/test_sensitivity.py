"""The sensitivities (presk.analysis.sensitivity, §6.2): ‖∂L/∂v‖₁ at each site from one
reverse sweep at 128 bits, against finite differences.

The finite differences perturb the value of a site itself: the MPFR interpreter runs the
forward program (not differentiated) at 256 bits, and where the site's op executes for the
k-th time it adds ±h to one element of its value (a tensor's, a tuple's or a parameter
tree's); (L(+h) − L(−h)) / 2h, h = 1e-30, is ∂L/∂v at that element to far better than
1e-20 relative (truncation O(h²), rounding about 2⁻²⁵⁶/h ≈ 1e-47). The sum of their
magnitudes over the elements and over every execution of the site (every call, every fold
iteration) is the figure the sweep must give. This checks every site, the ones whose
cotangent is a marked op, those that share one (add's operands, sub's right side held
negated), a function's result (the .bwd's dy), and the values computed from no
differentiable argument (`real eps`, `real(c) * 2.0`, constants), whose cotangent only the
`all_values` sweep computes.
"""

from __future__ import annotations

import argparse
from functools import lru_cache
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np
import pytest

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import MPFR
from presk.analysis.sensitivity import (
    norm1, ranked, reached, report, sci, sensitivities, site_ops,
)
from presk.analysis.weights import load_tensors
from presk.cli.common import UsageError
from presk.cli.sensitivity_cmds import add_to_dump, dump_sensitivity
from presk.dialects import core as C
from presk.frontend.elaborate import elaborate
from presk.frontend.lower import lower_program
from presk.transforms.differentiate import Differentiator, differentiable
from programs import ROOT, presk, program as load

TRAIN = str(ROOT / "tutorial" / "07_train.psk")

FD_BITS, H, BOUND = 256, "1e-30", 1e-20

# A small program of its own: a call made three times (twice in a fold, once after it), a
# stack, a hyperparameter made real and scaled (`k`, from no differentiable argument),
# constants, `add` and `sub` passing cotangents through, a tuple, and a value nothing reads.
SMALL = """
dim B
const D : nat = 3

module Scale {
  param s : ℝ[D]  init = normal(mean = 1, std = 0.5)
  param t : ℝ[D]  init = normal(mean = 0, std = 0.5)

  fn apply(x : ℝ[..., model: D], c : f64 = 0.5) -> ℝ[..., model: D] =
    let k = real(c) * 2.0
    let u = x * s + t
    tanh(u + k) - 0.3 * u
}

module Step {
  use sc : Scale

  fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] =
    x + sc.apply(x)
}

module Net {
  use layers : stack{2}(Step)
  use head  : Scale

  fn apply(x : ℝ[..., model: D]) -> ℝ[..., model: D] =
    head.apply(layers.apply(x), 0.25)
}

fn loss(θ : params Net, batch : (ℝ[batch: B, model: 3], ℝ[batch: B, model: 3])) -> ℝ[] =
  let (x, y) = batch
  let unused = exp(x)
  let d = Net.apply(θ, x) - y
  sum(d * d) / 2.0 + mean(sin(x)) * real(0.1)
"""

# The 28 sites of the reference's §6.2 table (every site of the tutorial's loss that holds
# a real tensor or a parameter tree; the f64 constants Block.apply/%3 and Tower.apply/%5
# are not sites of it).
REFERENCE_SITES = {
    "Tower.apply/%2", "Block.apply/%6", "RMSNorm.apply/%10", "RMSNorm.apply/%8",
    "Tower.apply/%6", "loss/%3", "loss/%4", "loss/%5", "RMSNorm.apply/%9", "Tower.apply/%4",
    "RMSNorm.apply/%7", "Block.apply/%5", "Linear.apply/%2", "Block.apply/%7",
    "Block.apply/%8", "Linear.apply/%3", "Linear.apply/%5", "RMSNorm.apply/%5",
    "RMSNorm.apply/%3", "RMSNorm.apply/%4", "RMSNorm.apply/%6", "loss/%6", "loss/%7",
    "Linear.apply/%4", "Tower.apply/%3", "loss/%2", "Block.apply/%4", "Block.apply/%2",
}


@lru_cache(maxsize=None)
def program(source: str, tmp: str = "") -> Any:
    if source == TRAIN:
        return load(TRAIN)
    path = Path(tmp) / "small.psk"
    path.write_text(source, encoding="utf-8")
    return lower_program(elaborate(str(path)))


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Any:
    return program(SMALL, str(tmp_path_factory.mktemp("sens")))


def setup(module, dims: dict[str, int], seed: int = 0):
    entry = E.prepare(module, "loss", dims)
    return entry, E.weights(entry, seed, None), E.inputs(entry, seed, None)


@lru_cache(maxsize=None)
def tutorial(batch: int = 4, remat: str = "store"):
    module = program(TRAIN)
    _, params, values = setup(module, {"B": batch})
    return sensitivities(module, "loss", {"B": batch}, params, values, 128, remat)


# ---- finite differences at a site ---------------------------------------------------------

def leaves(value: Any) -> int:
    if isinstance(value, Tree):
        return sum(int(np.size(a)) for _, a in value.items())
    if isinstance(value, tuple):
        return sum(leaves(v) for v in value)
    return int(np.size(value))


def perturbed(value: Any, j: int, delta: Any) -> Any:
    """The value with delta added to its j-th element (trees and tuples in order)."""
    if isinstance(value, Tree):
        for path, array in value.items():
            if j < np.size(array):
                data = dict(value.data)
                full = value.prefix + path
                data[full] = np.array(data[full], dtype=object)
                view = data[full][value.select] if value.select else data[full]
                view.flat[j] = view.flat[j] + delta
                return Tree(data, value.prefix, value.select)
            j -= int(np.size(array))
        raise IndexError(j)
    if isinstance(value, tuple):
        items = list(value)
        for i, item in enumerate(items):
            if j < leaves(item):
                items[i] = perturbed(item, j, delta)
                return tuple(items)
            j -= leaves(item)
        raise IndexError(j)
    array = np.array(value, dtype=object)
    array.flat[j] = array.flat[j] + delta
    return array


class Perturbing(Interpreter):
    """Adds `delta` to element j of the k-th value the op at `site` computes; records how
    many times it executes and the values it computed."""

    def aim(self, site: str, k: int = -1, j: int = 0, delta: Any = 0) -> None:
        self.site, self.k, self.j, self.delta = site, k, j, delta
        self.values: list[Any] = []

    def step(self, op, args, dims=None, prefix=None):
        value = super().step(op, args, dims, prefix)
        if op.site.data == self.site:
            if len(self.values) == self.k:
                value = perturbed(value, self.j, self.delta)
            self.values.append(value)
        return value


def finite_difference(module, dims, params, values, site: str) -> Any:
    """Σ over the site's executions and elements of |∂L/∂v| by central differences."""
    numbers = MPFR(FD_BITS)
    entry = E.prepare(module, "loss", dims)
    args = E.arguments(entry, numbers, params, values)
    it = Perturbing(module, numbers)
    it.aim(site)
    it.run("loss", args, dims)
    runs = [leaves(v) for v in it.values]
    assert runs, f"{site} never executes"
    with numbers.context():
        h = gmpy2.mpfr(H)
        total = gmpy2.mpfr(0)
        for k, count in enumerate(runs):
            for j in range(count):
                it.aim(site, k, j, h)
                up = it.run("loss", args, dims)
                it.aim(site, k, j, -h)
                down = it.run("loss", args, dims)
                total += abs((up - down) / (2 * h))
    return total


def assert_close(got: Any, want: Any, what: str) -> None:
    got, want = gmpy2.mpfr(got, FD_BITS), gmpy2.mpfr(want, FD_BITS)
    scale = max(abs(want), gmpy2.mpfr(1e-10))
    assert abs(got - want) <= BOUND * scale, f"{what}: sweep {got}, differences {want}"


# ---- the tests ------------------------------------------------------------------------------

def test_every_site_of_a_small_program_against_finite_differences(small) -> None:
    dims = {"B": 2}
    _, params, values = setup(small, dims)
    s = sensitivities(small, "loss", dims, params, values)
    assert set(s.functions) == {"loss", "Net.apply", "Step.apply", "Scale.apply"}
    # Scale.apply runs three times (twice in the fold, once for the head): each sums.
    assert s.calls == {"loss": 1, "Net.apply": 1, "Step.apply": 2, "Scale.apply": 3}
    for site, value in s.sites.items():
        assert_close(value, finite_difference(small, dims, params, values, site), site)
    # What the cases are: k = real(c) * 2.0 (inactive, and the `real` and constant under
    # it), a value nothing reads, the result's own site.
    for inactive in ("Scale.apply/%3", "Scale.apply/%4", "Scale.apply/%5", "loss/%9",
                     "loss/%14"):
        assert inactive in s.recorded and s.sites[inactive] > 0
    assert s.sites["loss/%4"] == 0 and "loss/%4" not in s.recorded  # `unused`
    assert s.sites["loss/%16"] == 1


def test_every_site_of_the_tutorial_against_finite_differences() -> None:
    module = program(TRAIN)
    dims = {"B": 2}
    _, params, values = setup(module, dims)
    s = tutorial(2)
    assert set(s.sites) == REFERENCE_SITES
    for site, value in s.sites.items():
        assert_close(value, finite_difference(module, dims, params, values, site), site)


def active_sites(module, names: list[str]) -> set[str]:
    """The sites that depend on a differentiable argument of their function."""
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    out = set()
    for name in names:
        func = funcs[name]
        active = {a for a in func.args if differentiable(a.type)}
        for op in func.body.block.ops:
            if op.results and differentiable(op.results[0].type) and \
                    any(o in active for o in op.operands):
                active.add(op.results[0])
                out.add(op.site.data)
    return out


def test_every_active_site_of_the_tutorial_has_a_sensitivity() -> None:
    module = program(TRAIN)
    s = tutorial()
    active = active_sites(module, reached(module, "loss"))
    assert len(active) == 27 and "RMSNorm.apply/%5" not in active
    # Each has a cotangent read off the sweep (not a default), and a positive one.
    assert active <= s.recorded
    assert all(s.sites[site] > 0 for site in active)
    # So has the one computed from no differentiable argument, `real eps`: and the figure
    # is the sum_to of d%6 over the batch, summed over the four calls.
    assert "RMSNorm.apply/%5" in s.recorded and s.sites["RMSNorm.apply/%5"] > 0
    # Every site is listed, in its function.
    funcs = {op.sym_name.data: op for op in module.ops if isinstance(op, C.FuncOp)}
    for name, sites in s.functions.items():
        assert sites == [op.site.data for op in site_ops(funcs[name])]
    assert set(s.sites) == REFERENCE_SITES


def test_the_loss_result_has_sensitivity_one() -> None:
    s = tutorial()
    assert s.sites["loss/%7"] == 1          # dy = 1, the reference's `loss/%7 1.0000e0`
    assert s.sites["loss/%6"] == 1          # mean: 16 elements of 1/16


def test_shared_cotangents_have_one_figure() -> None:
    s = tutorial()
    # sub %4, y: both sides carry d%5 (y's negated), and %4 is Tower.apply's result.
    assert s.sites["loss/%3"] == s.sites["loss/%4"] == s.sites["loss/%5"] \
        == s.sites["Tower.apply/%6"]
    # Block.apply/%7 = call Linear.apply, read by `add x, %7`: it shares the block's dy,
    # and so does Linear.apply/%3, `add %3, b` in Linear.apply.
    assert s.sites["Block.apply/%7"] == s.sites["Block.apply/%8"]
    assert s.sites["Linear.apply/%3"] == s.sites["Linear.apply/%5"] == s.sites["Block.apply/%7"]
    # RMSNorm: %4 (ms) and %6 = add ms, %5 share d%6.
    assert s.sites["RMSNorm.apply/%4"] == s.sites["RMSNorm.apply/%6"]


def test_parameters_equal_the_one_norms_of_presk_run_grad(tmp_path: Path) -> None:
    out = tmp_path / "g.safetensors"
    done = presk("run", TRAIN, "--entry", "loss", "--dim", "B=4", "--grad", "--out", str(out))
    assert done.returncode == 0, done.stderr
    grads = {k[len("grad."):]: v for k, v in load_tensors(str(out)).items()
             if k.startswith("grad.")}
    s = tutorial()
    assert set(s.params) == set(grads) == {"blocks.norm.γ", "blocks.proj.w", "blocks.proj.b",
                                           "final.γ"}
    for path, g in grads.items():
        want = float(np.abs(np.asarray(g, dtype=np.float64)).sum())
        assert abs(float(s.params[path]) - want) <= 1e-14 * want, path
    # A parameter tree's site is the 1-norm of its cotangent tree: Tower.apply/%2 (θ.blocks)
    # holds the three stacked tensors, Tower.apply/%4 (θ.final) final.γ; Block.apply's
    # fields summed over the fold's iterations give the stacked ones.
    with gmpy2.context(precision=128):
        blocks = s.params["blocks.norm.γ"] + s.params["blocks.proj.w"] + s.params["blocks.proj.b"]
        assert abs(s.sites["Tower.apply/%2"] - blocks) <= 1e-35
        assert abs(s.sites["Tower.apply/%4"] - s.params["final.γ"]) <= 1e-35
        assert abs(s.sites["Block.apply/%2"] - s.params["blocks.norm.γ"]) <= 1e-35
        assert abs(s.sites["Linear.apply/%2"] - s.params["blocks.proj.w"]) <= 1e-35
        assert abs(s.sites["Linear.apply/%4"] - s.params["blocks.proj.b"]) <= 1e-35


def test_per_function_sums_add_up_the_sites() -> None:
    s = tutorial()
    sums = s.per_function()
    assert list(sums) == ["Linear.apply", "RMSNorm.apply", "Block.apply", "Tower.apply", "loss"]
    with gmpy2.context(precision=128):
        for name, sites in s.functions.items():
            total = gmpy2.mpfr(0)
            for site in sites:
                assert site.startswith(name + "/%")
                total += s.sites[site]
            assert sums[name] == total
        every = gmpy2.mpfr(0)
        for v in s.sites.values():
            every += v
        assert abs(sum(sums.values()) - every) <= 1e-35 * every


def test_remat_recompute_gives_the_same_figures() -> None:
    store, recompute = tutorial(4, "store"), tutorial(4, "recompute")
    assert store.sites == recompute.sites and store.params == recompute.params


def test_the_default_sweep_is_unchanged_by_all_values() -> None:
    """all_values adds cotangents only to values no argument's depends on: the gradient
    is the same, bit for bit, and the default sweep carries no adjoint_dy."""
    module = program(TRAIN)
    entry, params, values = setup(module, {"B": 4})
    grads = []
    for all_values in (False, True):
        m = module.clone()
        Differentiator(m, "store", all_values).run(["loss"])
        bwd = {op.sym_name.data: op for op in m.ops if isinstance(op, C.FuncOp)}["loss.bwd"]
        assert ("adjoint_dy" in bwd.attributes) is all_values
        numbers = MPFR(128)
        args = E.arguments(E.prepare(m, "loss", {"B": 4}), numbers, params, values)
        with numbers.context():
            one = numbers.constant(1.0)
        _, d_theta, _ = Interpreter(m, numbers).run("loss.value_vjp", args + [one], {"B": 4})
        grads.append({k: [str(v) for v in np.ravel(a)] for k, a in d_theta.items()})
    assert grads[0] == grads[1]


def test_norm1() -> None:
    with gmpy2.context(precision=128):
        a = np.array([gmpy2.mpfr(-1.5), gmpy2.mpfr(2)], dtype=object)
        assert norm1(a) == 3.5
        assert norm1((a, gmpy2.mpfr(-0.25))) == 3.75
        assert norm1(Tree({"w": a, "b": np.array([gmpy2.mpfr(-1)], dtype=object)})) == 4.5


# ---- the command ------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--entry")
    p.add_argument("--remat", choices=["store", "recompute"], default="store")
    add_to_dump(p)
    return p


def dump(capsys, *argv: str) -> str:
    assert dump_sensitivity(parser().parse_args(list(argv))) == 0
    return capsys.readouterr().out


def test_dump_prints_the_two_tables(capsys) -> None:
    out = dump(capsys, TRAIN, "--entry", "loss", "--dim", "B=4").splitlines()
    s = tutorial()
    assert out[0] == ("-- sensitivity of `loss`: ‖∂L/∂v‖₁ at each site, one reverse sweep "
                      "at 128 bits")
    assert out[1] == "module                                 Σ ‖∂L/∂v‖₁"
    sums = ranked(s.per_function())
    assert out[2:7] == [name + " " * (49 - len(name) - len(sci(v))) + sci(v) for name, v in sums]
    assert out[7] == "" and out[8] == "site                                     ‖∂L/∂v‖₁"
    rows = out[9:]
    assert len(rows) == 28  # every site: fewer than the default 30
    assert [r.split()[0] for r in rows] == [site for site, _ in ranked(s.sites)]
    values = [float(r.split()[1]) for r in rows]
    assert values == sorted(values, reverse=True)
    assert "loss/%7                                  1.0000e0" in rows
    assert all(len(r) == 49 for r in out[1:] if r)


def test_dump_sites_and_bits(capsys) -> None:
    out = dump(capsys, TRAIN, "--entry", "loss", "--dim", "B=4", "--sites", "3", "--bits", "64")
    lines = out.splitlines()
    assert lines[0].endswith("one reverse sweep at 64 bits")
    assert len(lines) == 9 + 3
    assert lines[9].startswith("Tower.apply/%2")
    assert sci(gmpy2.mpfr("1.40796")) == "1.4080e0" and sci(0.98) == "9.8000e-1"


def test_dump_reads_weights_and_inputs(capsys, tmp_path: Path) -> None:
    from presk.analysis.weights import save_tensors
    module = program(TRAIN)
    _, params, values = setup(module, {"B": 4}, seed=7)
    save_tensors({k: v * 0.5 for k, v in params.items()}, str(tmp_path / "w.safetensors"))
    save_tensors({"batch.1": values["batch.1"]}, str(tmp_path / "i.safetensors"))
    out = dump(capsys, TRAIN, "--entry", "loss", "--dim", "B=4", "--seed", "7", "--weights",
               str(tmp_path / "w.safetensors"), "--inputs", str(tmp_path / "i.safetensors"))
    want = sensitivities(module, "loss", {"B": 4}, {k: v * 0.5 for k, v in params.items()},
                         values)
    assert report(want) == out.rstrip("\n")


@pytest.mark.parametrize("argv, message", [
    ([TRAIN, "--dim", "B=4"], "needs --entry"),
    ([TRAIN, "--entry", "loss"], "--dim B=N"),
    ([TRAIN, "--entry", "nope", "--dim", "B=4"], "no function `nope`"),
    ([str(ROOT / "tutorial" / "06_tower.psk"), "--entry", "Tower.apply"], "`...` has no value"),
])
def test_dump_refuses_in_one_line(argv, message) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        dump_sensitivity(parser().parse_args(argv))


def test_a_tensor_result_has_per_element_sensitivities(tmp_path: Path, capsys) -> None:
    """f(x) = tanh(x) · w over ℝ[3]: ∂f_j/∂(tanh x) = w_j e_j, so each element's
    ‖∂f_j/∂v‖₁ is |w_j| and the site's figure max_j |w_j|; ∂f_j/∂w = tanh(x_j) e_j; a tuple
    result is refused."""
    path = tmp_path / "vec.psk"
    path.write_text("module M { param w : ℝ[3] init = normal }\n"
                    "fn f(θ : params M, x : ℝ[3]) -> ℝ[3] = tanh(x) * θ.w\n",
                    encoding="utf-8")
    from presk.pipeline import load_core
    module, _ = load_core(str(path))
    prepared = E.prepare(module, "f", {})
    params, values = E.weights(prepared, 0, None), E.inputs(prepared, 0, None)
    s = sensitivities(module, "f", {}, params, values)
    w = np.abs(params["w"])
    assert s.shape == (3,)
    assert [float(c["f/%2"]) for c in s.components] == pytest.approx(list(w), rel=1e-12)
    assert float(s.sites["f/%2"]) == pytest.approx(np.max(w), rel=1e-12)
    assert float(s.sites["f/%4"]) == pytest.approx(1.0)  # ∂f_j/∂f = e_j
    assert float(s.params["w"]) == pytest.approx(np.max(np.abs(np.tanh(values["x"]))),
                                                 rel=1e-12)
    dump_sensitivity(parser().parse_args([str(path), "--entry", "f"]))
    assert "a result of shape [3]: max over its 3 elements" in capsys.readouterr().out
    tup = tmp_path / "tup.psk"
    tup.write_text("fn g(x : ℝ[3]) -> (ℝ[3], ℝ[3]) = (x, x)\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"returns .*one tensor result"):
        dump_sensitivity(parser().parse_args([str(tup), "--entry", "g"]))
