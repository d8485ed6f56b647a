"""ComRoPE: rotations exp(Σ_a p_a A_a) with learned generators that commute by construction
(Yu et al., 2025, "ComRoPE: Scalable and Robust Rotary Position Embedding Parameterized by
Trainable Commuting Angle Matrices", CVPR; arXiv 2506.03737; reference code Longin-Yu/ComRoPE,
``model.py``: ``ComRoPELDAttention``, ``ComRoPEAPAttention``, ``RoPESelfAttentionBase``).

Each generator A_a is block-diagonal, b×b skew-symmetric blocks B_{a,j}; the blocks of one
index j commute across the axes, so the A_a commute and R(x)ᵀ R(y) = R(y − x): q'·k' depends
on the offset only (the paper's "RoPE equation", README: "the elements in B_j … pairwise
commute"). Two constructions, ``pe.variant``:

* ``ld`` (ComRoPE-LD, default): B_{a,j} = θ_{a,j} (P_j − P_jᵀ), one learned P_j per head and
  block, θ_{a,j} per axis and block (``ComRoPELDAttention``: ``freqs`` (heads, 1, blocks, b, b)
  ~ N(0, init_std), ``multiplier`` (1, axes, blocks, 1, 1) ~ N(0, 1), shared by the heads);
* ``ap`` (ComRoPE-AP): B_{a,j} = P_j − P_jᵀ if j ≡ a (mod A), else 0: each block turns with
  one axis (``ComRoPEAPAttention._create_mask``).

**Default variant.** The reference code has no default between them (its config's
``custom_pe_type`` defaults to ``raw``, the absolute table); the README presents AP then LD.
lengen defaults to LD, the variant a secondary summary of the paper singles out
(emergentmind.com, "ComRoPE": "variants like ComRoPE-LD outperform traditional methods"); the
paper's own tables were not in the stored text, so which variant its headline numbers are is
unverified here.
**Defaults as the code's** ``CustomVITConfig``: ``block_size`` 2, ``init_std`` 1.0; one set per
layer (each layer's attention is built with its own parameters); positions normalised by the
grid side (``get_positions``, ``axis_scale``: (p + 0.5) / n; the 0.5 cancels in the relative
form, here p / side). **Differences**: a readout slot (the −1 row) is rotated by the identity
(the reference puts the class token at position 0.5 in every axis); ``pe.normalize=false``
uses integer coordinates; the parameters are flat vectors (no weight decay).

**What it reduces to.** At b = 2 a skew block is s·J (J the 90° turn), so LD is a RoPE-Mixed
rotation whose pair j turns by Σ_a θ_{a,j} s_{h,j} p_a (frequency vectors θ_{·,j} shared by the
heads, scaled per head), and AP is axial RoPE with learned frequencies, the pairs assigned to
the axes in turn (j mod A); on sequences both are RoPE with learned frequencies (tested).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lengen.pe.config.comrope import ComRoPEConfig
from lengen.pe.liere import LearnedGenerators


def axis_partition_mask(axes: int, blocks: int) -> Tensor:
    """(A, n) float: 1 where block j belongs to axis a (j mod A == a), as the reference's
    ``_create_mask``."""
    block = torch.arange(blocks)
    return (block[None, :] % axes == torch.arange(axes)[:, None]).float()


def comrope_generators(bases: Tensor, scales: Tensor | None, axes: int) -> Tensor:
    """Commuting generators from P: bases (H, n, b, b) raw P_j; scales (A, n) θ (LD) or None
    (AP) -> (H, A, n, b, b), skew-symmetric, commuting across a."""
    skew = bases - bases.transpose(-1, -2)  # (H, n, b, b): P − Pᵀ
    if scales is None:
        scales = axis_partition_mask(axes, bases.shape[1]).to(bases)  # (A, n)
    return skew[:, None] * scales[None, :, :, None, None]  # (H, A, n, b, b)


class ComRoPE(LearnedGenerators):
    """ComRoPE: learned commuting generators, LD or AP (module docstring).

    Args:
        variant: ``ld`` (default) or ``ap``.
        block_size: b of the b×b blocks (2, the reference code's default).
        init_std: standard deviation of the initial P.
        per_layer: one set per layer (the reference).
        normalize: coordinates divided by the training extent per axis (the reference).
    """

    Options = ComRoPEConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        base_shape = (self.sets, self.n_heads, self.blocks, self.block, self.block)
        self.base_shape = base_shape
        # flat parameters: the optimiser leaves 1-D parameters undecayed
        self.bases = nn.Parameter((torch.randn(base_shape) * self.cfg.init_std).flatten())
        self.scale_shape = (self.sets, self.axes, self.blocks)
        self.scales = None
        if self.cfg.variant == "ld":
            self.scales = nn.Parameter(torch.randn(self.scale_shape).flatten())

    def generators(self) -> Tensor:
        layer = self.layer_set()
        bases = self.bases.view(self.base_shape)[layer]  # (H, n, b, b)
        scales = None if self.scales is None else self.scales.view(self.scale_shape)[layer]
        return comrope_generators(bases, scales, self.axes)  # (H, A, n, b, b)


__all__ = ["ComRoPE", "axis_partition_mask", "comrope_generators"]
