"""01_linear.psk as PyTorch: written by `presk export --target pytorch` (Presk 0.1.0) from PSK-Core.

Modules: Linear. Functions: none.
Each statement computes one PSK-Core operation; its comment gives the site
(`presk dump --stage core`) and the Presk type. A tensor's dims are its type's
axes in order, after the leading dims its `...` stands for.
The dtype is the parameters' and inputs': float64 computes as Presk's f64
interpreter.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Linear(nn.Module):
    """Presk's module Linear{In Out} of 01_linear.psk.

    Fields (state_dict keys are Presk's paths):
      w : ℝ[In, Out] (init xavier_uniform)
      b : ℝ[Out] (init zeros)

    `stack` gives the leading axes of stacked copies (stack{L}(M) holds every
    tensor with a leading L axis); `dtype` is the parameters' dtype.
    """

    def __init__(self, In: int, Out: int, *, stack: tuple[int, ...] = (), dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.In, self.Out = In, Out
        bound = math.sqrt(6.0 / (In + Out))  # xavier_uniform
        self.w = nn.Parameter(torch.empty(*stack, In, Out, dtype=dtype).uniform_(-bound, bound))
        self.b = nn.Parameter(torch.zeros(*stack, Out, dtype=dtype))

    def at(self, i: int) -> "Linear":
        """Copy i of stacked copies: every tensor indexed at i on its leading
        axis (a view: gradients reach the stacked parameters)."""
        view = Linear.__new__(Linear)
        nn.Module.__init__(view)
        view.In, view.Out = self.In, self.Out
        view.w = self.w[i]
        view.b = self.b[i]
        return view

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Presk: Linear.apply{In Out}(θ : params Linear{In, Out}, x : ℝ[..., In]) -> ℝ[..., Out]

        θ is self. PSK-Core function @Linear.apply.
        """
        w = self.w  # Linear.apply/%2 ℝ[In, Out]
        _3 = x @ w  # Linear.apply/%3 ℝ[..., Out]
        b = self.b  # Linear.apply/%4 ℝ[Out]
        _5 = _3 + b  # Linear.apply/%5 ℝ[..., Out]
        return _5  # Linear.apply/%6
