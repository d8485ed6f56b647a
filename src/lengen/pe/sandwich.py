"""Sandwich (Chi, Fan, Rudnicky & Ramadge, 2023, "Dissecting Transformer Length Extrapolation
via the Lens of Receptive Field Analysis", ACL 2023).

A parameter-free relative bias: the inner product of the sinusoidal position encodings of
query m and key n, which depends on m − n only,

    p_m · p_n = Σ_{i=0}^{d̄/2−1} cos((m − n) / base^(2i/d̄)),

with ALiBi-like per-head compression: head h = 1 … H adds

    bias_h(m, n) = (p_m · p_n − d̄/2) / r_h,   r_h = 8h / H,

with d̄ = ``pe.dim`` = 128 and base 10,000 by default. The construction (sinusoidal inner product,
d̄ = 128, per-head ratios 8h/H) follows the two public implementations we checked: NVIDIA
NeMo's ``SandwichRelativePositionEmbedding`` and PyTorch attention-gym's Sandwich ``score_mod``
(which cites the paper's appendix E). We could not read the paper's own code; differences
between those implementations and our choices:

* subtracting d̄/2 (NeMo does, attention-gym does not) adds the same constant to every logit of
  a head, which softmax ignores; we keep it so the bias is 0 at distance 0 and ≤ 0 elsewhere;
* frequencies: the paper prints the sum as i = 1 … d̄/2, which NeMo follows literally; we use
  i = 0 … d̄/2 − 1 (as attention-gym), i.e. exactly the inner product of the Vaswani et al.
  sinusoids ``lengen.pe.sinusoidal_table`` rows that Sandwich is defined as (tested). The two
  differ by one frequency: cos(m − n) here against cos((m − n)/base) there.

The bias is symmetric in m − n, so a non-causal stack uses the same formula in both directions.
For speed and precision the per-distance profile is tabulated in float64 (one sum of d̄/2
cosines per distinct distance, cached and grown on demand, never stored in checkpoints) and
looked up in fp32; the lookup needs one host sync per bias block to size the table.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.sandwich import SandwichConfig


def sandwich_profile(
    distance: Tensor, dim: int = SandwichConfig.dim, base: float = SandwichConfig.base
) -> Tensor:
    """Σ_{i=0}^{dim/2−1} cos(distance / base^(2i/dim)) − dim/2, summed in float64 -> fp32.

    ``distance`` is any tensor of (integer or real) distances m − n; the profile is even in it.
    """
    distance = distance.to(torch.float64)
    total = torch.zeros_like(distance)
    for i in range(dim // 2):  # dim/2 passes of O(numel) memory, instead of a (…, dim/2) tensor
        total += torch.cos(distance * base ** (-2.0 * i / dim))
    return (total - dim / 2).to(torch.float32)


def sandwich_head_scales(n_heads: int) -> Tensor:
    """1 / r_h with r_h = 8h / H, h = 1 … H -> Tensor[n_heads], fp32."""
    return torch.tensor([n_heads / (8.0 * h) for h in range(1, n_heads + 1)], dtype=torch.float32)


class Sandwich(PositionalEncoding):
    """Parameter-free sinusoidal inner-product bias, compressed per head.

    Args:
        dim: d̄, the dimension of the sinusoids whose inner product is taken (even; 128).
        base: the sinusoids' wavelength base (10,000).
    """

    bias_is_relative = True  # a function of q − k: attention reads a table per offset
    # bias_of_distance: randomized positions randomize the distances (base class)
    Options = SandwichConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        # plain attributes, not buffers: model.to(bfloat16) must not round them
        self.head_scales = sandwich_head_scales(self.n_heads)
        self._table = torch.empty(0)  # profile at distances 0 … len − 1, fp32

    def profile_table(self, size: int, device: torch.device) -> Tensor:
        """The profile at distances 0 … size − 1 (at least), fp32 on ``device``, cached."""
        if len(self._table) < size or self._table.device != device:
            length = max(size, len(self._table), 1)
            length = 1 << (length - 1).bit_length()  # grow in powers of two
            self._table = sandwich_profile(
                torch.arange(length, device=device), self.cfg.dim, self.cfg.base
            )
        return self._table

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # heads, q_positions, k_positions broadcast to e.g. (H, Tq, Tk); the result is fp32
        with torch.autocast(q_positions.device.type, enabled=False):
            distance = self.relative_distance(q_positions, k_positions).abs().long()  # (1, Tq, Tk)
            size = int(distance.max()) + 1 if distance.numel() else 1
            table = self.profile_table(size, distance.device)
            if self.head_scales.device != distance.device:
                self.head_scales = self.head_scales.to(distance.device)
            return table[distance] * self.head_scales[heads]  # e.g. (H, Tq, Tk)

    def describe(self) -> dict:
        return {
            "dim": self.cfg.dim,
            "base": self.cfg.base,
            "head_scales": [round(s, 8) for s in self.head_scales.tolist()],
        }
