"""07_train.psk as PyTorch: written by `presk export --target pytorch` (Presk 0.1.0) from PSK-Core.

Modules: none. Functions: loss.
Each statement computes one PSK-Core operation; its comment gives the site
(`presk dump --stage core`) and the Presk type. A tensor's dims are its type's
axes in order, after the leading dims its `...` stands for.
The dtype is the parameters' and inputs': float64 computes as Presk's f64
interpreter.
"""

from __future__ import annotations

import torch

import _06_tower


def loss(θ: _06_tower.Tower, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Presk: loss{B}(θ : params Tower, batch : (ℝ[batch: B, model: 4], ℝ[batch: B, model: 4])) -> ℝ[]
    """
    x = batch[0]  # loss/%2 ℝ[batch: B, model: 4]
    y = batch[1]  # loss/%3 ℝ[batch: B, model: 4]
    _4 = θ(x)  # loss/%4 ℝ[batch: B, model: 4]
    _5 = _4 - y  # loss/%5 ℝ[batch: B, model: 4]
    _6 = _5 ** 2  # loss/%6 ℝ[batch: B, model: 4]
    _7 = _6.mean()  # loss/%7 ℝ[]
    return _7  # loss/%8
