"""Attention one block of queries at a time: biases built per block, local attention, and the
contextual logits of CoPE and DAPE. Memory grows linearly with length on every path here.

``lengen.model.kernels.attend`` picks the path and sizes the blocks (``_block_rows``):

* ``blocked_bias_attention``: any bias (FIRE, randomized positions) or contextual logits,
  built from ``pe.attention_bias`` for one block of queries and only the keys it can see
  (``_key_span``), passed to SDPA as a 4-D float mask (or, contextual, an explicit softmax);
* ``tiled_contextual_attention``: DAPE evaluated on a CPU beyond one tile: blocks of queries
  meet tiles of a fixed number of keys under an online softmax, so the MLP's (B, c, n, W)
  hidden layer is one size for the whole pass (reused heap) instead of a new size per block;
* ``local_attention``: no bias, a sliding window or chunks (``lengen.pe.local``), by index.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.pe import local
from lengen.pe.base import PositionalEncoding

#: Masks cached per encoding and lengths (here: local attention's; ``lengen.model.relative``:
#: dense relative masks) at most this many each.
MAX_CACHED_MASKS = 16

#: Keys per tile of ``tiled_contextual_attention``
CONTEXTUAL_KEY_TILE = 512
#: Its tiles' transients, B·H·c·n scores × ``pe.score_copies``, at most this many floats (16 MiB):
#: with MAX_BIAS_ELEMENTS' 64 MiB, DAPE's resident peak at 8,192 tokens was 2.06× RoPE's
#: (results/bench/cpu_long_eval_memory_path_dape.json, first DAPE row)
CONTEXTUAL_TILE_ELEMENTS = 1 << 22


def blocked_bias_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    pe: PositionalEncoding,
    q_positions: Tensor,
    k_positions: Tensor,
    scale: float,
    dropout_p: float = 0.0,
    query_block: int,
) -> Tensor:
    """Any bias (or CoPE's contextual logits), built from ``pe.attention_bias`` one block of
    ``query_block`` queries at a time, so memory grows linearly with length. Same shapes as
    ``attend``."""
    q_len, k_len = q.shape[2], k.shape[2]
    outputs = []
    for start in range(0, q_len, query_block):
        stop = min(start + query_block, q_len)
        # only the keys [lo, hi) the block's queries can see (causal: none past its last query;
        # a window or chunks: none before them), so memory stays linear in length
        lo, hi = _key_span(start, stop, q_len, k_len, causal, pe)
        bias = (
            pe.attention_bias(q_positions[start:stop], k_positions[lo:hi])  # (H, c, Tk')
            if pe.has_bias
            else torch.zeros(1, stop - start, hi - lo, device=q.device)
        )
        if causal or pe.local:
            hidden = ~_block_allowed(start, stop, lo, hi, q_len, k_len, causal, pe, q.device)
            bias = bias.masked_fill(hidden, float("-inf"))  # hidden: (c, Tk')
        q_block, k_block, v_block = q[:, :, start:stop], k[:, :, lo:hi], v[:, :, lo:hi]
        if pe.has_contextual:
            out = _contextual_attention(q_block, k_block, v_block, bias, pe, scale, dropout_p)
        else:
            # a 4-D mask: SDPA's fused CPU kernel takes it; a 3-D one sends SDPA to its math
            # path, which is ~6x slower and copies the mask per batch row (measured)
            out = F.scaled_dot_product_attention(
                q_block,
                k_block,
                v_block,
                attn_mask=bias.to(q.dtype)[None],
                dropout_p=dropout_p,
                scale=scale,
            )
        outputs.append(out)
    return torch.cat(outputs, dim=2)


def local_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    pe: PositionalEncoding,
    scale: float,
    dropout_p: float = 0.0,
    query_block: int,
) -> Tensor:
    """Attention without a bias under a sliding window or chunks (``pe.window``, ``pe.chunk``;
    ``lengen.pe.local``), masked by index. Same shapes as ``attend``.

    One block (training lengths): SDPA with one boolean mask, cached per (Tq, Tk, causal,
    window, chunk, device). Longer: blocks of ``query_block`` queries, each given only the keys
    it can see (``_key_span``), so memory grows linearly with length, not Tq × Tk."""
    q_len, k_len = q.shape[2], k.shape[2]
    if query_block >= q_len:
        mask = _local_mask(q_len, k_len, causal, pe.cfg.window, pe.cfg.chunk, q.device)  # (Tq, Tk)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale
        )
    outputs = []
    for start in range(0, q_len, query_block):
        stop = min(start + query_block, q_len)
        lo, hi = _key_span(start, stop, q_len, k_len, causal, pe)
        mask = _block_allowed(start, stop, lo, hi, q_len, k_len, causal, pe, q.device)
        outputs.append(
            F.scaled_dot_product_attention(
                q[:, :, start:stop],
                k[:, :, lo:hi],
                v[:, :, lo:hi],
                attn_mask=mask,  # (c, Tk'), True where a query sees the key
                dropout_p=dropout_p,
                scale=scale,
            )
        )
    return torch.cat(outputs, dim=2)


def _key_span(
    start: int, stop: int, q_len: int, k_len: int, causal: bool, pe: PositionalEncoding
) -> tuple[int, int]:
    """The keys [lo, hi) that queries start … stop − 1 (the last Tq of Tk) can see at all."""
    offset = k_len - q_len  # query i sits at key index i + offset
    window, chunk = pe.cfg.window, pe.cfg.chunk
    return local.key_span(
        start + offset, stop - 1 + offset, k_len, causal=causal, window=window, chunk=chunk
    )


def _block_allowed(start, stop, lo, hi, q_len, k_len, causal, pe, device) -> Tensor:
    """Which of the keys lo … hi − 1 queries start … stop − 1 see -> bool (c, hi − lo)."""
    query_index = torch.arange(start, stop, device=device) + (k_len - q_len)
    key_index = torch.arange(lo, hi, device=device)
    return local.allowed(
        query_index, key_index, causal=causal, window=pe.cfg.window, chunk=pe.cfg.chunk
    )


#: boolean masks of local attention at one block, per (Tq, Tk, causal, window, chunk, device):
#: every layer and step at the same lengths reuses them. At most MAX_CACHED_MASKS.
_LOCAL_MASKS: dict = {}


# normal tensors even when first asked for under inference_mode (Lightning's validation): a
# cached mask is reused by training, whose backward pass may save it
@torch.inference_mode(False)
def _local_mask(q_len: int, k_len: int, causal: bool, window, chunk, device) -> Tensor:
    """(Tq, Tk) bool, True where query i (at key index i + Tk − Tq) sees key j."""
    key = (q_len, k_len, causal, window, chunk, str(device))
    if key not in _LOCAL_MASKS:
        if len(_LOCAL_MASKS) >= MAX_CACHED_MASKS:
            _LOCAL_MASKS.pop(next(iter(_LOCAL_MASKS)))  # the oldest
        query_index = torch.arange(k_len - q_len, k_len, device=device)
        key_index = torch.arange(k_len, device=device)
        _LOCAL_MASKS[key] = local.allowed(
            query_index, key_index, causal=causal, window=window, chunk=chunk
        )
    return _LOCAL_MASKS[key]


def _contextual_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor,
    pe: PositionalEncoding,
    scale: float,
    dropout_p: float,
) -> Tensor:
    """Explicit softmax attention for encodings whose logits depend on q·k itself (CoPE, DAPE).

    q (B, H, c, hd), k and v (B, H, Tk, hd), bias (H or 1, c, Tk) with −inf where masked.
    """
    weights = torch.softmax(_contextual_logits(q, k, bias, pe, scale), dim=-1).to(v.dtype)
    if dropout_p:
        weights = F.dropout(weights, dropout_p)
    return torch.matmul(weights, v)  # (B, H, c, hd)


def _contextual_logits(
    q: Tensor, k: Tensor, bias: Tensor, pe: PositionalEncoding, scale: float
) -> Tensor:
    """scores + bias + the encoding's contextual term -> (B, H, c, Tk) fp32, −inf where the
    bias is (q (B, H, c, hd), k (B, H, Tk, hd), bias (H or 1, c, Tk))."""
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale  # (B, H, c, Tk)
    logits = scores + bias
    return logits + pe.contextual_logits(q, logits, scores=scores, bias=bias)


@torch.no_grad()
def tiled_contextual_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    pe: PositionalEncoding,
    q_positions: Tensor,
    k_positions: Tensor,
    scale: float,
    query_block: int,
    key_tile: int = CONTEXTUAL_KEY_TILE,
) -> Tensor:
    """``blocked_bias_attention`` for encodings whose contextual term acts on each (query, key)
    alone (``pe.contextual_per_score``: DAPE, not CoPE), without autograd: the same shapes.

    Each block of ``query_block`` queries walks the keys it can see in tiles of ``key_tile``,
    with an online softmax (a running maximum, sum and weighted sum of values per query, as
    flash attention): exp(l − m) summed tile by tile equals the softmax's numerator and
    denominator. Tiles start at the block's first visible key and are ``key_tile`` wide even
    past the last key a causal block sees (those are masked), except at the end of the sequence,
    so every tile's tensors have one of two sizes. The logits per tile are
    ``_contextual_logits``' as in the one-block path, which this equals up to rounding.
    """
    batch, heads, q_len, _ = q.shape
    k_len, width = k.shape[2], v.shape[-1]  # v may be narrower than q (one-hot weight probes)
    dtype = torch.promote_types(v.dtype, torch.float32)  # the sums: fp32, or fp64 when given
    out = torch.empty(batch, heads, q_len, width, dtype=v.dtype, device=v.device)
    for start in range(0, q_len, query_block):
        stop = min(start + query_block, q_len)
        lo, hi = _key_span(start, stop, q_len, k_len, causal, pe)
        q_block = q[:, :, start:stop]  # (B, H, c, hd)
        peak = torch.full((batch, heads, stop - start, 1), float("-inf"), device=q.device)
        total = torch.zeros_like(peak, dtype=dtype)  # Σ_j exp(l_ij − peak_i)
        mixed = q.new_zeros(batch, heads, stop - start, width, dtype=dtype)  # Σ_j … v_j
        for a in range(lo, hi, key_tile):
            b = min(a + key_tile, k_len)  # past hi: keys no query of the block sees, masked
            bias = pe.attention_bias(q_positions[start:stop], k_positions[a:b])  # (H, c, n)
            if causal or pe.local:  # keys past hi are past every query of a causal block
                hidden = ~_block_allowed(start, stop, a, b, q_len, k_len, causal, pe, q.device)
                bias = bias.masked_fill(hidden, float("-inf"))  # hidden: (c, n)
            logits = _contextual_logits(q_block, k[:, :, a:b], bias, pe, scale)  # (B, H, c, n)
            new_peak = torch.maximum(peak, logits.amax(-1, keepdim=True))
            shift = new_peak.masked_fill(new_peak.isneginf(), 0.0)  # rows with no key yet: 0
            weights = logits.sub_(shift).exp_()  # exp(l − m), 0 where masked
            rescale = (peak - shift).exp_()  # earlier tiles' terms to the new maximum
            total.mul_(rescale).add_(weights.sum(-1, keepdim=True))
            mixed.mul_(rescale).add_(weights.to(dtype) @ v[:, :, a:b].to(dtype))
            peak = new_peak
        out[:, :, start:stop] = mixed / total
    return out


def _sdpa_causal_offset(q: Tensor, k: Tensor, v: Tensor, dropout_p: float, scale: float) -> Tensor:
    """Causal attention with fewer queries than keys (the queries are the last ones)."""
    q_len, k_len = q.shape[2], k.shape[2]
    query_index = torch.arange(q_len, device=q.device)[:, None] + (k_len - q_len)
    allowed = torch.arange(k_len, device=q.device)[None, :] <= query_index  # (Tq, Tk)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=allowed, dropout_p=dropout_p, scale=scale
    )
