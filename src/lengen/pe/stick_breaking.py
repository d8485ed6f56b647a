"""Stick-breaking attention: Tan et al., ICLR 2025, "Scaling Stick-Breaking Attention: An
Efficient Implementation and In-depth Study" (arXiv 2410.17980).

No softmax and no positional encoding. Query i breaks a stick of length 1, key by key from the
nearest backwards: key j takes the share β_ij = σ(q_i·k_j / √d) of what the nearer keys left,

    A_ij = β_ij ∏_{j<k<i} (1 − β_ik),        out_i = Σ_j A_ij v_j,

so recency is built in. Computed in log space as the reference (shawntan/stickbreaking-attention,
``stickbreaking_attention/sb_ref.py``): log β = −softplus(−z), log(1 − β) = −softplus(z), and
the product is an exclusive reverse cumulative sum of log(1 − β) over the keys (summed from the
query backwards, so the terms near the query are exact).

**As the reference** (its tests, ``tests/test_attn.py``):
* the query's own key does not take part (``attend_current=False``, the reference's default):
  keys j < i; ``pe.attend_current=true`` lets key i break the stick first (j ≤ i);
* the weight the sticks leave over, 1 − Σ_j A_ij, goes to the query's own value:
  out_i += (1 − Σ_j A_ij) v_i (``ref_fwd`` in ``tests/test_attn.py``; the first query, which
  sees no key, outputs its own value). ``pe.remainder=none`` drops it: the formula as stated,
  whose weights sum to less than 1. (IBM's dolomite-engine adds it times a learned per-head
  vector instead; not offered.)

Causal only: the stick is broken in the order of distance to the query, which a bidirectional
stack has no form for. ``attention`` builds the (B, H, c, Tk) weights one block of queries at a
time within ``MAX_SCORE_ELEMENTS`` (memory linear in length), in fp32. Without autograd
(evaluation) ``tiled_stick_breaking`` walks tiles of ``KEY_TILE`` keys instead, carrying the
sum of log(1 − β) from tile to tile: memory bounded by the tile, not the length.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.stick_breaking import StickBreakingConfig
from lengen.pe.fox import MAX_SCORE_ELEMENTS, gradients_wanted, query_block_rows

#: Keys per tile on the evaluation path (``tiled_stick_breaking``)
KEY_TILE = 512
#: Tile-sized tensors that path holds at once (logits, log β, log(1 − β)) plus slack: its tiles
#: have MAX_SCORE_ELEMENTS / TILE_COPIES scores, so a tile's tensors stay within one 16 MiB block
TILE_COPIES = 4


def stick_breaking_weights(logits: Tensor, allowed: Tensor) -> Tensor:
    """A_ij = β_ij ∏_{allowed k > j} (1 − β_ik), β = σ(logits), in log space.

    logits (..., c, Tk) scaled q·k; allowed (c, Tk) True where key j takes part (causal: j < i,
    or j ≤ i) -> (..., c, Tk), 0 where not allowed."""
    log_beta = F.logsigmoid(logits).masked_fill(~allowed, float("-inf"))  # log β
    log_rest = F.logsigmoid(-logits).masked_fill(~allowed, 0.0)  # log(1 − β)
    # Σ_{k > j} log(1 − β_ik): inclusive sums from the last key backwards, shifted by one
    through = log_rest.flip(-1).cumsum(-1).flip(-1)  # Σ_{k ≥ j}
    after = F.pad(through[..., 1:], (0, 1))  # Σ_{k > j}
    return torch.exp(log_beta + after)


def stick_breaking_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    attend_current: bool = False,
    remainder: str = "current_value",
    dropout_p: float = 0.0,
    max_elements: int = MAX_SCORE_ELEMENTS,
    key_tile: int = KEY_TILE,
) -> Tensor:
    """Causal stick-breaking attention: q (B, H, Tq, hd), the last Tq of the keys k and v
    (B, H, Tk, hd) -> (B, H, Tq, hd), one block of queries at a time.

    Without gradients or dropout (evaluation), blocks of queries meet tiles of ``key_tile``
    keys (``tiled_stick_breaking``): memory bounded by the tile, not by the length."""
    if not dropout_p and not gradients_wanted(q, k, v):
        return tiled_stick_breaking(
            q, k, v, scale=scale, attend_current=attend_current, remainder=remainder,
            max_elements=max_elements // TILE_COPIES, key_tile=key_tile,
        )  # fmt: skip
    q_len, k_len = q.shape[2], k.shape[2]
    offset = k_len - q_len  # query i is the token of key i + offset
    dtype = torch.promote_types(q.dtype, torch.float32)  # fp32, or fp64 when given fp64
    block = query_block_rows(q, k_len, max_elements)
    outputs = []
    for start in range(0, q_len, block):
        stop = min(start + block, q_len)
        visible = stop + offset  # keys past the block's last query are never seen
        query_index = torch.arange(start, stop, device=q.device)[:, None] + offset
        key_index = torch.arange(visible, device=q.device)[None, :]
        allowed = key_index <= query_index if attend_current else key_index < query_index
        with torch.autocast(q.device.type, enabled=False):
            logits = q[:, :, start:stop].to(dtype) @ k[:, :, :visible].to(dtype).transpose(-1, -2)
            weights = stick_breaking_weights(logits * scale, allowed)  # (B, H, c, Tk')
            left_over = 1.0 - weights.sum(-1, keepdim=True)  # (B, H, c, 1)
        if dropout_p:
            weights = F.dropout(weights, dropout_p)
        out = weights.to(v.dtype) @ v[:, :, :visible]  # (B, H, c, hd)
        if remainder == "current_value":  # the query's own value takes what is left
            out = out + left_over.to(v.dtype) * v[:, :, start + offset : stop + offset]
        outputs.append(out)
    return torch.cat(outputs, dim=2)


@torch.no_grad()
def tiled_stick_breaking(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    scale: float,
    attend_current: bool = False,
    remainder: str = "current_value",
    max_elements: int = MAX_SCORE_ELEMENTS // TILE_COPIES,
    key_tile: int = KEY_TILE,
) -> Tensor:
    """``stick_breaking_attention`` without autograd, tile by tile: the same shapes.

    A block of c queries walks its keys in tiles of ``key_tile``, the nearest tile first, and
    carries per query the sum of log(1 − β) over the keys of the tiles already walked: within
    a tile the exclusive sums from the nearest key back are the tile's own cumulative sum plus
    that carry, so A_ij and Σ_j A_ij v_j come tile by tile. Each tile holds three
    (B, H, c, key_tile) tensors, with B·H·c·key_tile ≤ ``max_elements``, whatever the length
    (the one-block path holds ~16 of (B, H, c, Tk)).

    Keys are walked in reverse order (k and v flipped once), so a tile's cumulative sum runs
    from its nearest key backwards with no flips per tile, as the one-block path sums. Tiles
    end at a multiple of ``key_tile`` (or at Tk), so all tiles but one size are equal across
    blocks (freed tiles are reused, not kept as heap of a new size); keys past a query inside
    its tile are masked, as in the one-block path.
    """
    batch, heads, q_len, _ = q.shape
    k_len, width = k.shape[2], v.shape[-1]  # v may be narrower than q (one-hot weight probes)
    offset = k_len - q_len  # query i is the token of key i + offset
    dtype = torch.promote_types(q.dtype, torch.float32)  # fp32, or fp64 when given fp64
    key_tile = max(1, min(key_tile, k_len))
    block = max(1, min(q_len, max_elements // (batch * heads * key_tile)))
    out = torch.empty(batch, heads, q_len, width, dtype=v.dtype, device=v.device)
    with torch.autocast(q.device.type, enabled=False):
        k_reversed = k.to(dtype).flip(2)  # (B, H, Tk, hd): key j at Tk − 1 − j
        v_reversed = v.to(dtype).flip(2)
        for start in range(0, q_len, block):
            stop = min(start + block, q_len)
            first, visible = start + offset, stop + offset  # the block's queries' key indices
            q_block = q[:, :, start:stop].to(dtype)  # (B, H, c, hd)
            query_index = torch.arange(first, visible, device=q.device)[:, None]  # (c, 1)
            carry = q_block.new_zeros(batch, heads, stop - start, 1)  # Σ log(1 − β), walked keys
            mixed = q_block.new_zeros(batch, heads, stop - start, width)  # Σ_j A_ij v_j
            taken = q_block.new_zeros(batch, heads, stop - start, 1)  # Σ_j A_ij
            tile_stop = min(k_len, -(-visible // key_tile) * key_tile)  # a multiple, or Tk
            for tile_end in range(tile_stop, 0, -key_tile):  # keys [a, tile_end), nearest first
                a = max(0, tile_end - key_tile)
                keys = slice(k_len - tile_end, k_len - a)  # the tile in reversed order
                logits = q_block @ k_reversed[:, :, keys].transpose(-1, -2)  # (B, H, c, n)
                logits.mul_(scale)
                log_beta = F.logsigmoid(logits)  # log β
                log_rest = F.logsigmoid(logits.neg_())  # log(1 − β)
                if tile_end - 1 >= first:  # keys at or after a query: mask by index
                    key_index = torch.arange(tile_end - 1, a - 1, -1, device=q.device)
                    hidden = key_index > query_index if attend_current else key_index >= query_index
                    log_beta.masked_fill_(hidden, float("-inf"))
                    log_rest.masked_fill_(hidden, 0.0)
                through = log_rest.cumsum_(-1)  # Σ over the tile's keys from the nearest, inclusive
                log_beta[..., 1:] += through[..., :-1]  # exclusive: Σ_{k > j} within the tile
                weights = log_beta.add_(carry).exp_()  # A_ij, (B, H, c, n)
                carry += through[..., -1:]
                mixed += weights @ v_reversed[:, :, keys]
                taken += weights.sum(-1, keepdim=True)
            if remainder == "current_value":  # the query's own value takes what is left
                mixed += (1.0 - taken) * v[:, :, first:visible].to(dtype)
            out[:, :, start:stop] = mixed
    return out


class StickBreaking(PositionalEncoding):
    """Attention weights by stick-breaking over the keys, nearest first (no softmax).

    Args:
        remainder: ``current_value`` (the reference) or ``none`` (the bare formula).
        attend_current: whether the query's own key takes part (the reference: no).
    """

    Options = StickBreakingConfig

    def attention(self, q, k, v, q_state, k_state, *, causal, scale, dropout_p) -> Tensor:
        return stick_breaking_attention(
            q,
            k,
            v,
            scale=scale,
            attend_current=self.cfg.attend_current,
            remainder=self.cfg.remainder,
            dropout_p=dropout_p,
        )

    def describe(self) -> dict:
        return {"remainder": self.cfg.remainder, "attend_current": self.cfg.attend_current}


__all__ = ["StickBreaking", "stick_breaking_attention", "stick_breaking_weights"]
