"""RoPE: rotary position embedding (Su et al., 2021, "RoFormer", eq. 34).

Queries and keys are rotated pairwise: pair i of a head's dimensions turns by the angle
p · θ_i with θ_i = base^(−2i/d), so q·k depends on the positions only through their difference.

Which dimensions form a pair is a convention the paper leaves to the implementation, selectable
as ``pe.layout``:

* ``interleaved`` (default, the paper's formula): pairs (2i, 2i+1);
* ``half`` (GPT-NeoX, Llama): pairs (i, i + d/2).

The two are the same function up to a fixed permutation of the projection weights, so a model
learns equally well with either; the choice matters only when loading weights trained with the
other one.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding
from lengen.pe.sinusoidal import sinusoid_inverse_frequencies

LAYOUTS = ("interleaved", "half")


def rope_angles(positions: Tensor, dim: int, base: float = 10000.0) -> Tensor:
    """positions (...,) -> angles p · θ_i, (..., dim // 2), fp32."""
    inv_freq = sinusoid_inverse_frequencies(dim, base).to(positions.device)
    return positions.to(torch.float32)[..., None] * inv_freq


def apply_rope(
    x: Tensor, positions: Tensor, base: float = 10000.0, *, layout: str = "interleaved"
) -> Tensor:
    """Rotate the last dimension of x by positions.

    Args:
        x: (..., seq, head_dim), head_dim even.
        positions: integer or float positions broadcastable to ``x.shape[:-1]``, e.g. (seq,).
        base: θ base (10,000 in the paper).
        layout: ``interleaved`` pairs (2i, 2i+1), ``half`` pairs (i, i + head_dim/2).

    Returns:
        Tensor shaped and typed like x; the rotation itself is computed in fp32.
    """
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"RoPE needs an even head dimension, got {dim}")
    if layout not in LAYOUTS:
        raise ValueError(f"pe.layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
    with torch.autocast(x.device.type, enabled=False):
        angles = rope_angles(positions, dim, base)  # (..., seq, dim/2)
        cos, sin = angles.cos(), angles.sin()
        xf = x.to(torch.float32)
        if layout == "interleaved":
            x1, x2 = xf[..., 0::2], xf[..., 1::2]  # (..., seq, dim/2) each
            rotated = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
            rotated = rotated.flatten(-2)  # (..., seq, dim)
        else:
            x1, x2 = xf[..., : dim // 2], xf[..., dim // 2 :]
            rotated = torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return rotated.to(x.dtype)


class RoPE(PositionalEncoding):
    """Rotates queries and keys of every head.

    Args:
        base: θ base; must be > 1.
        layout: ``interleaved`` or ``half`` (see module docstring).
    """

    def __init__(self, *, base: float = 10000.0, layout: str = "interleaved", **kwargs) -> None:
        super().__init__(**kwargs)
        if not base > 1:
            raise ValueError(f"pe.base must be > 1, got {base}")
        if layout not in LAYOUTS:
            raise ValueError(f"pe.layout must be one of {', '.join(LAYOUTS)}; got {layout!r}")
        if self.head_dim % 2:
            raise ValueError(
                f"pe=rope needs an even head dimension; model.d_model / model.n_heads = "
                f"{self.d_model} / {self.n_heads} = {self.head_dim}"
            )
        self.base = float(base)
        self.layout = layout

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,)
        q = apply_rope(q, q_positions, self.base, layout=self.layout)
        k = apply_rope(k, k_positions, self.base, layout=self.layout)
        return q, k
