"""The relative-bias path: attention with a bias that depends on q − k only (ALiBi, T5, KERPLE,
Sandwich) at contiguous positions, read by SDPA from one (H, Tq + Tk − 1) table per offset.

Chosen by ``lengen.model.kernels.choose_kernel`` (``relative``); ``attend`` calls
``relative_bias_attention`` with blocks of queries that only let a causal pass skip the keys no
query of the block sees. The table (``_relative_table``) also feeds FlexAttention
(``lengen.model.flex``). No (H, n, n) tensor exists at any length; at training lengths one
dense mask, gathered from the table and cached for encodings without parameters, is faster.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.model.blocked import MAX_CACHED_MASKS, _key_span
from lengen.pe.base import PositionalEncoding

#: Queries per call on the relative-bias path. Its bias block is a free strided view, so the
#: block size only trades causal skipping (smaller blocks skip more masked keys) against the
#: overhead of one SDPA call per block (measured in docs/benchmarks.md).
RELATIVE_QUERY_BLOCK = 512

#: Up to this many mask elements (H × Tq × Tk; training lengths) the relative-bias path gathers
#: one dense mask from its table instead of the strided view: measured faster with a backward
#: pass, which the view's reversed keys slow down (docs/benchmarks.md).
DENSE_MASK_ELEMENTS = 1 << 20


def relative_bias_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    pe: PositionalEncoding,
    position_offset: Tensor,
    scale: float,
    dropout_p: float = 0.0,
    query_block: int = RELATIVE_QUERY_BLOCK,
    dense_mask_elements: int = DENSE_MASK_ELEMENTS,
) -> Tensor:
    """Attention with a bias that depends on δ = q_position − k_position only, at contiguous
    positions (query i at ``position_offset`` + i relative to key 0). Same shapes as ``attend``.

    Such a bias is constant along diagonals (Toeplitz), which no non-negative strides express;
    with the keys in reverse order it is constant along anti-diagonals (Hankel): with j' = Tk−1−j,
    bias[h, i, j'] = table[h, i + j'], a view of one (H, Tq + Tk − 1) table with strides (1, 1).
    The causal mask depends on i − j too, so it lives in the table as −inf. Every block's
    (1, H, block, Tk') mask is a view: no (H, n, n) tensor exists, and SDPA's fused CPU kernel
    reads the strided mask in place (measured: no extra memory at 8,192). Query blocks only let
    causal attention skip the keys no query of the block sees. Small problems (at most
    ``dense_mask_elements`` = H × Tq × Tk) gather one dense mask from the table instead.
    """
    q_len, k_len = q.shape[2], k.shape[2]
    if pe.n_heads * q_len * k_len <= dense_mask_elements:
        mask = _dense_relative_mask(pe, q_len, k_len, position_offset, causal, q.dtype, q.device)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale
        )
    table = _relative_table(pe, q_len, k_len, position_offset, causal, q.dtype, q.device)
    n_heads, width = table.shape
    k_reversed, v_reversed = k.flip(2), v.flip(2)  # (B, H, Tk, hd), key j at Tk − 1 − j
    outputs = []
    for start in range(0, q_len, query_block):
        stop = min(start + query_block, q_len)
        # the keys [lo, hi) this block's queries can see at all (past its last query under a
        # causal mask none; before a window none): in reversed order Tk − hi … Tk − lo − 1
        lo, hi = _key_span(start, stop, q_len, k_len, causal, pe)
        first = k_len - hi
        mask = table.as_strided(
            (1, n_heads, stop - start, hi - lo), (0, width, 1, 1), start + first
        )  # (1, H, c, Tk'): mask[0, h, r, c'] = table[h, start + first + r + c']
        outputs.append(
            F.scaled_dot_product_attention(
                q[:, :, start:stop],
                k_reversed[:, :, first : k_len - lo],
                v_reversed[:, :, first : k_len - lo],
                attn_mask=mask,
                dropout_p=dropout_p,
                scale=scale,
            )
        )
    return torch.cat(outputs, dim=2)


def _relative_table(
    pe: PositionalEncoding,
    q_len: int,
    k_len: int,
    position_offset: Tensor,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device,
) -> Tensor:
    """(H, Tq + Tk − 1): column n holds the bias at index difference i − j = n − (Tk − 1),
    i.e. at δ = position_offset + n − (Tk − 1); −inf where the causal mask or a sliding window
    (``pe.window``, a function of i − j too) hides the key."""
    index_delta = torch.arange(-(k_len - 1), q_len, device=device)  # (Tq + Tk − 1,)
    table = pe.relative_bias_table(index_delta + position_offset.to(device))  # (H, L) fp32
    if causal:  # query i sees keys j ≤ i + Tk − Tq, i.e. i − j ≥ Tq − Tk
        table = table.masked_fill(index_delta < q_len - k_len, float("-inf"))
    if pe.cfg.window is not None:  # key-index distance d = i + Tk − Tq − j: d < w (and > −w)
        distance = index_delta + (k_len - q_len)
        table = table.masked_fill(
            (distance >= pe.cfg.window) | (distance <= -pe.cfg.window), float("-inf")
        )
    return table.to(dtype).contiguous()


#: Dense masks of relative biases without parameters (ALiBi with fixed slopes, Sandwich), per
#: encoding: every layer and step at the same lengths reuses them (training builds the same
#: small mask 4 × per step otherwise, ≈ 4 % of a step here). At most MAX_CACHED_MASKS each
#: (``lengen.model.blocked``).
_DENSE_MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _dense_relative_mask(
    pe: PositionalEncoding,
    q_len: int,
    k_len: int,
    position_offset: Tensor,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device,
) -> Tensor:
    """(1, H, Tq, Tk) with mask[0, h, i, j] = table[h, i − j + Tk − 1]."""
    # tensors made under inference_mode cannot enter a later backward: never cache those
    cacheable = next(pe.parameters(), None) is None and not torch.is_inference_mode_enabled()
    cache = _DENSE_MASKS.setdefault(pe, {}) if cacheable else {}
    key = (q_len, k_len, int(position_offset), causal, dtype, device) if cacheable else None
    if key not in cache:
        table = _relative_table(pe, q_len, k_len, position_offset, causal, dtype, device)
        index = torch.arange(q_len, device=device)[:, None] - torch.arange(k_len, device=device)
        if len(cache) >= MAX_CACHED_MASKS:
            cache.pop(next(iter(cache)))  # the oldest
        cache[key] = table[:, index + (k_len - 1)][None]  # (1, H, Tq, Tk)
    return cache[key]
