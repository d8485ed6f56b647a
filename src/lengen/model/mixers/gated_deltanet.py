"""Gated DeltaNet: the delta rule with a scalar forget gate per head.

S_t = α_t S_{t−1} + β_t k_t (v_t − α_t S_{t−1}ᵀ k_t)ᵀ, o_t = S_tᵀ q_t: DeltaNet's update after
Mamba-2's decay (Yang, Kautz & Hatamizadeh 2025, "Gated Delta Networks: Improving Mamba2 with
Delta Rule", ICLR 2025, arXiv 2412.06464). ``negative_eigenvalues``: β in (0, 2) (Grazzi et al.
2025, arXiv 2411.12537), the state-tracking variant. Reference read:
``fla-org/flash-linear-attention`` ``fla/ops/gated_delta_rule/naive.py``
(``naive_recurrent_gated_delta_rule``, ``naive_chunk_gated_delta_rule``).
"""

from __future__ import annotations

from lengen.model.mixers.config.gated_deltanet import GatedDeltaNetConfig
from lengen.model.mixers.linear import LinearMixer


class GatedDeltaNet(LinearMixer):
    Options = GatedDeltaNetConfig
    delta = True
    gated = True
