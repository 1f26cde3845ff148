"""A Presk entry as a differentiable PyTorch op: `presk.torch.function(prog, "loss", B=4,
realize=…)` returns a callable built on `torch.autograd.Function` whose forward is the
entry's native value and whose backward is its native vector-Jacobian product — so a
Presk-compiled, precision-budgeted function drops into a PyTorch model and trains with
torch's optimizers:

    op = presk.torch.function(prog, "loss", B=8)
    θ = {path: torch.nn.Parameter(torch.from_numpy(w)) for path, w in prog.init().items()}
    opt = torch.optim.AdamW(θ.values(), lr=0.01)
    loss = op(θ, (x, y)); loss.backward(); opt.step()

An ℝ[] result is computed with its gradient in one native call (`value_vjp` seeded with
1); backward scales that gradient by the incoming cotangent. A tensor result's forward is
the value entry, its backward the `value_vjp` entry seeded with the incoming cotangent.
Gradients flow to the parameters (a mapping of path to tensor, or an nn.Module whose
parameter names are Presk's paths, as the PyTorch export's are); the other arguments are
data, given no gradient.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from .api import Compiled, PreskError, Program


def function(program: Program, entry: str, *, realize=None, remat: str = "store",
             plan=None, cache: bool = True, **dims: int) -> PreskFunction:
    """The entry at `dims` under `realize` and `plan` (as `Program.compile` takes them)
    as a differentiable op: `op(params, *args)` → a float64 tensor."""
    return PreskFunction(program, entry, realize, remat, plan, cache, dims)


class PreskFunction:
    """`op(params, *args)`: the entry's value as a torch tensor whose backward is the
    native vjp with respect to the parameters."""

    def __init__(self, program: Program, entry: str, realize, remat: str, plan,
                 cache: bool, dims: dict[str, int]):
        self.entry = entry
        self.vjp: Compiled = program.compile(entry, realize=realize, grad=True, remat=remat,
                                             plan=plan, cache=cache, **dims)
        self.scalar = not self.vjp.result_shape
        self.value: Compiled | None = None if self.scalar else program.compile(
            entry, realize=realize, plan=plan, cache=cache, **dims)
        self.paths = self.vjp.parameters

    def __call__(self, params: Mapping[str, torch.Tensor] | torch.nn.Module, *args: Any
                 ) -> torch.Tensor:
        if isinstance(params, torch.nn.Module):
            params = dict(params.named_parameters())
        if not isinstance(params, Mapping):
            raise PreskError(f"presk: the parameters of `{self.entry}` are a "
                             f"{type(params).__name__}, not a mapping of path to tensor")
        missing = [p for p in self.paths if p not in params]
        if missing or len(params) != len(self.paths):
            extra = sorted(set(params) - set(self.paths))
            raise PreskError(f"presk: no parameter `{missing[0]}` in the parameters of "
                             f"`{self.entry}`" if missing else
                             f"presk: `{extra[0]}` is no parameter of `{self.entry}`")
        tensors = [params[p] for p in self.paths]
        for p, t in zip(self.paths, tensors):
            if not isinstance(t, torch.Tensor):
                raise PreskError(f"presk: parameter `{p}` is a {type(t).__name__}, not a "
                                 "torch tensor")
        return _EntryOp.apply(self, args, *tensors)


class _EntryOp(torch.autograd.Function):
    """forward: the native value (and, for an ℝ[] result, its gradient); backward: the
    native vjp. The parameters are the tensor arguments, in the entry's path order."""

    @staticmethod
    def forward(ctx, fn: PreskFunction, args: tuple, *tensors: torch.Tensor) -> torch.Tensor:
        params = dict(zip(fn.paths, tensors))
        ctx.fn, ctx.args, ctx.dtypes = fn, args, [t.dtype for t in tensors]
        if fn.scalar:
            value, grads = fn.vjp(params, *args)
            ctx.grads = [grads[p] for p in fn.paths]
            return value
        ctx.save_for_backward(*tensors)
        assert fn.value is not None
        return fn.value(params, *args)

    @staticmethod
    def backward(ctx, cotangent: torch.Tensor):
        fn: PreskFunction = ctx.fn
        if fn.scalar:
            grads = ctx.grads if bool(cotangent == 1) else \
                [cotangent.to(torch.float64) * g for g in ctx.grads]
        else:
            params = dict(zip(fn.paths, ctx.saved_tensors))
            _, tree = fn.vjp(params, *ctx.args,
                             cotangent=cotangent.detach().to(torch.float64).contiguous())
            grads = [tree[p] for p in fn.paths]
        return (None, None, *[g.to(d) for g, d in zip(grads, ctx.dtypes)])


__all__ = ["PreskFunction", "function"]
