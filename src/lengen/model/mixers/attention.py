"""Softmax attention as a mixer (``configs/model/mixer/attention.yaml``, the default): the
layer of ``lengen.model.attention``, built with the keywords every mixer is built with. The
same modules in the same order as a block built before mixers existed, so parameters,
checkpoints and numbers are unchanged."""

from __future__ import annotations

from lengen.model.attention import MultiHeadAttention
from lengen.model.mixers.config.attention import AttentionConfig


class Attention(MultiHeadAttention):
    """Self-attention with the encoding's hooks; ``kernel`` is ``model.attention``."""

    Options = AttentionConfig

    def __init__(self, *, d_model, n_heads, dropout, causal, kernel="auto") -> None:
        super().__init__(d_model, n_heads, dropout, causal=causal, cross=False, kernel=kernel)
