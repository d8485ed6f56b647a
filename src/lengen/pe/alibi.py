"""ALiBi: attention with linear biases (Press et al., 2022, "Train Short, Test Long").

No position is added to embeddings; each head h adds −m_h · (query position − key position) to
its attention logits. The slopes m_h form a geometric sequence: for n heads (a power of two)
m_h = 2^(−8h/n), h = 1 … n. For other head counts the paper's code takes the slopes of the
closest smaller power of two, 2^k, and fills the remaining n − 2^k heads with every other slope
of 2^(k+1) heads; ``alibi_slopes`` follows that rule.

Bidirectional use (encoders) is not defined in the paper. ``pe.bidirectional=symmetric`` (the
default and, for now, the only choice) uses −m_h · |i − j| in both directions, which equals the
paper's causal bias wherever a causal mask lets a query look. Other variants are planned.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding

BIDIRECTIONAL = ("symmetric",)


def _power_of_two_slopes(n_heads: int) -> list[float]:
    start = 2.0 ** (-8.0 / n_heads)
    return [start ** (h + 1) for h in range(n_heads)]


def alibi_slopes(n_heads: int) -> Tensor:
    """Press et al.'s per-head slopes -> Tensor[n_heads], fp32, largest first.

    12 heads: 2^-1 … 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    """
    if n_heads < 1:
        raise ValueError(f"model.n_heads must be a positive integer, got {n_heads}")
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = _power_of_two_slopes(closest)
    if closest < n_heads:
        slopes += _power_of_two_slopes(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBi(PositionalEncoding):
    """Linear distance penalty per head, as an attention-logit bias.

    Args:
        bidirectional: how a non-causal model sees keys after the query; ``symmetric``.
    """

    def __init__(self, *, bidirectional: str = "symmetric", **kwargs) -> None:
        super().__init__(**kwargs)
        if bidirectional not in BIDIRECTIONAL:
            raise ValueError(
                f"pe.bidirectional must be one of {', '.join(BIDIRECTIONAL)}; got {bidirectional!r}"
            )
        self.bidirectional = bidirectional
        # A plain attribute, not a buffer: model.to(bfloat16) must not round the slopes
        # (2^-0.5 would become 0.707, shifting the bias by ~0.75 at distance 10,000).
        self.slopes = alibi_slopes(self.n_heads)

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # heads, q_positions, k_positions broadcast to e.g. (H, Tq, Tk); the result is fp32
        if self.slopes.device != q_positions.device:
            self.slopes = self.slopes.to(q_positions.device)
        distance = (q_positions - k_positions).abs().to(torch.float32)
        return -self.slopes[heads] * distance

    def describe(self) -> dict:
        return {"slopes": [round(s, 8) for s in self.slopes.tolist()]}
