"""Gated linear attention with a scalar forget gate per head (Mamba-2's, in GLA's form).

S_t = α_t S_{t−1} + k_t v_tᵀ, o_t = S_tᵀ q_t, with log α_t = −exp(A_log) · softplus(W_Δ x_t +
dt_bias) per head (Dao & Gu 2024, "Transformers are SSMs: Generalized Models and Efficient
Algorithms Through Structured State Space Duality", arXiv 2405.21060; the scalar-gate form of
Yang et al. 2024, "Gated Linear Attention Transformers with Hardware-Efficient Training", arXiv
2312.06635, as fla's ``simple_gla``). Reference read: ``fla-org/flash-linear-attention``
``fla/ops/simple_gla/naive.py``. Deviation from Mamba-2: the written value is v_t, not
Δ_t · x_t (the GLA form); the short convolution is off by default (``conv_size`` 0, as in
fla's simple GLA layer; docs/models.md).
"""

from __future__ import annotations

from lengen.model.mixers.config.gla import GatedLinearAttentionConfig
from lengen.model.mixers.linear import LinearMixer


class GatedLinearAttention(LinearMixer):
    Options = GatedLinearAttentionConfig
    gated = True
