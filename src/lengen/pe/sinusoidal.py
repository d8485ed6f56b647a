"""Sinusoidal absolute positions (Vaswani et al., 2017, "Attention Is All You Need", §3.5).

PE(p, 2i) = sin(p / base^(2i/d)), PE(p, 2i+1) = cos(p / base^(2i/d)), added to the token
embeddings. For each frequency the (sin, cos) pair rotates rigidly with position, so
PE(p + k) = T(k) · PE(p) with T(k) block-diagonal 2×2 rotations: the property the paper gives
for choosing this form.

Where the columns go is a convention, selectable as ``pe.layout``:

* ``interleaved`` (default; the paper's formula): sin, cos, sin, cos, …, i.e. column 2i holds
  sin(p·ω_i) and column 2i+1 holds cos(p·ω_i);
* ``concatenated`` (tensor2tensor's ``get_timing_signal_1d``, fairseq): the sines of all
  frequencies, then the cosines: column i holds sin(p·ω_i), column d/2 + i holds cos(p·ω_i).

Both use the paper's frequencies ω_i = base^(−2i/d), i = 0 … d/2 − 1, so the two tables are the
same columns in a different order (tested). tensor2tensor itself spaces its frequencies as
base^(−i/(d/2 − 1)) (the highest and lowest frequency at the two ends); that spacing is *not*
reproduced here: ``layout`` changes the column order only, never the frequencies. A model
learns equally well with either order (a fixed permutation of the input weights); the choice
matters only when loading weights trained with the other one.

**Grids and volumes** (positions on A axes, ``lengen.pe.grid``): the channels are split between
the axes, ``[table of axis 0 | table of axis 1 | …]``, each block d/A channels of the 1-D
encoding of that axis's coordinate: the 2-D sin-cos practice of MAE
(facebookresearch/mae, ``util/pos_embed.py``, ``get_2d_sincos_pos_embed``), which puts the
column's block first and a block's sines before its cosines; here axis 0, the row, comes first
and each block follows ``pe.layout`` (a fixed permutation of the channels either way). ``sinusoidal_grid(shape, dim)`` is the table of a whole grid. A row of
−1s (a readout slot) gets nothing added.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.base import axis_share
from lengen.pe.config.sinusoidal import SinusoidalConfig
from lengen.pe.config.sinusoidal import check_sinusoidal_layout as check_layout
from lengen.pe.grid import check_grid_positions, grid_positions, has_position


def sinusoid_inverse_frequencies(dim: int, base: float = SinusoidalConfig.base) -> Tensor:
    """1 / base^(2i/dim) for i in 0 … dim/2 − 1 -> Tensor[dim // 2], fp32."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return (base**-exponents).to(torch.float32)  # the power in float64, then rounded once


def sinusoids(
    positions: Tensor, dim: int, base: float = SinusoidalConfig.base, *, layout: str = "interleaved"
) -> Tensor:
    """sin/cos of positions: positions (...,) -> (..., dim), fp32, columns as ``layout``."""
    if dim % 2:
        raise ValueError(f"sinusoidal encodings need an even dimension, got {dim}")
    check_layout(layout)
    with torch.autocast(positions.device.type, enabled=False):
        inv_freq = sinusoid_inverse_frequencies(dim, base).to(positions.device)
        angles = positions.to(torch.float32)[..., None] * inv_freq  # (..., dim/2)
        if layout == "concatenated":
            return torch.cat((angles.sin(), angles.cos()), dim=-1)  # (..., dim)
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., dim)


def sinusoidal_table(
    length: int, dim: int, base: float = SinusoidalConfig.base, *, layout: str = "interleaved"
) -> Tensor:
    """The sinusoidal table for positions 0 … length − 1 -> Tensor[length, dim], fp32.

    ``interleaved`` (default): column 2i = sin(p / base^(2i/dim)), column 2i+1 = cos(same).
    ``concatenated``: column i = sin(p / base^(2i/dim)), column dim/2 + i = cos(same).
    """
    return sinusoids(torch.arange(length), dim, base, layout=layout)


def grid_sinusoids(
    positions: Tensor, dim: int, base: float = SinusoidalConfig.base, *, layout: str = "interleaved"
) -> Tensor:
    """Sinusoids of positions on A axes: positions (..., A) -> (..., dim), fp32.

    Channels ``[sinusoids(p_0, dim/A) | sinusoids(p_1, dim/A) | …]``; rows of −1s (no grid
    position) are all zero."""
    axes = positions.shape[-1]
    share = axis_share(dim, axes, "the encoding dimension")
    blocks = [
        sinusoids(positions[..., axis], share, base, layout=layout) for axis in range(axes)
    ]  # A × (..., dim/A)
    table = torch.cat(blocks, dim=-1)  # (..., dim)
    return table * has_position(positions)[..., None]


def sinusoidal_grid(
    shape: tuple[int, ...] | list[int],
    dim: int,
    base: float = SinusoidalConfig.base,
    *,
    layout: str = "interleaved",
) -> Tensor:
    """The sinusoidal table of a grid of ``shape`` (A = len(shape) axes) -> Tensor[*shape, dim].

    Cell (c_0, …, c_{A−1}) holds ``[sinusoidal_table(shape[0], dim/A)[c_0] | … |
    sinusoidal_table(shape[A−1], dim/A)[c_{A−1}]]``; dim must be divisible by 2A."""
    shape = tuple(int(size) for size in shape)
    if not shape or any(size < 1 for size in shape):
        raise ValueError(f"sinusoidal_grid needs a shape of positive sizes, got {shape}")
    axis_share(dim, len(shape), "dim")
    table = grid_sinusoids(grid_positions(shape), dim, base, layout=layout)  # (cells, dim)
    return table.reshape(*shape, dim)


class Sinusoidal(PositionalEncoding):
    """Adds ``sinusoids(positions)`` to the token embeddings (no parameters).

    Args:
        base: the wavelength base (10,000 in the paper); must be > 1.
        layout: ``interleaved`` (default, the paper) or ``concatenated`` (tensor2tensor column
            order, same frequencies); see the module docstring.

    On A axes (``axes``) the channels are split between the axes (``grid_sinusoids``).
    """

    Options = SinusoidalConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)

    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        # x: (B, T, D); positions: (T,) or (B, T), or on A axes (T, A)
        if self.axes > 1:
            check_grid_positions(positions, self.axes)
            table = grid_sinusoids(positions, self.d_model, self.cfg.base, layout=self.cfg.layout)
            return x + table.to(x.dtype)  # (B, T, D)
        table = sinusoids(positions, self.d_model, self.cfg.base, layout=self.cfg.layout)
        return x + table.to(x.dtype)
