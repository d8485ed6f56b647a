"""PoPE: polar coordinate positional embedding (Gopalakrishnan et al., 2025, "Decoupling the
'What' and 'Where' With Polar Coordinate Positional Embeddings", arXiv 2509.10534).

RoPE rotates pairs of q's components, so what a pair says ("what") and where it is ("where")
mix in its phase. PoPE keeps them apart: each of the hd components c of a head becomes one
complex number whose magnitude is the content, μ = softplus(x_c) ≥ 0, and whose phase is the
position alone, p · θ_c. Keys carry a learnable phase bias δ per head and component:

    q̃_c = softplus(q_c) · e^{i·i·θ_c},   k̃_c = softplus(k_c) · e^{i·(j·θ_c + δ_c)}

    logit(i, j) = Re Σ_c q̃_c · conj(k̃_c) / √hd
                = Σ_c μ_q,c · μ_k,c · cos((i − j)·θ_c − δ_c) / √hd,

a function of i − j only (relative-shift invariant; tested).

As in both reference codes (lucidrains/PoPE-pytorch ``PoPE_pytorch/pope.py`` and
``attention.py``; lucidrains/x-transformers ``x_transformers.py``, ``PolarEmbedding`` and
``apply_polar_pos_emb``, read for this):

* **hd frequencies**, one per component of the head: θ_c = base^(−c/hd), c = 0 … hd − 1
  (RoPE has hd/2, one per pair);
* **δ** is a parameter of shape (heads, hd), zero at the start (``pe.bias_init: uniform`` draws
  it from U(−2π, 0), the references' ``bias_uniform_init``) and clamped to [−2π, 0] wherever it
  is used (the parameter itself is left alone, as in the references);
* **the real part as a dot product**: ``rotate`` returns q and k as [μ cos φ | μ sin φ], so a
  plain dot product of the two gives Re(q̃ · conj(k̃)). **q and k leave ``rotate`` 2·hd wide**
  while v keeps hd (x-transformers issue #348: "Polar pos emb doubles the output dimension";
  its author: a drawback, to be removed by a fused kernel only). SDPA takes q/k and v of
  different widths, and the KV cache sizes its key and value buffers apart;
* **the scale stays 1/√hd** of the head as projected (PoPE-pytorch sets ``softmax_scale``
  from q's width before doubling; x-transformers' attention keeps its ``dim_head ** -0.5``).
  The attention kernels scale by 1/√(width of q) = 1/√(2·hd), so PoPE's ``logit_temperature``
  is √2: the net factor is the references' 1/√hd.

The sign convention is the references': the key's phase is j·θ + δ, so a logit peaks where
(i − j)·θ_c = δ_c (mod 2π); δ ≤ 0 lets a component prefer keys at a chosen distance ahead of
or behind the query. The magnitudes and phases are computed in fp32 (autocast off) and cast to
q's dtype. PoPE has no form on grids (``supports_axes`` is False) and no partial-rotation or
frequency-scaling options.

**The zero start sits on the clamp's edge** (issue #29; a property of the references' form,
kept as the default). At δ = 0 every component's cosine peaks at offset 0. For a key d ≥ 1
tokens back (causal attention sees no other) ∂ cos(d·θ_c − δ_c)/∂δ_c = sin(d·θ_c) > 0 wherever
d·θ_c < π, every component at d = 1 (θ_c ≤ 1): raising a look-back logit asks for δ > 0, a
descent step takes δ_c past the edge, and there the clamp passes no gradient (only weight decay
pulls it back, lr·wd = 10⁻⁴ of itself per step at the defaults). The default task's zero-start
run ended with 97 % of δ above 0. Freeing δ is not what that task needs, though: a uniform
start, and δ learned in turns (2π× larger optimiser steps), both stayed with the zero start
(validation accuracy 0.20–0.24 at step 500, where RoPE has 0.98; docs/pe.md). **The learning
rate is** (issue #47 (h), docs/reproductions.md (h)): at optim.lr = 3·10⁻³ instead of the
default 10⁻³ the same model learns copy in 2,000 steps (0.97–0.99 at length 16, 3 seeds;
0.37–0.88 at 10⁻³), and so it does with δ kept at 10⁻³ and only the other weights at 3·10⁻³,
while δ still ends above 0 (so used as 0) and a head attends to the previous token through the
magnitudes: a hyper-parameter of the training, not a departure from the references nor PoPE's
form.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.pope import PoPEConfig

#: the range δ is clamped to where it is used (both references)
MIN_PHASE_BIAS, MAX_PHASE_BIAS = -2 * math.pi, 0.0


def pope_frequencies(dim: int, base: float = PoPEConfig.base) -> Tensor:
    """θ_c = base^(−c/dim) for every component c = 0 … dim − 1 -> (dim,), fp32."""
    return base ** -(torch.arange(dim, dtype=torch.float32) / dim)


def polar_components(x: Tensor, phases: Tensor) -> Tensor:
    """x (..., T, d) and phases broadcastable to it -> [μ cos φ | μ sin φ] (..., T, 2d), fp32,
    μ = softplus(x): the complex numbers μ·e^{iφ} as real and imaginary halves, so that the dot
    product of two such vectors is the real part of Σ q̃ · conj(k̃)."""
    magnitude = F.softplus(x.float())  # (..., T, d)
    phases = phases.float()
    return torch.cat((magnitude * phases.cos(), magnitude * phases.sin()), dim=-1)


class PoPE(PositionalEncoding):
    """Softplus magnitudes and position-only phases; a learnable key phase bias δ per head.

    Args:
        base: the frequency base, θ_c = base^(−c/hd).
        bias_init: ``zero`` (the references' default) or ``uniform`` (U(−2π, 0)).
    """

    Options = PoPEConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        phase_bias = torch.zeros(self.n_heads, self.head_dim)
        if self.cfg.bias_init == "uniform":
            phase_bias.uniform_(MIN_PHASE_BIAS, MAX_PHASE_BIAS)
        self.phase_bias = nn.Parameter(phase_bias)  # δ, (H, hd)
        # a plain attribute, not a buffer: model.to(bfloat16) must not round the frequencies
        self._frequencies = pope_frequencies(self.head_dim, self.cfg.base)

    def frequencies(self, device: torch.device) -> Tensor:
        """θ (hd,), fp32, on ``device``."""
        if self._frequencies.device != device:
            self._frequencies = self._frequencies.to(device)
        return self._frequencies

    @property
    def clamped_phase_bias(self) -> Tensor:
        """δ as used: the parameter clamped to [−2π, 0] -> (H, hd), fp32."""
        return self.phase_bias.float().clamp(MIN_PHASE_BIAS, MAX_PHASE_BIAS)

    def logit_temperature(self) -> float:
        """√2: the kernels scale by 1/√(2·hd), the width of PoPE's q; the references' 1/√hd."""
        return math.sqrt(2.0)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        """q (B, H, Tq, hd), k (B, H, Tk, hd) -> (B, H, Tq, 2·hd), (B, H, Tk, 2·hd)."""
        with torch.autocast(q.device.type, enabled=False):
            theta = self.frequencies(q.device)  # (hd,)
            q_phases = q_positions.float()[:, None] * theta  # (Tq, hd)
            k_phases = k_positions.float()[:, None] * theta  # (Tk, hd)
            k_phases = k_phases + self.clamped_phase_bias[:, None, :]  # (H, Tk, hd)
            q_polar = polar_components(q, q_phases)  # (B, H, Tq, 2·hd)
            k_polar = polar_components(k, k_phases)  # (B, H, Tk, 2·hd)
        return q_polar.to(q.dtype), k_polar.to(k.dtype)

    def describe(self) -> dict:
        return {
            "base": self.cfg.base,
            "bias_init": self.cfg.bias_init,
            "qk_width": 2 * self.head_dim,
        }
