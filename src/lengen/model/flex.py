"""FlexAttention for relative-bias encodings (``model.attention=flex``).

The bias of ALiBi, T5, KERPLE and Sandwich depends on the query–key offset only, so one
(H, Tq + Tk − 1) table holds all of it and the ``score_mod`` is a single gather,
``score + table[h, q_idx − kv_idx + Tk − 1]``: no (H, n, n) tensor exists and the kernel reads
the bias where it needs it. The block mask is written down directly from its structure
(causal: every key block left of the diagonal is full, the diagonal block is partial; a sliding
window or chunks by index, ``lengen.pe.local``, add their bands), so building it costs
(n / 128)² integers instead of n² evaluations of a mask function, and the blocks outside a
window are skipped, not computed and masked.

Where it runs, measured on this project's CPU (docs/benchmarks.md): FlexAttention has no
backward pass on CPU, and compiled it ran ALiBi slower than the relative SDPA path, so
``model.attention=auto`` never picks it there. On CPU ``flex`` serves evaluation and tests of
equality with the other paths. On GPU it serves training and evaluation; measured on an H100 it
was as fast as the relative path at 2,048 tokens and 35x faster at 65,536, in half the memory,
so ``auto`` evaluates through it on CUDA from ``kernels.FLEX_AUTO_KEYS`` keys (docs/benchmarks.md,
"GPU").

Learned tables (T5, KERPLE, learnable ALiBi slopes) get their gradient from inductor's
FlexAttention backward, which scatters it with atomic adds on GPU (PyTorch PR #137452, torch
≥ 2.6): the gradient is not bit-for-bit deterministic there, unlike the SDPA paths.

The first two lengths compile (3–9 s each on this project's CPU); the second compile makes the
length dynamic, after which most new lengths reuse it (bench warm-ups at 8,192 and 16,384 were
within 0.5 s of a timed pass), but not all: in tests/model/test_kernels.py's lengths 130, 256 and
300 each compiled, 300's block mask having 3 blocks of 128 where the others had 2, and 400 then
reused it (seen 2026-12-02; which changes of the mask recompile is torch's guard, not lengen's).
"""

from __future__ import annotations

import torch
from torch import Tensor

#: Rows and columns of one block of the block mask (FlexAttention's default tile).
BLOCK = 128

_compiled_flex = None
#: block masks per (length, device, causal, window, chunk): every layer and step reuses one
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
    return block_mask(length, device, causal=True)


def block_mask(
    length: int,
    device: torch.device | str,
    *,
    causal: bool,
    window: int | None = None,
    chunk: int | None = None,
):
    """The ``BlockMask`` of a full pass over ``length`` tokens: causal and/or local by index
    (``lengen.pe.local``: a sliding window of w keys, or chunks of c tokens); None when every
    query sees every key. Cached per (length, device, causal, window, chunk)."""
    if not causal and window is None and chunk is None:
        return None
    key = (length, str(device), causal, window, chunk)
    if key not in _BLOCK_MASKS:
        _BLOCK_MASKS[key] = _build_block_mask(length, device, causal, window, chunk)
        if len(_BLOCK_MASKS) > MAX_CACHED_MASKS:
            _BLOCK_MASKS.pop(next(iter(_BLOCK_MASKS)))  # the oldest
    return _BLOCK_MASKS[key]


def block_relation(
    length: int, device, causal: bool, window: int | None, chunk: int | None
) -> tuple[Tensor, Tensor]:
    """Which (query block, key block) pairs every query sees entirely (``full``) and which it
    sees in part (``partial``) -> two (n_blocks, n_blocks) bool tensors.

    From the index ranges of the blocks alone: a block pair's index differences q − k lie in
    [first_q − last_k, last_q − first_k], its chunks in [⌊first/c⌋, ⌊last/c⌋]; a pair is full
    when the mask allows every difference (every chunk pair) of its range, partial when it
    allows some. Work (length / 128)², never length²."""
    n_blocks = -(-length // BLOCK)
    first = torch.arange(n_blocks, device=device) * BLOCK  # (n,): a block's first index
    # its last: whole tiles decide "full" (a short last block is never called full, so the
    # mask function always runs where a tile reaches past the sequence), the indices that
    # exist decide "partial"
    last = first + BLOCK - 1
    q_first, q_last, k_first, k_last = first[:, None], last[:, None], first[None], last[None]
    lowest, highest = q_first - k_last, q_last - k_first  # (n, n): range of q − k
    full = torch.ones(n_blocks, n_blocks, dtype=torch.bool, device=device)
    some = full.clone()
    if causal:  # q − k ≥ 0
        full, some = full & (lowest >= 0), some & (highest >= 0)
    if window is not None:  # q − k < w, and > −w in bidirectional attention
        full, some = full & (highest < window), some & (lowest < window)
        if not causal:
            full, some = full & (lowest > -window), some & (highest > -window)
    if chunk is not None:  # the same chunk
        qa, qb, ka, kb = q_first // chunk, q_last // chunk, k_first // chunk, k_last // chunk
        full = full & (qa == qb) & (ka == kb) & (qa == ka)
        some = some & (ka <= qb) & (qa <= kb)
    return full, some & ~full


def _kv_blocks(matrix: Tensor) -> tuple[Tensor, Tensor]:
    """(n, n) bool -> (1, 1, n) counts and (1, 1, n, n) indices, each row's True blocks first
    in ascending order (what ``BlockMask.from_kv_blocks`` reads), int32."""
    counts = matrix.sum(-1).to(torch.int32)[None, None]
    order = torch.argsort((~matrix).to(torch.int32), dim=-1, stable=True)
    return counts, order.to(torch.int32)[None, None].contiguous()


# normal tensors even when first asked for under inference_mode (Lightning's validation): the
# cached mask is reused by training, whose backward pass saves it
@torch.inference_mode(False)
def _build_block_mask(length: int, device, causal: bool, window, chunk):
    from torch.nn.attention.flex_attention import BlockMask

    full, partial = block_relation(length, device, causal, window, chunk)
    partial_count, partial_index = _kv_blocks(partial)
    full_count, full_index = _kv_blocks(full)
    return BlockMask.from_kv_blocks(
        partial_count,
        partial_index,
        full_count,
        full_index,
        BLOCK_SIZE=BLOCK,
        mask_mod=_mask_mod(causal, window, chunk, device),
        seq_lengths=(length, length),
    )


def _mask_mod(causal: bool, window: int | None, chunk: int | None, device):
    """The mask inside partial blocks, by index (``lengen.pe.local.allowed``). The sizes are
    tensors: Python ints would become symbols under dynamic shapes (see below)."""
    width = torch.tensor(window or 1, device=device)
    size = torch.tensor(chunk or 1, device=device)

    def sees(batch, head, q_index, kv_index):
        seen = kv_index <= q_index if causal else kv_index >= 0
        if window is not None:
            distance = q_index - kv_index
            seen = seen & (distance < width) & (distance > -width)
        if chunk is not None:
            seen = seen & (q_index // size == kv_index // size)
        return seen

    return sees


def flex_relative_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    table: Tensor,
    *,
    causal: bool,
    scale: float,
    compiled=True,
    window: int | None = None,
    chunk: int | None = None,
) -> Tensor:
    """q, k, v (B, H, T, hd) of one full pass (as many queries as keys); ``table`` (H, 2T − 1)
    holds the bias at index difference i − j in column i − j + T − 1 (no −inf needed: the block
    mask hides the future and the keys outside a window or chunk, and skips the blocks no query
    sees) -> (B, H, T, hd)."""
    length = q.shape[2]
    # a tensor, not an int: under dynamic shapes an int would become a symbol, which inductor's
    # CPU template turns into code that does not compile (torch 2.13)
    shift = torch.tensor(length - 1, device=q.device)

    def add_bias(score, batch, head, q_index, kv_index):
        return score + table[head, q_index - kv_index + shift]

    mask = block_mask(length, q.device, causal=causal, window=window, chunk=chunk)
    flex = flex_attention_fn(compiled)
    return flex(q, k, v, score_mod=add_bias, block_mask=mask, scale=scale)
