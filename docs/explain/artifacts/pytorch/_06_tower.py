"""06_tower.psk as PyTorch: written by `presk export --target pytorch` (Presk 0.1.0) from PSK-Core.

Modules: Block, Tower. Functions: none.
Each statement computes one PSK-Core operation; its comment gives the site
(`presk dump --stage core`) and the Presk type. A tensor's dims are its type's
axes in order, after the leading dims its `...` stands for.
The dtype is the parameters' and inputs': float64 computes as Presk's f64
interpreter.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

import _01_linear
import _02_norm


class Block(nn.Module):
    """Presk's module Block of 06_tower.psk.

    Fields (state_dict keys are Presk's paths):
      norm : params RMSNorm{4}
      proj : params Linear{4, 4}

    `stack` gives the leading axes of stacked copies (stack{L}(M) holds every
    tensor with a leading L axis); `dtype` is the parameters' dtype.
    """

    def __init__(self, *, stack: tuple[int, ...] = (), dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.norm = _02_norm.RMSNorm(4, stack=stack, dtype=dtype)
        self.proj = _01_linear.Linear(4, 4, stack=stack, dtype=dtype)

    def at(self, i: int) -> "Block":
        """Copy i of stacked copies: every tensor indexed at i on its leading
        axis (a view: gradients reach the stacked parameters)."""
        view = Block.__new__(Block)
        nn.Module.__init__(view)
        view.norm = self.norm.at(i)
        view.proj = self.proj.at(i)
        return view

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Presk: Block.apply(θ : params Block, x : ℝ[..., model: 4]) -> ℝ[..., model: 4]

        θ is self. PSK-Core function @Block.apply.
        """
        norm = self.norm  # Block.apply/%2 params RMSNorm{4}
        _3 = 1e-6  # Block.apply/%3 f64
        _4 = norm(x, _3)  # Block.apply/%4 ℝ[..., model: 4]
        _5 = F.gelu(_4)  # Block.apply/%5 ℝ[..., model: 4]
        proj = self.proj  # Block.apply/%6 params Linear{4, 4}
        _7 = proj(_5)  # Block.apply/%7 ℝ[..., 4]
        _8 = x + _7  # Block.apply/%8 ℝ[..., model: 4]
        return _8  # Block.apply/%9


class Tower(nn.Module):
    """Presk's module Tower of 06_tower.psk.

    Fields (state_dict keys are Presk's paths):
      blocks : params stack{3}(Block)
      final : params RMSNorm{4}

    `stack` gives the leading axes of stacked copies (stack{L}(M) holds every
    tensor with a leading L axis); `dtype` is the parameters' dtype.
    """

    def __init__(self, *, stack: tuple[int, ...] = (), dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.blocks = Block(stack=(*stack, 3), dtype=dtype)
        self.final = _02_norm.RMSNorm(4, stack=stack, dtype=dtype)

    def at(self, i: int) -> "Tower":
        """Copy i of stacked copies: every tensor indexed at i on its leading
        axis (a view: gradients reach the stacked parameters)."""
        view = Tower.__new__(Tower)
        nn.Module.__init__(view)
        view.blocks = self.blocks.at(i)
        view.final = self.final.at(i)
        return view

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Presk: Tower.apply(θ : params Tower, x : ℝ[..., model: 4]) -> ℝ[..., model: 4]

        θ is self. PSK-Core function @Tower.apply.
        """
        blocks = self.blocks  # Tower.apply/%2 params stack{3}(Block)
        _3 = x  # Tower.apply/%3 ℝ[..., model: 4]: fold 3 Block.apply over blocks
        for i in range(3):
            _3 = blocks.at(i)(_3)
        final = self.final  # Tower.apply/%4 params RMSNorm{4}
        _5 = 1e-6  # Tower.apply/%5 f64
        _6 = final(_3, _5)  # Tower.apply/%6 ℝ[..., model: 4]
        return _6  # Tower.apply/%7
