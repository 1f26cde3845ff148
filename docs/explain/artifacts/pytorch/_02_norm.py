"""02_norm.psk as PyTorch: written by `presk export --target pytorch` (Presk 0.1.0) from PSK-Core.

Modules: RMSNorm. Functions: none.
Each statement computes one PSK-Core operation; its comment gives the site
(`presk dump --stage core`) and the Presk type. A tensor's dims are its type's
axes in order, after the leading dims its `...` stands for.
The dtype is the parameters' and inputs': float64 computes as Presk's f64
interpreter.
"""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """Presk's module RMSNorm{D} of 02_norm.psk.

    Fields (state_dict keys are Presk's paths):
      γ : ℝ[D] (init ones)

    `stack` gives the leading axes of stacked copies (stack{L}(M) holds every
    tensor with a leading L axis); `dtype` is the parameters' dtype.
    """

    def __init__(self, D: int, *, stack: tuple[int, ...] = (), dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.D = D
        self.γ = nn.Parameter(torch.ones(*stack, D, dtype=dtype))

    def at(self, i: int) -> "RMSNorm":
        """Copy i of stacked copies: every tensor indexed at i on its leading
        axis (a view: gradients reach the stacked parameters)."""
        view = RMSNorm.__new__(RMSNorm)
        nn.Module.__init__(view)
        view.D = self.D
        view.γ = self.γ[i]
        return view

    def forward(self, x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """Presk: RMSNorm.apply{D}(θ : params RMSNorm{D}, x : ℝ[..., model: D], eps : f64) -> ℝ[..., model: D]

        θ is self. PSK-Core function @RMSNorm.apply.
        """
        _3 = x ** 2  # RMSNorm.apply/%3 ℝ[..., model: D]
        ms = _3.mean(dim=-1)  # RMSNorm.apply/%4 ℝ[...]
        _5 = float(eps)  # RMSNorm.apply/%5 ℝ[]
        _6 = ms + _5  # RMSNorm.apply/%6 ℝ[...]
        _7 = torch.sqrt(_6)  # RMSNorm.apply/%7 ℝ[...]
        _8 = x / _7[..., None]  # RMSNorm.apply/%8 ℝ[..., model: D]
        γ = self.γ  # RMSNorm.apply/%9 ℝ[D]
        _10 = _8 * γ  # RMSNorm.apply/%10 ℝ[..., model: D]
        return _10  # RMSNorm.apply/%11
