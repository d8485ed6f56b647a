"""Local attention by index: a sliding window of w keys, or fixed chunks of c tokens.

Two shared options of every encoding (``pe.window``, ``pe.chunk``; ``lengen.pe.config.base``), so
a schedule (``lengen.pe.schedule``) can give each layer its own, as production models do:

* **sliding window** (Mistral; the local layers of RNoPE-SWA, Yang et al. 2025, arXiv
  2501.18795, and SWAN-GPT, Puvvada et al. 2025, arXiv 2504.08719): in causal attention query i
  sees keys i − w + 1 … i (w keys, itself included); in bidirectional attention the window is
  symmetric, |i − j| < w (w − 1 keys on each side);
* **chunks** (Llama 4's chunked attention: Hugging Face ``create_chunked_causal_mask``, keys
  and queries in the same block of ``attention_chunk_size``): query i sees the keys of its own
  chunk ⌊i/c⌋ up to i; bidirectionally the whole chunk.

Masks are by **index**, as every kernel's causal mask (``lengen.model.kernels``): Tq queries are
the last Tq of Tk keys (cached decoding), so query i sits at key index i + Tk − Tq. Positions
(randomized, or on grids) never enter. The pure functions below serve every kernel path: the
boolean mask of a block of queries (``allowed``), the keys a block can see at all
(``key_span``, so that long evaluation slices keys instead of masking whole rows) and how many
keys each query sees (``visible_keys``, the n of the length-aware temperatures).
"""

from __future__ import annotations

import torch
from torch import Tensor


def allowed(
    query_index: Tensor, key_index: Tensor, *, causal: bool, window: int | None, chunk: int | None
) -> Tensor:
    """Which keys each query sees: key indices of queries (Tq,) and keys (Tk,) -> bool (Tq, Tk)."""
    query, key = query_index[:, None], key_index[None, :]  # (Tq, 1), (1, Tk)
    seen = key <= query if causal else torch.ones_like(query * key, dtype=torch.bool)
    if window is not None:
        distance = query - key
        seen = seen & (distance < window) & (causal or (distance > -window))
    if chunk is not None:
        seen = seen & (
            key.div(chunk, rounding_mode="floor") == query.div(chunk, rounding_mode="floor")
        )
    return seen  # (Tq, Tk)


def key_span(
    first: int, last: int, k_len: int, *, causal: bool, window: int | None, chunk: int | None
) -> tuple[int, int]:
    """The keys [lo, hi) that queries at key indices first … last (inclusive) can see at all."""
    lo, hi = 0, (last + 1 if causal else k_len)
    if window is not None:
        lo = max(0, first - window + 1)
        if not causal:
            hi = min(k_len, last + window)
    if chunk is not None:
        lo = (first // chunk) * chunk
        if not causal:
            hi = min(k_len, (last // chunk + 1) * chunk)
    return lo, hi


def visible_keys(
    q_len: int, k_len: int, *, causal: bool, window: int | None, chunk: int | None
) -> Tensor:
    """How many keys each of the last Tq of Tk queries sees -> (Tq,) float64 (a count ≥ 1)."""
    index = torch.arange(k_len - q_len, k_len, dtype=torch.float64)  # key index of each query
    if causal:
        seen = index + 1
        if window is not None:
            seen = seen.clamp(max=window)
        if chunk is not None:
            seen = index - torch.div(index, chunk, rounding_mode="floor") * chunk + 1
        return seen
    seen = torch.full_like(index, float(k_len))
    if window is not None:
        seen = (index + window).clamp(max=k_len) - (index - window + 1).clamp(min=0)
    if chunk is not None:
        start = torch.div(index, chunk, rounding_mode="floor") * chunk
        seen = (start + chunk).clamp(max=k_len) - start
    return seen


__all__ = ["allowed", "key_span", "visible_keys"]
