"""An independent float64 reference for RoPE's training-free arms (tests/pe/test_self_extend.py,
test_rerope.py, test_dual_chunk.py): causal attention in which query i reads key j at an
explicit relative position r(i, j), built score by score from RoFormer's rotation (interleaved
pairs, θ_m = base^(−2m/d)): score = Σ_m Re(q_m e^{i r θ_m} conj(k_m)) / √d, since
R(a) q · R(b) k = R(a − b) q · k."""

from __future__ import annotations

import math

import numpy as np
import torch


def relative_attention(
    q, k, v, relative, base: float = 10000.0, layout: str = "interleaved"
) -> torch.Tensor:
    """q, k, v (H, T, hd) -> (H, T, hd) float64; ``relative(i, j)`` the position query i reads
    key j at, for j ≤ i (later keys masked); pairs (2m, 2m+1), or (m, m + hd/2) for ``half``."""
    q, k, v = (x.detach().double().numpy() for x in (q, k, v))
    heads, length, head_dim = q.shape
    theta = base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    half = head_dim // 2
    if layout == "half":
        q_pairs, k_pairs = q[..., :half] + 1j * q[..., half:], k[..., :half] + 1j * k[..., half:]
    else:
        q_pairs = q[..., 0::2] + 1j * q[..., 1::2]  # (H, T, hd/2)
        k_pairs = k[..., 0::2] + 1j * k[..., 1::2]
    out = np.zeros_like(v)
    for h in range(heads):
        for i in range(length):
            scores = np.array(
                [
                    np.sum((q_pairs[h, i] * np.exp(1j * relative(i, j) * theta)
                            * np.conj(k_pairs[h, j])).real) / math.sqrt(head_dim)
                    for j in range(i + 1)
                ]
            )  # fmt: skip
            weights = np.exp(scores - scores.max())
            out[h, i] = (weights / weights.sum()) @ v[h, : i + 1]
    return torch.from_numpy(out)


def arm_output(q, k, v, **options) -> torch.Tensor:
    """lengen's RoPE with ``options`` (an arm) attending q, k, v (H, T, hd) -> (H, T, hd)."""
    from lengen.pe.rope import RoPE

    heads, length, head_dim = q.shape
    pe = RoPE(d_model=heads * head_dim, n_heads=heads, train_positions=length, **options)
    out = pe.attention(
        q[None].float(), k[None].float(), v[None].float(), None, None,
        causal=True, scale=1 / math.sqrt(head_dim), dropout_p=0.0,
    )  # fmt: skip
    return out[0].double()


def random_qkv(heads: int = 2, length: int = 14, head_dim: int = 8, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(heads, length, head_dim, generator=generator, dtype=torch.float64)
            for _ in range(3)]  # fmt: skip
