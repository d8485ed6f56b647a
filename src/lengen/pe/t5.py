"""T5 relative position bias (Raffel et al., 2020, "Exploring the Limits of Transfer Learning
with a Unified Text-to-Text Transformer", §2.1).

Each head adds a learned scalar to the logit of query i and key j, looked up by the bucket of
the relative position ``key − query = j − i`` (T5's sign convention). The buckets follow T5's
``_relative_position_bucket`` (Mesh TensorFlow; the same function in Hugging Face's T5):

* bidirectional (non-causal stacks): half of the ``num_buckets`` buckets serve keys at or
  before the query, the other half keys after it (bucket offset ``num_buckets // 2``), and the
  distance is |j − i|; causal stacks: all buckets serve keys at or before the query, distance
  max(i − j, 0) (later keys share bucket 0 and are masked anyway);
* of the n buckets of one side, the first n/2 are exact distances 0 … n/2 − 1; the rest grow
  logarithmically, bucket = n/2 + ⌊log(d / (n/2)) / log(max_distance / (n/2)) · (n − n/2)⌋,
  clamped to the last bucket (every distance ≥ ``max_distance`` shares it).

The logarithm is evaluated in fp32 and truncated toward zero, as T5 does; at integer distances
this agrees with exact arithmetic (tested against a float64 reference from −300 to 300).

**max_distance sized for the run.** T5 trained on 512-token inputs with max_distance 128: the
last bucket gathers the distances 128 … 511, three quarters of the distances training sees, so
it is well trained, and every longer distance met at evaluation lands in it. With this tool's
training lengths (16–258 positions) T5's 128 would put every training distance of runs up to
128 positions in the exact and log buckets and leave the last bucket, which every longer
evaluation distance uses, untrained (at its random initialisation), and train it on few
distances at 258. ``pe.max_distance: null`` (the default) therefore
keeps T5's ratio: max_distance = train_positions // 4 (T5: 512 // 4 = 128), at least
num_buckets // 2 + 1 (a logarithmic range must exist past the exact buckets); without known
training positions (a module built directly) T5's 128. ``pe.max_distance=128`` restores T5's
value; ``describe()`` records the value used and where it came from.

As in T5, the bias is computed once per stack and shared by all its layers (each stack of an
encoder–decoder owns its own table, the decoder's unidirectional) and it is absent from
cross-attention. Initialisation: normal with std d_model^−1/2, as Hugging Face's T5 initialises
``relative_attention_bias`` (factor 1); T5 itself trained without weight decay, and the table is
an ``nn.Embedding`` named ``table`` so the optimiser's no-decay rule for tables applies.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.t5 import T5RelativeBiasConfig


def t5_relative_bucket(
    relative_position: Tensor,
    bidirectional: bool,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """T5's bucket of ``relative_position = key − query``: integer tensor (any shape) -> int64
    tensor of the same shape with values in [0, num_buckets)."""
    relative_position = relative_position.long()
    offset = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        offset = (relative_position > 0).long() * num_buckets  # keys after the query
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)  # keys at or before the query
    max_exact = num_buckets // 2
    with torch.autocast(distance.device.type, enabled=False):
        # fp32 logarithm, truncated toward zero (T5: tf.to_int32); the clamp only keeps log()
        # finite where the exact branch is taken
        ratio = distance.clamp(min=max_exact).to(torch.float32) / max_exact
        scaled = torch.log(ratio) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    logarithmic = (max_exact + scaled.long()).clamp(max=num_buckets - 1)
    return offset + torch.where(distance < max_exact, distance, logarithmic)


class T5RelativeBias(PositionalEncoding):
    """A learned bias per (bucket, head), shared by every layer of the stack.

    Args:
        num_buckets: buckets of relative positions (32 in T5); the table has one row each.
        max_distance: distances from here on share the last bucket; None = train_positions // 4
            (T5's ratio, 128 for 512), at least num_buckets // 2 + 1; 128 (T5's) when the
            training positions are unknown.
    """

    bias_is_relative = True  # a function of q − k: attention reads a table per offset
    # bias_of_distance: randomized positions randomize the distances (base class)
    Options = T5RelativeBiasConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        # null: sized from the training positions (T5RelativeBiasConfig: T5's ratio)
        self.max_distance, self.max_distance_source = self.derived
        self.table = nn.Embedding(self.cfg.num_buckets, self.n_heads)  # (buckets, H)
        nn.init.normal_(self.table.weight, std=self.d_model**-0.5)

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        # heads, q_positions, k_positions broadcast to e.g. (H, Tq, Tk); the result is fp32
        relative = -self.relative_distance(q_positions, k_positions)  # key − query, T5's sign
        bucket = t5_relative_bucket(
            relative, not self.causal, self.cfg.num_buckets, self.max_distance
        )  # e.g. (1, Tq, Tk)
        return self.table.weight[bucket, heads].to(torch.float32)  # e.g. (H, Tq, Tk)

    def describe(self) -> dict:
        return {
            "num_buckets": self.cfg.num_buckets,
            "max_distance": self.max_distance,
            "max_distance_from": self.max_distance_source,
            "bidirectional": not self.causal,
        }
