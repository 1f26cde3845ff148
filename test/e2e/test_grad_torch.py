"""The gradients of the tutorial losses in f64 against PyTorch autograd (float64).

Each model is written here in torch from the tutorial's source (not from the Core IR):
03's activations and cross-entropy, 04's MLP, 05's stack of residual tanh blocks, and
07's tower (RMSNorm: x / sqrt(mean(x², -1) + 1e-6) · γ; Linear: x @ w + b; Block:
x + proj(gelu(norm(x))) with the exact (erf) gelu; 3 blocks folded; the final norm; the
mean squared error). On the same weights and inputs (`presk.analysis.entry`: the seeded
initial weights, and random weights unlike the initializers' so that every γ, bias, gain
and power matters), `loss.value_vjp(θ, batch, 1.0)` run by the f64 interpreter gives the
loss and the cotangents of θ and of the batch; torch gives them by `backward()`. Each
tensor's difference, max |ours − torch| / max |torch|, stays below 1e-13.

Run with `-s` to see the largest difference per tutorial.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from presk.analysis import entry as E
from presk.analysis.interpret import Interpreter, Tree
from presk.analysis.numbers import F64
from presk.transforms.differentiate import Differentiator
from programs import program

BOUND = 1e-13


# --------------------------------------------------------------------------------------
# The models in torch
# --------------------------------------------------------------------------------------

def linear(x, w, b):
    return x @ w + b


def rmsnorm(x, g, eps=1e-6):
    return x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + eps) * g


def mse(pred, y):
    return torch.mean((pred - y) ** 2)


def loss_07(p, x, y):
    """06_tower.psk's Tower: 3 blocks x + proj(gelu(norm(x))), the final norm; 07's MSE."""
    h = x
    for k in range(p["blocks.proj.w"].shape[0]):
        n = rmsnorm(h, p["blocks.norm.γ"][k])
        h = h + linear(F.gelu(n), p["blocks.proj.w"][k], p["blocks.proj.b"][k])
    return mse(rmsnorm(h, p["final.γ"]), y)


def loss_04(p, x, y):
    """04_mlp.psk: down(gelu(up(x))), the hidden width 16."""
    h = F.gelu(linear(x, p["up.w"], p["up.b"]))
    return mse(linear(h, p["down.w"], p["down.b"]), y)


def loss_05(p, x, y):
    """05_stack.psk: 2 blocks x + tanh(proj(x)), then the head."""
    h = x
    for k in range(p["blocks.proj.w"].shape[0]):
        h = h + torch.tanh(linear(h, p["blocks.proj.w"][k], p["blocks.proj.b"][k]))
    return mse(linear(h, p["head.w"], p["head.b"]), y)


def loss_03(p, x, y):
    """03_activations.psk: Act, then the cross-entropy against softmax(y) + 0.1·max gap."""
    smooth = F.gelu(x) + F.softplus(x)
    bounded = torch.tanh(x) * torch.sigmoid(x)
    kinked = torch.relu(x)
    z = p["gain"] * (smooth + bounded + kinked) + F.softplus(x) ** p["power"] - 0.1 * x ** 2
    logp = z - torch.logsumexp(z, dim=-1, keepdim=True)
    q = torch.softmax(y, dim=-1)
    ce = -torch.sum(q * logp, dim=-1)
    gap = torch.amax(torch.abs(q - torch.exp(logp)), dim=-1)
    return torch.mean(ce) + 0.1 * torch.amax(gap)


TORCH = {"03_activations": loss_03, "04_mlp": loss_04, "05_stack": loss_05, "07_train": loss_07}


# --------------------------------------------------------------------------------------
# Presk's side
# --------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def differentiated(name: str, remat: str = "store"):
    module = program(name)
    Differentiator(module, remat).run(["loss"])
    module.verify()
    return module


def weights_and_inputs(name: str, b: int, kind: str) -> tuple[dict, dict]:
    entry = E.prepare(differentiated(name), "loss", {"B": b})
    params, values = E.weights(entry, 0, None), E.inputs(entry, 0, None)
    if kind == "random":
        rng = np.random.default_rng(17 + b)
        for f in entry.fields:
            if f.path.endswith(("power", "γ", "gain")):
                params[f.path] = rng.uniform(0.5, 1.5, f.shape)
            else:
                params[f.path] = rng.normal(0.0, 0.5, f.shape)
    return params, values


def presk_gradient(name: str, b: int, params: dict, values: dict, remat: str = "store"):
    """(loss, {path: cotangent}) from loss.value_vjp in f64: θ's by path, the batch's as
    `batch.0`, `batch.1`."""
    module = differentiated(name, remat)
    entry = E.prepare(module, "loss", {"B": b})
    numbers = F64()
    args = E.arguments(entry, numbers, params, values)
    value, d_theta, d_batch = Interpreter(module, numbers).run(
        "loss.value_vjp", args + [numbers.constant(1.0)], entry.dims)
    assert isinstance(d_theta, Tree)
    grads = dict(d_theta.items())
    grads.update({f"batch.{i}": g for i, g in enumerate(d_batch)})
    return float(value), grads


def torch_gradient(name: str, params: dict, values: dict):
    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    x, y = (torch.tensor(values[f"batch.{i}"], dtype=torch.float64, requires_grad=True)
            for i in range(2))
    loss = TORCH[name](p, x, y)
    loss.backward()
    grads = {k: t.grad.numpy() for k, t in p.items()}
    grads.update({"batch.0": x.grad.numpy(), "batch.1": y.grad.numpy()})
    return loss.item(), grads


def difference(got: np.ndarray, expected: np.ndarray) -> float:
    scale = np.max(np.abs(expected))
    return float(np.max(np.abs(got - expected)) / scale) if scale else float(np.max(np.abs(got)))


FIGURES: dict[str, float] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_figures():
    yield
    if FIGURES:
        print("\n[grad vs torch] largest per-tensor difference, max|ours − torch| / max|torch|:")
        print("\n".join(f"  {k}: {v:.3g}" for k, v in sorted(FIGURES.items())))


@pytest.mark.parametrize("kind", ["seeded", "random"])
@pytest.mark.parametrize("b", [4, 5])
@pytest.mark.parametrize("name", list(TORCH))
def test_gradient_agrees_with_torch(name: str, b: int, kind: str) -> None:
    params, values = weights_and_inputs(name, b, kind)
    value, grads = presk_gradient(name, b, params, values)
    t_value, t_grads = torch_gradient(name, params, values)
    assert set(grads) == set(t_grads)
    assert abs(value - t_value) <= BOUND * abs(t_value)
    diffs = {}
    for path, expected in t_grads.items():
        got = np.asarray(grads[path])
        assert got.shape == expected.shape, path
        diffs[path] = difference(got, expected)
    worst = max(diffs.values())
    FIGURES[name] = max(FIGURES.get(name, 0.0), worst)
    assert all(d < BOUND for d in diffs.values()), {k: v for k, v in diffs.items() if v >= BOUND}


def test_the_comparison_is_sensitive() -> None:
    """A γ scaled by 1 + 1e-9 in one block shows in the comparison of that block's γ."""
    params, values = weights_and_inputs("07_train", 4, "random")
    _, grads = presk_gradient("07_train", 4, params, values)
    changed = dict(params)
    changed["blocks.norm.γ"] = params["blocks.norm.γ"].copy()
    changed["blocks.norm.γ"][1] *= 1 + 1e-9
    _, t_grads = torch_gradient("07_train", changed, values)
    assert difference(np.asarray(grads["blocks.norm.γ"]), t_grads["blocks.norm.γ"]) > BOUND
