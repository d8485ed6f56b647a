"""ALiBi: attention with linear biases (Press et al., 2022, "Train Short, Test Long: Attention
with Linear Biases Enables Input Length Extrapolation").

No position is added to embeddings; each head h adds −m_h · (query position − key position) to
its attention logits. The slopes m_h form a geometric sequence: for n heads (a power of two)
m_h = 2^(−8h/n), h = 1 … n. For other head counts the paper's code takes the slopes of the
closest smaller power of two, 2^k, and fills the remaining n − 2^k heads with every other slope
of 2^(k+1) heads; ``alibi_slopes`` follows that rule.

Bidirectional use (encoders) is not defined in the paper; ``pe.bidirectional`` chooses how a
non-causal stack sees the keys (i is the query position, j the key position, m_h the slope).
A causal stack always uses the paper's bias −m_h · (i − j); the option changes nothing there.

* ``symmetric`` (default): −m_h · |i − j| in both directions, which equals the paper's causal
  bias wherever a causal mask lets a query look.
* ``asymmetric_offset``: what the Chomsky-hierarchy code (Delétang et al., 2023, reused by Ruoss
  et al., 2023, ``compute_alibi_encodings_biases``) does: the symmetric matrix −|i − j| plus
  0.5 on keys strictly before the query (j < i), the whole multiplied by m_h, i.e.
  −m_h · (i − j − 0.5) for j < i, 0 for j = i, −m_h · (j − i) for j > i. The half-step offset
  (their comment: "to (arbitrarily) break the symmetry") lets a head tell left from right.
* ``separate``: keys at or before the query use the slopes m_h, keys after it a second set
  m'_h. Our choice for m'_h: the same geometric sequence in reverse head order,
  m'_h = m_{n+1−h}, so the head that looks sharply back looks broadly forward and vice versa and
  every head is asymmetric (one head: m' = m, i.e. symmetric).

``pe.learnable_slopes=true`` makes the slopes (and, with ``separate``, the second set) trainable,
initialised at the values above and kept positive by learning their logarithms, slope =
exp(log-slope), as x-transformers' ``LearnedAlibiPositionalBias`` does. Fixed slopes stay plain
fp32 attributes (``model.to(bfloat16)`` must not round them); learned ones are parameters and
follow the module's dtype, and ``describe()`` reports their current (trained) values.

**Grids and volumes** (positions (T, A)): head h adds −m_h · dist(p_q, p_k), the distance
between the two cells, ``pe.grid_distance``:

* ``euclidean`` (default): ‖p_q − p_k‖₂, invariant under rotations of the grid, the 2-D ALiBi
  of Fuller et al., 2023, "CROMA" (NeurIPS; antofuller/CROMA, ``pretrain_croma.py``,
  ``get_2dalibi``: Press et al.'s slopes times the Euclidean distance between patches), which
  designed so that a model extrapolates to larger images than it trained on;
* ``manhattan``: |Δ_0| + … + |Δ_{A−1}|, what adding a 1-D ALiBi per axis gives.

On a grid the bias is not a function of one index offset, so ``bias_is_relative`` is False and
attention builds it per block of queries (``attention_bias`` on (c, A) and (Tk, A) positions).
A pair with a −1 row (a readout slot) gets bias 0. Only ``bidirectional: symmetric`` has a form
on grids (a cell is not "before" or "after" another).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.alibi import ALiBiConfig
from lengen.pe.grid import has_position


def grid_distance(offsets: Tensor, kind: str = "euclidean") -> Tensor:
    """Distance of offset vectors (..., A) -> (...,), fp32: ``euclidean`` ‖δ‖₂ or
    ``manhattan`` Σ|δ_a|."""
    offsets = offsets.to(torch.float32)
    if kind == "manhattan":
        return offsets.abs().sum(dim=-1)
    return offsets.square().sum(dim=-1).sqrt()


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
        bidirectional: how a non-causal model sees the keys; ``symmetric``,
            ``asymmetric_offset`` or ``separate`` (see the module docstring).
        learnable_slopes: train the slopes (log-parameterised, initialised at Press et al.'s).
        grid_distance: on grids and volumes, ``euclidean`` or ``manhattan`` (module docstring).
    """

    bias_is_relative = True  # a function of q − k: attention reads a table per offset
    # bias_of_distance: randomized positions randomize the distances (base class)
    Options = ALiBiConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        if self.axes > 1:
            # a distance between cells: not one offset along one axis (module docstring)
            self.bias_is_relative = False
        slopes = alibi_slopes(self.n_heads)
        # a second set only where it can matter: keys after the query exist only without a mask
        separate = self.cfg.bidirectional == "separate" and not self.causal
        future = slopes.flip(0) if separate else None
        if self.cfg.learnable_slopes:
            self.log_slopes = nn.Parameter(slopes.log())
            self.log_future_slopes = None if future is None else nn.Parameter(future.log())
        else:
            # Plain attributes, not buffers: model.to(bfloat16) must not round the slopes
            # (2^-0.5 would become 0.707, shifting the bias by ~0.75 at distance 10,000).
            self._slopes = slopes
            self._future_slopes = future

    @property
    def slopes(self) -> Tensor:
        """Current slopes m_h for keys at or before the query -> (H,), fp32."""
        if self.cfg.learnable_slopes:
            return self.log_slopes.to(torch.float32).exp()
        return self._slopes

    @property
    def future_slopes(self) -> Tensor | None:
        """Slopes for keys after the query with ``bidirectional=separate`` (non-causal), else
        None -> (H,), fp32."""
        if self.cfg.learnable_slopes:
            log_future = self.log_future_slopes
            return None if log_future is None else log_future.to(torch.float32).exp()
        return self._future_slopes

    def _fixed_to(self, device: torch.device) -> None:
        if not self.cfg.learnable_slopes and self._slopes.device != device:
            self._slopes = self._slopes.to(device)
            if self._future_slopes is not None:
                self._future_slopes = self._future_slopes.to(device)

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # heads, q_positions, k_positions broadcast to e.g. (H, Tq, Tk); the result is fp32.
        # On A axes the positions carry a last dimension A: e.g. (1, Tq, 1, A), (1, 1, Tk, A)
        self._fixed_to(q_positions.device)
        if self.axes > 1:
            return self._grid_bias(heads, q_positions, k_positions)
        with torch.autocast(q_positions.device.type, enabled=False):
            # i − j > 0: key before query (randomized distances: d_|i−j| with its sign)
            offset = self.relative_distance(q_positions, k_positions).to(torch.float32)
            distance = offset.abs()
            slopes = self.slopes[heads]  # e.g. (H, 1, 1)
            if self.causal or self.cfg.bidirectional == "symmetric":
                return -slopes * distance
            if self.cfg.bidirectional == "asymmetric_offset":
                return -slopes * (distance - 0.5 * (offset > 0).to(torch.float32))
            # separate: keys at or before the query use the slopes, keys after it the second set
            future = self.future_slopes[heads]
            return torch.where(offset >= 0, -slopes * distance, -future * distance)

    def _grid_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """−m_h · dist(p_q, p_k), 0 where either is a −1 row -> broadcast of heads and the
        positions without their axis dimension, fp32."""
        with torch.autocast(q_positions.device.type, enabled=False):
            distance = grid_distance(q_positions - k_positions, self.cfg.grid_distance)
            both = has_position(q_positions) & has_position(k_positions)  # (..., Tq, Tk)
            return -self.slopes[heads] * (distance * both)

    def describe(self) -> dict:
        info = {
            "slopes": [round(s, 8) for s in self.slopes.detach().tolist()],
            "bidirectional": self.cfg.bidirectional,
            "learnable_slopes": self.cfg.learnable_slopes,
        }
        if self.axes > 1:
            info["grid_distance"] = self.cfg.grid_distance
        if self.future_slopes is not None:
            info["future_slopes"] = [round(s, 8) for s in self.future_slopes.detach().tolist()]
        return info
