"""Sinusoidal absolute positions (Vaswani et al., 2017, "Attention Is All You Need", §3.5).

PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)), added to the token
embeddings. Columns are interleaved (sin, cos, sin, cos, …) as in the paper's formula. For each
frequency the (sin, cos) pair rotates rigidly with position, so PE(p + k) = T(k) · PE(p) with
T(k) block-diagonal 2×2 rotations: the property the paper gives for choosing this form.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding


def sinusoid_inverse_frequencies(dim: int, base: float = 10000.0) -> Tensor:
    """1 / base^(2i/dim) for i in 0 … dim/2 − 1 -> Tensor[dim // 2], fp32."""
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim).to(torch.float32)


def sinusoids(positions: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """Interleaved sin/cos of positions: positions (...,) -> (..., dim), fp32."""
    if dim % 2:
        raise ValueError(f"sinusoidal encodings need an even dimension, got {dim}")
    with torch.autocast(positions.device.type, enabled=False):
        inv_freq = sinusoid_inverse_frequencies(dim, base).to(positions.device)
        angles = positions.to(torch.float32)[..., None] * inv_freq  # (..., dim/2)
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., dim)


def sinusoidal_table(length: int, dim: int, base: float = 10000.0) -> Tensor:
    """The sinusoidal table for positions 0 … length − 1 -> Tensor[length, dim], fp32.

    Column 2i = sin(p / base^(2i/dim)), column 2i+1 = cos(same).
    """
    return sinusoids(torch.arange(length), dim, base)


class Sinusoidal(PositionalEncoding):
    """Adds ``sinusoids(positions)`` to the token embeddings (no parameters).

    Args:
        base: the wavelength base (10,000 in the paper); must be > 1.
    """

    def __init__(self, *, base: float = 10000.0, **kwargs) -> None:
        super().__init__(**kwargs)
        if not base > 1:
            raise ValueError(f"pe.base must be > 1, got {base}")
        if self.d_model % 2:
            raise ValueError(f"pe=sinusoidal needs an even model.d_model, got {self.d_model}")
        self.base = float(base)

    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        # x: (B, T, D); positions: (T,) or (B, T)
        return x + sinusoids(positions, self.d_model, self.base).to(x.dtype)
