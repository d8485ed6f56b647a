"""Multi-head attention and the one place where the attention kernel is chosen.

* Encodings without a logit bias go straight to ``scaled_dot_product_attention`` (flash /
  memory-efficient kernels on GPU, the fused CPU kernel here), with ``is_causal``.
* Contextual encodings (CoPE), whose logits depend on q·k itself, use an explicit softmax over
  the same query blocks.
* Bias encodings (ALiBi …) go through SDPA with a float ``attn_mask`` built from the PE's
  ``score_bias``, **one block of queries at a time**: the bias block is (H, chunk, Tk), so memory
  grows linearly with length instead of materialising (H, T, T) at long evaluation lengths. At
  training lengths the whole sequence is one block. FlexAttention ``score_mod`` can later plug in
  here, with the same ``score_bias``.

Causal masking is by index (query i sees keys ≤ i + Tk − Tq), never by position value, so
cached decoding and non-contiguous positions keep the same mask.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding

#: Largest block of attention scores (B × H × queries × keys) built at once; 16M fp32 = 64 MiB.
MAX_BIAS_ELEMENTS = 1 << 24


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    pe: PositionalEncoding | None = None,
    q_positions: Tensor | None = None,
    k_positions: Tensor | None = None,
    dropout_p: float = 0.0,
    max_bias_elements: int = MAX_BIAS_ELEMENTS,
) -> Tensor:
    """q (B, H, Tq, hd), k and v (B, H, Tk, hd) -> (B, H, Tq, hd).

    The q·k logits are scaled by ``pe.attention_scale(Tk) / sqrt(hd)`` (1/sqrt(hd) without a PE).
    """
    n_heads, q_len, k_len = q.shape[1], q.shape[2], k.shape[2]
    scale = (pe.attention_scale(k_len) if pe is not None else 1.0) / math.sqrt(q.shape[-1])
    if pe is None or not (pe.has_bias or pe.has_contextual):
        if causal and q_len != k_len:
            return _sdpa_causal_offset(q, k, v, dropout_p, scale)
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, dropout_p=dropout_p, scale=scale
        )

    # the score block SDPA (or the explicit softmax) builds is (B, H, chunk, Tk): bound it
    chunk = max(1, min(q_len, max_bias_elements // (q.shape[0] * n_heads * k_len)))
    offset = k_len - q_len  # query i sits at key index i + offset
    key_index = torch.arange(k_len, device=q.device)
    outputs = []
    for start in range(0, q_len, chunk):
        stop = min(start + chunk, q_len)
        # under a causal mask the keys past this block's last query are never seen
        visible = stop + offset if causal else k_len
        bias = (
            pe.attention_bias(q_positions[start:stop], k_positions[:visible])  # (H, c, Tk')
            if pe.has_bias
            else torch.zeros(1, stop - start, visible, device=q.device)
        )
        if causal:
            query_index = torch.arange(start, stop, device=q.device)[:, None] + offset
            future = key_index[None, :visible] > query_index  # (c, Tk')
            bias = bias.masked_fill(future, float("-inf"))
        q_block, k_block, v_block = q[:, :, start:stop], k[:, :, :visible], v[:, :, :visible]
        if pe.has_contextual:
            out = _contextual_attention(q_block, k_block, v_block, bias, pe, scale, dropout_p)
        else:
            out = F.scaled_dot_product_attention(
                q_block,
                k_block,
                v_block,
                attn_mask=bias.to(q.dtype),
                dropout_p=dropout_p,
                scale=scale,
            )
        outputs.append(out)
    return torch.cat(outputs, dim=2)


def _contextual_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias: Tensor,
    pe: PositionalEncoding,
    scale: float,
    dropout_p: float,
) -> Tensor:
    """Explicit softmax attention for encodings whose logits depend on q·k itself (CoPE).

    q (B, H, c, hd), k and v (B, H, Tk, hd), bias (H or 1, c, Tk) with −inf where masked.
    """
    logits = torch.matmul(q, k.transpose(-1, -2)).float() * scale + bias  # (B, H, c, Tk)
    logits = logits + pe.contextual_logits(q, logits)
    weights = torch.softmax(logits, dim=-1).to(v.dtype)
    if dropout_p:
        weights = F.dropout(weights, dropout_p)
    return torch.matmul(weights, v)  # (B, H, c, hd)


def _sdpa_causal_offset(q: Tensor, k: Tensor, v: Tensor, dropout_p: float, scale: float) -> Tensor:
    """Causal attention with fewer queries than keys (the queries are the last ones)."""
    q_len, k_len = q.shape[2], k.shape[2]
    query_index = torch.arange(q_len, device=q.device)[:, None] + (k_len - q_len)
    allowed = torch.arange(k_len, device=q.device)[None, :] <= query_index  # (Tq, Tk)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=allowed, dropout_p=dropout_p, scale=scale
    )


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention with the PE's rotation and bias hooks.

    Cross-attention (``cross=True``) uses no positional information: positions enter each stack
    through its own self-attention, as in T5, whose relative bias is also absent from
    cross-attention. Query and key positions live in different sequences there, so a relative
    signal between them would have no meaning.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float, causal: bool, cross: bool):
        super().__init__()
        self.n_heads = n_heads
        self.causal = causal
        self.cross = cross
        self.dropout = dropout
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(
        self,
        x: Tensor,
        pe: PositionalEncoding,
        positions: Tensor,
        memory: Tensor | None = None,
    ) -> Tensor:
        # x: (B, T, D); memory: (B, S, D) for cross-attention
        batch, length, d_model = x.shape
        source = memory if self.cross else x
        head_dim = d_model // self.n_heads
        q = (
            self.query(x).view(batch, length, self.n_heads, head_dim).transpose(1, 2)
        )  # (B, H, T, hd)
        k, v = self.key_value(source).view(batch, -1, 2, self.n_heads, head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, hd)
        dropout_p = self.dropout if self.training else 0.0
        if self.cross:
            y = attend(q, k, v, causal=False, dropout_p=dropout_p)
        else:
            q, k = pe.rotate(q, k, positions, positions)
            y = attend(
                q,
                k,
                v,
                causal=self.causal,
                pe=pe,
                q_positions=positions,
                k_positions=positions,
                dropout_p=dropout_p,
            )
        return self.out(y.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, D)
