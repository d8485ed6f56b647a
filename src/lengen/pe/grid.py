"""Positions with several axes (grids, volumes): what every N-d encoding shares.

A position on A axes is a row of A integer coordinates (axis 0 = row, axis 1 = column; for
volumes depth, row, column), tokens flattened row-major, so a sequence's positions are
``(T, A)``. A token without a grid position (a readout slot, ViT's class token) has the row
``[-1, …, -1]``: every encoding gives it no positional signal (nothing added, rotation by 0,
bias 0), as Heo et al.'s RoPE-ViT code rotates the patch tokens only, not the class token
(naver-ai/rope-vit, ``models/vit_rope.py``: ``q[:, :, 1:]``). How the channels split between
the axes (``axis_share``) is a rule of the keys, in ``lengen.pe.config.base``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def grid_positions(shape: tuple[int, ...] | list[int], device=None) -> Tensor:
    """The coordinates of every cell of a grid, row-major -> (prod(shape), len(shape)), int64."""
    axes = [torch.arange(size, device=device) for size in shape]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1).reshape(-1, len(shape))


def has_position(positions: Tensor) -> Tensor:
    """Which rows of (..., A) positions are grid cells (not the −1 row) -> (...,) bool."""
    return (positions >= 0).all(dim=-1)


def check_grid_positions(positions: Tensor, axes: int) -> None:
    """Refuse positions whose last dimension is not the encoding's axis count."""
    if positions.ndim < 2 or positions.shape[-1] != axes:
        raise ValueError(
            f"pe: positions on {axes} axes must be shaped (T, {axes}); got {tuple(positions.shape)}"
        )


def axis_extents(positions: Tensor) -> list[int]:
    """1 + the largest coordinate along each axis of (..., A) positions (one host sync)."""
    return [int(value) + 1 for value in positions.reshape(-1, positions.shape[-1]).amax(0)]
