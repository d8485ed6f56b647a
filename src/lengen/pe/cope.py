"""CoPE: contextual position encoding (Golovneva et al., 2024, "Contextual Position Encoding:
Learning to Count What's Important").

Positions are counted, not indexed: a gate g_ij = σ(q_i·k_j / √d) decides whether key j counts
for query i, and the position of key j relative to query i is p_ij = Σ_{t=j}^{i} g_it — a
fractional count of the keys between them that the query "sees". Each integer position has a
learned embedding e[p] (per head dimension, shared by the heads); fractional positions
interpolate linearly between e[⌊p⌋] and e[⌈p⌉], and the logit gains q_i·e[p_ij]:

    a_ij = q_i·k_j / √d + q_i·e[p_ij]

Positions are clamped to ``npos_max − 1``. The gates use the scaled and masked logits, as the
paper's reference code does (masked keys have gate 0).

Deviations and choices:
* the paper gives every attention layer its own embeddings; here one CoPE module serves all
  layers of a stack (like T5's shared relative bias), so the embeddings are shared across layers;
* the counting runs from key to query over the keys a causal mask allows, so CoPE is causal
  only (``causal_only``); bidirectional counting is not defined in the paper;
* embeddings start at zero, as in the reference code: a fresh CoPE model is NoPE.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.cope import CoPEConfig


def cope_positions(logits: Tensor, npos_max: int) -> Tensor:
    """Contextual positions from masked logits (..., Tq, Tk) -> (..., Tq, Tk), fp32.

    p_ij = Σ_{t ≥ j} σ(logits_it), i.e. Σ_{t=j}^{i} where the causal mask zeroes t > i.
    """
    gates = torch.sigmoid(logits.float())
    positions = gates.flip(-1).cumsum(dim=-1).flip(-1)
    return positions.clamp(max=npos_max - 1)


def interpolated_logits(q: Tensor, embeddings: Tensor, positions: Tensor) -> Tensor:
    """q·e[p] with e linearly interpolated at fractional p.

    q (B, H, Tq, hd), embeddings (hd, npos_max), positions (B, H, Tq, Tk) -> (B, H, Tq, Tk).
    """
    per_integer = torch.matmul(q.float(), embeddings.float())  # (B, H, Tq, npos_max)
    floor = positions.floor()
    weight = positions - floor
    at_floor = per_integer.gather(-1, floor.long())
    at_ceil = per_integer.gather(-1, positions.ceil().long())
    return at_ceil * weight + at_floor * (1 - weight)


class CoPE(PositionalEncoding):
    """Adds q·e[p_ij] to the attention logits, with p_ij counted by sigmoid gates.

    Args:
        npos_max: number of integer positions with an embedding; counts beyond are clamped.
    """

    Options = CoPEConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        self.embeddings = nn.Parameter(torch.zeros(self.head_dim, self.cfg.npos_max))

    def contextual_logits(
        self, q: Tensor, logits: Tensor, *, scores: Tensor | None = None, bias: Tensor | None = None
    ) -> Tensor:
        # q: (B, H, c, hd); logits: (B, H, c, Tk), scaled, −inf where masked (all CoPE reads)
        positions = cope_positions(logits, self.cfg.npos_max)
        return interpolated_logits(q, self.embeddings, positions)

    def describe(self) -> dict:
        return {"npos_max": self.cfg.npos_max}
