"""The Python API (presk/api.py): a compiled entry called on numpy arrays and torch
tensors gives the bits of the pipeline's own native run (`run_native`, what `presk run`
prints); the caller's arrays are read in place where they fit and converted where they do
not; every wrong argument is a PreskError naming it; docs/python.md's example runs."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import presk
from presk.pipeline import run_native
from programs import AT_MIXED, ROOT, TRAIN


@pytest.fixture(scope="module")
def prog() -> presk.Program:
    return presk.load(TRAIN)


@pytest.fixture(scope="module")
def args(prog):
    return prog.init("loss", B=4), prog.sample_inputs("loss", B=4)


@pytest.fixture(scope="module")
def grad_f(prog):
    return prog.compile("loss", B=4, grad=True, realize=AT_MIXED)


def reference(prog, params, batch, realize=None, grad=False):
    x, y = batch
    return run_native(prog.core, "loss", {"B": 4}, params, {"batch.0": x, "batch.1": y},
                      realize, grad=grad).result


def test_value_and_gradient_are_the_pipelines_bits(prog, args, grad_f) -> None:
    params, (batch,) = args
    value, grads = grad_f(params, batch)
    ref = reference(prog, params, batch, AT_MIXED, grad=True)
    assert value == float(ref["result"])
    assert sorted(grads) == sorted(p for p in params)
    for p, g in grads.items():
        assert g.dtype == np.float64 and g.tobytes() == ref[f"grad.{p}"].tobytes(), p
    f = prog.compile("loss", B=4)
    assert f(params, batch) == float(reference(prog, params, batch)["result"])


def test_results_are_new_arrays(args, grad_f) -> None:
    params, (batch,) = args
    _, first = grad_f(params, batch)
    kept = {p: g.copy() for p, g in first.items()}
    x, y = batch
    grad_f(params, (x * 2, y))
    assert all(first[p].tobytes() == kept[p].tobytes() for p in kept)


def test_views_without_copy(prog, args) -> None:
    """`copy=False`: the gradients are read-only views of the entry's output buffers, the
    same objects at every call, which the next call overwrites with its own bits (those of
    a copying entry); a view handed back as an input is copied in, never aliased."""
    params, (batch,) = args
    x, y = batch
    copying = prog.compile("loss", B=4, grad=True)
    f = prog.compile("loss", B=4, grad=True, copy=False)
    value, first = f(params, batch)
    assert value == copying(params, batch)[0]
    assert all(not g.flags.writeable for g in first.values())
    with pytest.raises(ValueError):
        next(iter(first.values()))[...] = 0.0
    value2, second = f(params, (x * 2, y))
    ref_value, ref = copying(params, (x * 2, y))
    assert value2 == ref_value
    for p in ref:
        assert second[p] is first[p] and second[p].tobytes() == ref[p].tobytes(), p
    back = {p: second[p] for p in params}  # the gradients as the parameters
    expect = copying({p: g.copy() for p, g in back.items()}, batch)
    got = f(back, batch)
    assert got[0] == expect[0]
    assert all(got[1][p].tobytes() == expect[1][p].tobytes() for p in params)


def test_tensor_views_without_copy(prog, args) -> None:
    params, (batch,) = args
    f = prog.compile("loss", B=4, grad=True, copy=False)
    tparams = {p: torch.from_numpy(v) for p, v in params.items()}
    value, grads = f(tparams, tuple(torch.from_numpy(a) for a in batch))
    ref_value, ref = prog.compile("loss", B=4, grad=True)(params, batch)
    assert float(value) == ref_value
    assert all(grads[p].numpy().tobytes() == ref[p].tobytes() for p in ref)
    _, again = f(tparams, tuple(torch.from_numpy(a) for a in batch))
    assert all(again[p] is grads[p] for p in ref)


def test_fitting_arrays_are_read_in_place(prog, args) -> None:
    """An f64 entry reads the caller's float64 arrays themselves: argv holds their
    pointers, and a change made in place is what the next call reads."""
    params, (batch,) = args
    params = {p: v.copy() for p, v in params.items()}
    x, y = (a.copy() for a in batch)
    f = prog.compile("loss", B=4)
    before = f(params, (x, y))
    slots = {s.name: s.index for s in f._slots}
    assert f._argv[slots["batch.0"]] == x.ctypes.data
    assert f._argv[slots["final.γ"]] == params["final.γ"].ctypes.data
    x *= 0.5  # in place: the same object, so not looked at again, but read where it is
    after = f(params, (x, y))
    assert after != before
    assert after == float(reference(prog, params, (x, y))["result"])
    frozen = x.copy()
    frozen.flags.writeable = False  # read in place too (its pointer by ndarray.ctypes)
    assert f(params, (frozen, y)) == after
    assert f._argv[slots["batch.0"]] == frozen.ctypes.data


def test_what_does_not_fit_is_converted(prog, args, grad_f) -> None:
    """float32 and strided arrays for f64 buffers, float64 for bf16/f32 ones: rounded
    into the entry's own buffers, the bits of run_native (which rounds the same way)."""
    params, (batch,) = args
    x, y = batch
    x32 = x.astype(np.float32)
    wide = np.zeros((4, 8))
    wide[:, ::2] = y
    f = prog.compile("loss", B=4)
    got = f(params, (x32, wide[:, ::2]))
    assert got == float(reference(prog, params, (x32.astype(np.float64), y))["result"])
    slots = {s.name: s.index for s in f._slots}
    assert f._argv[slots["batch.0"]] != x32.ctypes.data
    value, _ = grad_f(params, batch)  # the mixed realization stores parameters in bf16/f32
    assert value == float(reference(prog, params, batch, AT_MIXED, grad=True)["result"])


def test_torch_tensors_give_the_same_bits(args, grad_f) -> None:
    params, (batch,) = args
    value, grads = grad_f(params, batch)
    tparams = {p: torch.from_numpy(v) for p, v in params.items()}
    tvalue, tgrads = grad_f(tparams, tuple(torch.from_numpy(a) for a in batch))
    assert isinstance(tvalue, torch.Tensor) and float(tvalue) == value
    for p in grads:
        assert tgrads[p].numpy().tobytes() == grads[p].tobytes()
    # a tensor that requires grad, and bf16 tensors for every input
    leaf = {p: t.clone().requires_grad_() for p, t in tparams.items()}
    assert float(grad_f(leaf, tuple(torch.from_numpy(a) for a in batch))[0]) == value


@pytest.mark.parametrize("mistake, message", [
    (lambda p, b: ({k: v for k, v in p.items() if k != "final.γ"}, b),
     "presk: no parameter `final.γ` in the parameters of `loss` (its paths: "),
    (lambda p, b: ({**p, "extra": p["final.γ"]}, b), "presk: `extra` is no parameter of `loss`"),
    (lambda p, b: (p, (b[0][:3], b[1])),
     "presk: argument `batch.0` has shape [3, 4], the entry takes [4, 4]"),
    (lambda p, b: ({**p, "final.γ": np.ones(4, dtype=np.int64)}, b),
     "presk: parameter `final.γ` has dtype int64, not a float"),
    (lambda p, b: ({**p, "final.γ": "ones"}, b),
     "presk: parameter `final.γ` is a str, not an array"),
    (lambda p, b: (p, (b[0],)), "presk: argument `batch.1`: the tuple `batch` has 1 element(s)"),
    (lambda p, b: (p, b[0]), "presk: argument `batch.0`: the entry takes a tuple at `batch`, "
                             "got a ndarray"),
    (lambda p, b: (list(p.values()), b),
     "presk: the parameters of `loss` are a list, not a mapping of path to array"),
    (lambda p, b: ({**p, "final.γ": np.ones(4, dtype=np.uint16)}, b),
     "presk: parameter `final.γ` has dtype uint16: bf16 bits go to a bf16 buffer only"),
])
def test_a_wrong_argument_is_a_presk_error(prog, args, mistake, message) -> None:
    params, (batch,) = args
    f = prog.compile("loss", B=4)
    wrong_params, wrong_batch = mistake(params, batch)
    with pytest.raises(presk.PreskError) as err:
        f(wrong_params, wrong_batch)
    assert err.value.diagnostic.startswith(message), err.value.diagnostic
    assert f(params, batch) == float(reference(prog, params, batch)["result"])  # still fine


def test_argument_count_and_cotangent(prog, args) -> None:
    params, (batch,) = args
    f = prog.compile("loss", B=4)
    with pytest.raises(presk.PreskError, match=r"takes 1 argument\(s\) after its parameters, "
                                               "got 2"):
        f(params, batch, batch)
    with pytest.raises(presk.PreskError, match="compiled without grad"):
        f(params, batch, cotangent=1.0)


def test_a_scaled_cotangent_scales_the_gradient(prog, args, grad_f) -> None:
    params, (batch,) = args
    _, once = grad_f(params, batch)
    _, twice = grad_f(params, batch, cotangent=2.0)
    _, again = grad_f(params, batch)  # the bound seed 1 comes back
    for p in once:
        np.testing.assert_allclose(twice[p], 2 * once[p], rtol=1e-6)  # bf16 sites round
        assert again[p].tobytes() == once[p].tobytes()


def test_load_compile_and_init_refusals(tmp_path, prog) -> None:
    bad = tmp_path / "bad.psk"
    bad.write_text("fn f(x : ℝ[model: 4]) -> ℝ[] =\n  sum(axis modle, x)\n")
    with pytest.raises(presk.PreskError) as err:
        presk.load(bad)
    assert err.value.kind == "program"
    assert re.match(rf"{re.escape(str(bad))}:2:\d+: error\[E\d+\]", err.value.diagnostic)
    assert "^" in err.value.diagnostic
    with pytest.raises(presk.PreskError, match="missing.psk: does not exist"):
        presk.load(tmp_path / "missing.psk")
    with pytest.raises(presk.PreskError, match="--entry nope: no such function|no function"):
        prog.compile("nope", B=4)
    with pytest.raises(presk.PreskError, match="needs --dim B=N"):
        prog.init("loss")
    with pytest.raises(presk.PreskError, match="needs --dim B=N"):
        prog.compile("loss")
    assert sorted(prog.init()) == sorted(prog.init("loss", B=8))  # the run's objective


def test_python_md_example_runs(capsys, monkeypatch) -> None:
    """docs/python.md's first Python block, run as it stands from the repository."""
    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / "python.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "docs/python.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "1.4135307732042672"
    assert out[1].startswith("1.41353073551727 ['blocks.norm.γ'")
    assert out[2] == "presk: argument `batch.0` has shape [3, 4], the entry takes [4, 4]"
