"""DeltaNet: linear attention whose memory is corrected by the delta rule.

S_t = S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀ k_t)ᵀ, o_t = S_tᵀ q_t, with q, k L2-normalised after a
SiLU and β_t = σ(w_β · x_t) per head (Schlag et al. 2021, "Linear Transformers Are Secretly
Fast Weight Programmers", arXiv 2102.11174; Yang et al. 2024, "Parallelizing Linear
Transformers with the Delta Rule over Sequence Length", arXiv 2406.06484, for the chunked
form). ``negative_eigenvalues``: β_t = 2σ(·) in (0, 2) (Grazzi et al. 2025, "Unlocking State-
Tracking in Linear RNNs Through Negative Eigenvalues", ICLR 2025, arXiv 2411.12537). Reference
read: ``fla-org/flash-linear-attention`` ``fla/ops/delta_rule/naive.py``.
"""

from __future__ import annotations

from lengen.model.mixers.config.deltanet import DeltaNetConfig
from lengen.model.mixers.linear import LinearMixer


class DeltaNet(LinearMixer):
    Options = DeltaNetConfig
    delta = True
