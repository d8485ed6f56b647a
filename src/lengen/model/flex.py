"""FlexAttention for relative-bias encodings (``model.attention=flex``).

The bias of ALiBi, T5, KERPLE and Sandwich depends on the query–key offset only, so one
(H, Tq + Tk − 1) table holds all of it and the ``score_mod`` is a single gather,
``score + table[h, q_idx − kv_idx + Tk − 1]``: no (H, n, n) tensor exists and the kernel reads
the bias where it needs it. The causal block mask is written down directly from its structure
(every key block left of the diagonal is full, the diagonal block is partial), so building it
costs (n / 128)² integers instead of n² evaluations of a mask function.

Where it runs, measured on this project's CPU (docs/benchmarks.md): FlexAttention has no
backward pass on CPU, and compiled it ran ALiBi slower than the relative SDPA path, so
``model.attention=auto`` never picks it there. On CPU ``flex`` serves evaluation and tests of
equality with the other paths; on GPU it serves training and evaluation, untimed by this project
(no GPU was available to the work that wrote it).

Learned tables (T5, KERPLE, learnable ALiBi slopes) get their gradient from inductor's
FlexAttention backward, which scatters it with atomic adds on GPU (PyTorch PR #137452, torch
≥ 2.6): the gradient is not bit-for-bit deterministic there, unlike the SDPA paths.

The first two lengths compile (3–9 s each on this project's CPU); the second compile makes the
length dynamic, after which new lengths reuse it (bench warm-ups at 8,192 and 16,384 were within
0.5 s of a timed pass).
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Rows and columns of one block of the block mask (FlexAttention's default tile).
BLOCK = 128

_compiled_flex = None
#: causal block masks per (length, device): every layer and step at a length reuses one
_BLOCK_MASKS: dict = {}
MAX_CACHED_MASKS = 16


def flex_attention_fn(compiled: bool = True):
    """``flex_attention``, compiled once per process (eager flex materialises every score:
    tests only)."""
    global _compiled_flex
    from torch.nn.attention.flex_attention import flex_attention

    if not compiled:
        return flex_attention
    if _compiled_flex is None:
        _compiled_flex = torch.compile(flex_attention)
    return _compiled_flex


def causal_block_mask(length: int, device: torch.device | str):
    """The causal ``BlockMask`` of a full pass over ``length`` tokens (query i sees keys ≤ i),
    built from block counts: (n_blocks, n_blocks) indices, never (length, length)."""
    key = (length, str(device))
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = _build_causal_block_mask(length, device)
        if len(_BLOCK_MASKS) > MAX_CACHED_MASKS:
            _BLOCK_MASKS.pop(next(iter(_BLOCK_MASKS)))  # the oldest
    return _BLOCK_MASKS[key]


# normal tensors even when first asked for under inference_mode (Lightning's validation): the
# cached mask is reused by training, whose backward pass saves it
@torch.inference_mode(False)
def _build_causal_block_mask(length: int, device: torch.device | str):
    from torch.nn.attention.flex_attention import BlockMask

    n_blocks = -(-length // BLOCK)
    rows = torch.arange(n_blocks, device=device, dtype=torch.int32)
    # every query block: its own (diagonal) block is partial, the ones before it are full
    partial_count = torch.ones(1, 1, n_blocks, device=device, dtype=torch.int32)
    partial_index = rows[None, None, :, None].expand(1, 1, n_blocks, n_blocks).contiguous()
    full_count = rows[None, None].clone()  # (1, 1, n_blocks): blocks 0 … i − 1
    full_index = rows.expand(n_blocks, n_blocks)[None, None].contiguous()
    return BlockMask.from_kv_blocks(
        partial_count,
        partial_index,
        full_count,
        full_index,
        BLOCK_SIZE=BLOCK,
        mask_mod=_sees_earlier_keys,
        seq_lengths=(length, length),
    )


def _sees_earlier_keys(batch, head, q_index, kv_index):
    return kv_index <= q_index


def flex_relative_attention(
    q: Tensor, k: Tensor, v: Tensor, table: Tensor, *, causal: bool, scale: float, compiled=True
) -> Tensor:
    """q, k, v (B, H, T, hd) of one full pass (as many queries as keys); ``table`` (H, 2T − 1)
    holds the bias at index difference i − j in column i − j + T − 1 (no −inf: the block mask
    hides the future) -> (B, H, T, hd)."""
    length = q.shape[2]
    # a tensor, not an int: under dynamic shapes an int would become a symbol, which inductor's
    # CPU template turns into code that does not compile (torch 2.13)
    shift = torch.tensor(length - 1, device=q.device)

    def add_bias(score, batch, head, q_index, kv_index):
        return score + table[head, q_index - kv_index + shift]

    block_mask = causal_block_mask(length, q.device) if causal else None
    flex = flex_attention_fn(compiled)
    return flex(q, k, v, score_mod=add_bias, block_mask=block_mask, scale=scale)
