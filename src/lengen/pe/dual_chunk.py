"""Dual chunk attention, DCA (An et al., 2024, "Training-Free Long-Context Scaling of Large
Language Models", ICML; arXiv 2402.17463), an arm of ``pe.extension``
(``lengen.pe.extension``).

The sequence is cut into chunks of C = s − w tokens (s = ``pe.dca_chunk_size``, w =
``pe.dca_local_window``). Every key j sits at j mod C; the query's position depends on where
the key is (intra-, successive- and inter-chunk attention; the paper's text is not stored, so
the indices are the reference code's: HKUNLP/ChunkLlama, ``chunkllama_attn_replace.py``,
``ChunkLlamaRotaryEmbedding._set_cos_sin_cache`` builds ``q_t``, ``qc_t``, ``k_t``; ``forward``
picks them per chunk pair):

* intra-chunk (the key in the query's chunk): query at i mod C (``q_t``), so the relative
  position is i − j, as in plain RoPE;
* successive-chunk (the key in the chunk before): query at min(i mod C + C, s) (``qc_t``);
* inter-chunk (two or more chunks before): query at min(2C − 1, s) (``qc_t`` at
  ``chunk_len − 1``), one position for every query.

Three score sets merged by the chunk distance ⌊i/C⌋ − ⌊j/C⌋ (0, 1, ≥ 2). The reference runs
each pair of chunks through flash attention and merges the outputs by their log-sum-exps
(``merge_attn_outputs``): the same softmax over all keys; lengen forms the three score sets per
block of queries and takes one softmax. Its ``scaling_factor`` (PI on top of DCA, 1 by default)
is not offered; ``pe.scaling`` is refused with an arm.
"""

from __future__ import annotations

import torch
from torch import Tensor

from lengen.pe.config.dual_chunk import DualChunkParams


class DualChunk:
    """Three score sets: 0 intra (i mod C), 1 successive (min(i mod C + C, s)), 2 inter
    (min(2C − 1, s)); keys at j mod C in all three."""

    sets = 3

    def __init__(self, params: DualChunkParams) -> None:
        self.chunk_size, self.local_window = params.chunk_size, params.local_window
        self.chunk_len = params.chunk_len  # C

    @property
    def plain_keys(self) -> int:
        """Up to C keys all sit in the first chunk at positions j mod C = j: plain RoPE."""
        return self.chunk_len

    def query_positions(self, q_index: Tensor) -> list[Tensor]:
        """q_index (c,) -> each set's query positions (c,)."""
        inner = q_index % self.chunk_len
        successive = (inner + self.chunk_len).clamp(max=self.chunk_size)
        inter = torch.full_like(q_index, min(2 * self.chunk_len - 1, self.chunk_size))
        return [inner, successive, inter]

    def key_positions(self, k_index: Tensor) -> list[Tensor]:
        """k_index (Tk,) -> each set's key positions (Tk,): j mod C in all three."""
        inner = k_index % self.chunk_len
        return [inner, inner, inner]

    def choose(self, q_index: Tensor, k_index: Tensor) -> Tensor:
        """Broadcastable (c, 1), (1, Tk) -> the set of each score (c, Tk): chunk distance,
        capped at 2 (keys after the query are masked anyway)."""
        distance = q_index // self.chunk_len - k_index // self.chunk_len
        return distance.clamp(0, 2)

    def describe(self) -> dict:
        return {
            "dca_chunk_size": self.chunk_size,
            "dca_local_window": self.local_window,
            "dca_chunk_len": self.chunk_len,
        }
