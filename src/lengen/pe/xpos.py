"""xPos: RoPE with an exponential decay (Sun et al., 2023, "A Length-Extrapolatable
Transformer", ACL; arXiv 2212.10554, 2022; and torchscale's ``XPOS``).

Pair i of a head's dimensions is rotated as in RoPE (θ_i = base^(−2i/d)) and, in addition,
scaled: the query at position n by ζ_i^(n/γ), the key at position m by ζ_i^(−m/γ), with

    ζ_i = (2i/d + γ') / (1 + γ'),  i = 0 … d/2 − 1,  γ' = 0.4 (``pe.gamma``),
    γ = ``pe.scale_base`` (512 in the paper and torchscale),

so each pair's contribution to q·k carries ζ_i^((n−m)/γ): it still depends on the positions
only through n − m, and for n > m it decays with distance, fastest for the highest frequencies
(ζ_0 = γ'/(1+γ') ≈ 0.286) and hardly at all for the lowest (ζ → 1). For n < m the factor grows,
which is why xPos is defined for causal attention only: ``causal_only = True``, and a
bidirectional stack is refused by the base class.

**scale_base sized for the run.** The paper's γ = 512 belongs to language models trained on
1,024 tokens: over the training distances the fastest pair decays to ζ_0^(1024/512) ≈ 0.08.
This tool trains on 16–258 positions, where γ = 512 leaves ζ_0^(258/512) ≥ 0.53, i.e. hardly
any decay inside training, and the decay that xPos adds for extrapolation would first act at
evaluation lengths. ``pe.scale_base: null`` (the default) keeps the paper's ratio,
γ = train_positions / 2; without known training positions (a module built directly) 512.
``pe.scale_base=512`` restores the paper's value; ``describe()`` records γ and its source.

Conventions:

* ``layout``: ``interleaved`` (default) pairs (2i, 2i+1), as torchscale (``rotate_every_two``
  and ``duplicate_interleave``); ``half`` pairs (i, i + d/2). Both pair members share ζ_i.
* Numerics: ζ_i^(±p/γ) over- or underflows fp32 at long positions (ζ_0^(p/512) < 1e-38 for
  p ≳ 36,000). Since only n − m matters, both q and k positions are measured from a common
  centre c (the midpoint of the key positions of the forward pass), as torchscale does with
  positions −⌊L/2⌋ … ⌈L/2⌉ − 1: q × ζ^((n−c)/γ), k × ζ^(−(m−c)/γ). This leaves every q·k
  unchanged (up to rounding) and keeps the exponents within ±L/(2γ). Everything is fp32.
* The paper's blockwise causal attention (its other extrapolation device, at inference) is not
  part of this encoding; lengen evaluates with full causal attention for every encoding.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.xpos import XPosConfig
from lengen.pe.rope import check_layout, rope_angles, rotate_pairs


def xpos_decay_rates(dim: int, gamma: float = 0.4) -> Tensor:
    """ζ_i = (2i/dim + γ')/(1 + γ') for i = 0 … dim/2 − 1 -> Tensor[dim // 2], fp32."""
    fractions = torch.arange(0, dim, 2, dtype=torch.float64) / dim  # 2i/d
    return ((fractions + gamma) / (1 + gamma)).to(torch.float32)


def xpos_scale(
    positions: Tensor,
    dim: int,
    *,
    scale_base: float = 512.0,
    gamma: float = 0.4,
    center: Tensor | float = 0,
) -> Tensor:
    """ζ_i^((p − center)/scale_base): positions (...,) -> (..., dim // 2), fp32.

    Queries are multiplied by this, keys by its inverse (``downscale`` in ``apply_xpos``)."""
    with torch.autocast(positions.device.type, enabled=False):
        zeta = xpos_decay_rates(dim, gamma).to(positions.device)
        offsets = positions.to(torch.float32) - torch.as_tensor(center).to(positions.device)
        return zeta ** (offsets.to(torch.float32)[..., None] / scale_base)


def apply_xpos(
    x: Tensor,
    positions: Tensor,
    base: float = XPosConfig.base,
    *,
    layout: str = "interleaved",
    scale_base: float = 512.0,
    gamma: float = 0.4,
    downscale: bool = False,
    center: Tensor | float = 0,
) -> Tensor:
    """RoPE-rotate the last dimension of x and scale pair i by ζ_i^(±(p − center)/scale_base).

    Args:
        x: (..., seq, head_dim), head_dim even.
        positions: broadcastable to ``x.shape[:-1]``, e.g. (seq,).
        downscale: False for queries (ζ^(+…)), True for keys (ζ^(−…)).
        center: common reference position of the queries and keys of one product.

    Returns:
        Tensor shaped and typed like x; computed in fp32.
    """
    dim = x.shape[-1]
    if dim % 2:
        raise ValueError(f"xPos needs an even head dimension, got {dim}")
    check_layout(layout)
    with torch.autocast(x.device.type, enabled=False):
        angles = rope_angles(positions, dim, base)  # (..., seq, dim/2)
        scale = xpos_scale(positions, dim, scale_base=scale_base, gamma=gamma, center=center)
        if downscale:
            scale = 1.0 / scale
        return rotate_pairs(x, angles, layout=layout, magnitude=scale)


class XPos(PositionalEncoding):
    """Rotates and scales queries and keys of every head (causal attention only).

    Args:
        base: θ base; must be > 1.
        layout: ``interleaved`` (default, torchscale) or ``half``.
        scale_base: γ in ζ^(n/γ); must be > 0; None = train_positions / 2 (the paper's 512 for
            1,024-token training), or 512 when the training positions are unknown.
        gamma: γ' in ζ_i = (2i/d + γ')/(1 + γ'); must be > 0 (0.4 in the paper).
    """

    Options = XPosConfig
    #: the paper's scale base and the training length it served (Sun et al., 2023)
    PAPER_SCALE_BASE, PAPER_TRAIN_LENGTH = 512.0, 1024

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        scale_base, self.scale_base_source = self.cfg.scale_base, "given"
        if scale_base is None:
            scale_base, self.scale_base_source = self.default_scale_base()
        #: γ as used: ``pe.scale_base``, or derived from the training length where it is null
        self.scale_base = float(scale_base)

    def default_scale_base(self) -> tuple[float, str]:
        """``pe.scale_base: null`` -> (γ, where it came from)."""
        if not self.train_positions:
            return self.PAPER_SCALE_BASE, "the paper's 512 (training positions unknown)"
        ratio = self.PAPER_TRAIN_LENGTH / self.PAPER_SCALE_BASE  # 2
        return self.train_positions / ratio, f"train_positions {self.train_positions} / 2"

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        # q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,)
        center = (k_positions.min() + k_positions.max()) // 2  # on device, no host sync
        cfg = self.cfg
        options = dict(
            layout=cfg.layout, scale_base=self.scale_base, gamma=cfg.gamma, center=center
        )
        q = apply_xpos(q, q_positions, cfg.base, **options)
        k = apply_xpos(k, k_positions, cfg.base, downscale=True, **options)
        return q, k

    def describe(self) -> dict:
        """The options that differ from the defaults, then the scale base used and its source
        (for results.json)."""
        info = self.cfg.changed("scale_base")
        info.update(scale_base=self.scale_base, scale_base_from=self.scale_base_source)
        return info
