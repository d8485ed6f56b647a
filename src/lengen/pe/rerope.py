"""ReRoPE and Leaky ReRoPE (Su, 2023, "ReRoPE: Rectified Rotary Position Embeddings",
kexue.fm/archives/9708), an arm of ``pe.extension`` (``lengen.pe.extension``).

ReRoPE clamps the relative position at a window w: query i reads key j at i − j while
i − j < w and at w beyond (positions ≥ w all read as w). Leaky ReRoPE (``pe.rerope_leak`` = k)
lets it grow k times slower instead: w + (i − j − w)/k beyond w. Two score sets merged by the
mask i − j < w, as the reference code (bojone/rerope):

* ``rerope_patch.py``, ``forward_with_rerope``: set 1 (``attn_weights1``) rotates q and k at
  their positions; set 2 rotates q at ``position_ids * 0 + window`` and leaves k unrotated
  (relative w); ``rectified_mask = (i − j).abs() < window`` picks set 1.
* ``leaky_rerope_patch.py``, ``forward_with_leaky_rerope``: set 2 rotates with θ/k (Hugging
  Face's linear scaling, ``scaling_factor`` = k), q at i + w(k − 1) and k at j, so the relative
  position is (i − j + w(k − 1))/k = w + (i − j − w)/k. lengen writes the same angles as q at
  (i + w(k − 1))/k and k at j/k with θ unscaled.

**Where lengen differs.** Both reference patches also multiply every query by
max(1, log(i + 1) / log L) (a log-n temperature); lengen leaves that to its own option,
``pe.log_length_scale=true`` (per query, log n / log L of the keys a query sees), so the arm can
be compared with and without it.
"""

from __future__ import annotations

from torch import Tensor

from lengen.pe.config.rerope import ReRoPEParams


class ReRoPE:
    """Two score sets: 0 plain (i, j); 1 rectified: (w, 0), or leaky ((i + w(k−1))/k, j/k)."""

    sets = 2

    def __init__(self, params: ReRoPEParams) -> None:
        self.window, self.leak = params.window, params.leak

    @property
    def plain_keys(self) -> int:
        """Up to w keys no relative position reaches w: plain RoPE."""
        return self.window

    def query_positions(self, q_index: Tensor) -> list[Tensor]:
        """q_index (c,) -> each set's query positions (c,)."""
        if self.leak is None:
            return [q_index, q_index * 0 + self.window]
        return [q_index, (q_index + self.window * (self.leak - 1)) / self.leak]

    def key_positions(self, k_index: Tensor) -> list[Tensor]:
        """k_index (Tk,) -> each set's key positions (Tk,)."""
        return [k_index, k_index * 0 if self.leak is None else k_index / self.leak]

    def choose(self, q_index: Tensor, k_index: Tensor) -> Tensor:
        """Broadcastable (c, 1), (1, Tk) -> the set of each score (c, Tk): rectified from w."""
        return (q_index - k_index >= self.window).long()

    def describe(self) -> dict:
        described = {"rerope_window": self.window}
        if self.leak is not None:
            described["rerope_leak"] = self.leak
        return described
