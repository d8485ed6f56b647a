"""Attention under ``pe.extension``: RoPE's training-free arms that re-map the relative
positions a query reads (``lengen.pe.self_extend``, ``lengen.pe.rerope``,
``lengen.pe.dual_chunk``; options in ``lengen.pe.config.extension``).

Each arm is a few *score sets*: a query position and a key position per set (RoPE's rotation
at those positions, so set s scores q_i · R(p_s(i) − p'_s(j)) k_j), and a choice per (query,
key) of the set that scores it. This is how all three reference codes compute them (two or three
rotated copies of q and k, merged by a mask), and it needs no new rotation math: the relative
position an arm wants is always a difference of two positions.

**Kernel.** RoPE's ``rotate`` hook passes q and k through unrotated when an arm is on, and its
``attention`` hook (``has_attention``: ``lengen.model.kernels`` sends it to path ``encoding``)
rotates the keys once per set, then walks blocks of queries: per block the sets' scores
(B, H, c, Tk) in fp32, the chosen one per score, the causal mask, one softmax, times v. Blocks
stay within ``MAX_SCORE_ELEMENTS`` scores for all sets together, so memory grows linearly with
the length. Within the arm's window (``plain_keys``: every score is plain RoPE's) the call is
plain RoPE's own rotation and SDPA, bit for bit. Positions are the indices: query row r of Tq is
index Tk − Tq + r (causal attention's queries are the last Tq keys), which is what makes cached
decoding (keys stored unrotated, as they came) equal the full pass.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.pe.dual_chunk import DualChunk
from lengen.pe.rerope import ReRoPE
from lengen.pe.self_extend import SelfExtend

#: ``pe.extension`` value -> its arm's class, built from the parameters its config check returns
ARMS = {"self_extend": SelfExtend, "rerope": ReRoPE, "dual_chunk": DualChunk}

#: Largest block of scores (B × H × queries × keys, all sets together) formed at once: 4M fp32
#: = 16 MiB, as FoX's (``lengen.pe.fox``): the block holds the sets, the merged logits and weights
MAX_SCORE_ELEMENTS = 1 << 22


def build_arm(extension: str, params):
    """The arm object of ``pe.extension`` (None for ``none``)."""
    return None if params is None else ARMS[extension](params)


def extended_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    arm,
    rotate: Callable[[Tensor, Tensor], Tensor],
    *,
    scale: float,
    dropout_p: float = 0.0,
    max_elements: int = MAX_SCORE_ELEMENTS,
) -> Tensor:
    """Causal attention with an arm's score sets -> (B, H, Tq, hd).

    Args:
        q: (B, H, Tq, hd) unrotated queries, the last Tq of the Tk keys' tokens.
        k, v: (B, H, Tk, hd), k unrotated.
        arm: ``query_positions``, ``key_positions``, ``choose``, ``sets`` and ``plain_keys``
            (module docstring).
        rotate: ``rotate(x, positions)`` -> x rotated by RoPE at positions (c,) (int or float).
        scale: the logits' multiplier (1/√hd and any per-run temperature).
        dropout_p: attention dropout on the weights.
    """
    batch, heads, q_len, _ = q.shape
    k_len = k.shape[2]
    k_index = torch.arange(k_len, device=q.device)
    q_index = k_index[k_len - q_len :]  # causal: the queries are the last Tq keys
    if k_len <= arm.plain_keys:
        # every score is plain RoPE's: the plain path's own operations (rotation at the
        # indices, SDPA), so the arm reproduces the run's numbers bit for bit within its window
        return _plain_attention(rotate(q, q_index), rotate(k, k_index), v, scale, dropout_p)
    keys = [rotate(k, positions).float() for positions in arm.key_positions(k_index)]
    per_row = batch * heads * k_len * (arm.sets + 2)  # the sets, the logits and the weights
    rows = max(1, min(q_len, max_elements // per_row))
    # one output tensor written block by block: small per-block outputs kept in a list would
    # sit between the freed score blocks and keep them resident (docs/benchmarks.md, "Long
    # evaluation memory"; 750 MiB resident against 58 MiB live for ReRoPE at 8,192 tokens)
    output = v.new_empty(batch, heads, q_len, v.shape[-1])  # (B, H, Tq, hd)
    for start in range(0, q_len, rows):
        rows_index = q_index[start : start + rows]  # (c,)
        block = q[:, :, start : start + rows]  # (B, H, c, hd)
        choice = arm.choose(rows_index[:, None], k_index[None, :])  # (c, Tk)
        logits = None
        for index, (positions, key) in enumerate(
            zip(arm.query_positions(rows_index), keys, strict=True)
        ):
            scores = torch.matmul(rotate(block, positions).float(), key.transpose(-1, -2))
            scores = scores * scale  # (B, H, c, Tk)
            logits = scores if logits is None else torch.where(choice == index, scores, logits)
        hidden = k_index[None, :] > rows_index[:, None]  # (c, Tk): keys after the query
        weights = torch.softmax(logits.masked_fill(hidden, float("-inf")), dim=-1)
        if dropout_p:
            weights = F.dropout(weights, dropout_p)
        output[:, :, start : start + rows] = torch.matmul(weights.to(v.dtype), v)  # (B, H, c, hd)
    return output


def _plain_attention(q: Tensor, k: Tensor, v: Tensor, scale: float, dropout_p: float) -> Tensor:
    """Causal SDPA as ``lengen.model.kernels.attend`` runs it for plain RoPE: ``is_causal`` for a
    full pass, a boolean mask by index when the queries are the last Tq of more keys."""
    q_len, k_len = q.shape[2], k.shape[2]
    if q_len == k_len:
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=dropout_p, scale=scale
        )
    query_index = torch.arange(q_len, device=q.device)[:, None] + (k_len - q_len)
    allowed = torch.arange(k_len, device=q.device)[None, :] <= query_index  # (Tq, Tk)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=allowed, dropout_p=dropout_p, scale=scale
    )
