"""The attention kernels, and the one place where one is chosen (``choose_kernel``).

Pure functions on q (B, H, Tq, hd), k and v (B, H, Tk, hd); the layer that projects them and
applies the encoding's rotation is ``lengen.model.attention``. ``attend`` is the entry point;
the relative-bias path lives in ``lengen.model.relative``, the blocked, tiled and local paths in
``lengen.model.blocked`` (both importable from here as before):

* Encodings without a logit bias go straight to ``scaled_dot_product_attention`` (flash /
  memory-efficient kernels on GPU, the fused CPU kernel here), with ``is_causal``.
* Contextual encodings (CoPE, DAPE), whose logits depend on q·k itself, use an explicit softmax
  over the same query blocks; DAPE evaluated on a CPU beyond one tile of keys walks fixed-size
  key tiles under an online softmax instead (``tiled_contextual_attention``), so its MLP's
  hidden layer has one size for the whole pass and freed heap is reused, not kept.
* Encodings that compute attention themselves (FoX, stick-breaking, PaTH: ``pe.has_attention``)
  get path ``encoding``; their evaluation paths (no autograd) reuse one buffer per call or
  walk fixed-size tiles for the same reason (``lengen.pe.fox``, ``stick_breaking``, ``path``).
* Bias encodings whose bias depends on q − k only (``pe.bias_is_relative``: ALiBi, T5,
  KERPLE, Sandwich), at contiguous positions: one (H, Tq + Tk − 1) table of the bias per offset,
  read by SDPA through a strided view with the keys reversed (``relative_bias_attention``). No
  (H, n, n) tensor exists at any length, and SDPA's fused kernel runs at near no-bias speed.
* Every other bias (FIRE, randomized positions): SDPA with a float ``attn_mask`` built from the
  PE's ``score_bias`` **one block of queries at a time** (``blocked_bias_attention``): the block
  is (B, H, chunk, Tk) within ``MAX_BIAS_ELEMENTS``, so memory grows linearly with length. At
  training lengths the whole sequence is one block.
* ``model.attention=flex`` (``kernel="flex"``): relative biases at full passes go to
  FlexAttention instead (``lengen.model.flex``; GPU training and evaluation, CPU evaluation).
  ``auto`` (the default) picks it only for evaluation on CUDA from ``FLEX_AUTO_KEYS`` keys, where
  it was measured faster and in half the memory (H100: ALiBi at 8,192 tokens 14 ms against
  39 ms, at 65,536 0.45 s against 15.9 s; docs/benchmarks.md, "GPU"). Training keeps the
  relative path (flex's learned-table gradients are not bit-for-bit reproducible), and so does
  the CPU, where flex has no backward pass and ran ALiBi slower. ``lengen.model.flex`` is
  imported only when that path runs, so the other paths never load FlexAttention.

Causal masking is by index (query i sees keys ≤ i + Tk − Tq), never by position value, so
cached decoding and non-contiguous positions keep the same mask.

Local attention (``pe.window``: a sliding window of w keys; ``pe.chunk``: chunks of c tokens;
``lengen.pe.local``) is masked by index too, in every path: without a bias, SDPA with one
cached boolean mask at training lengths and, beyond one block, query blocks given only the keys
they can see (``local_attention``); the relative path puts the window (a function of i − j) in
its table as −inf and skips the keys outside it; the blocked path (and CoPE's) masks and slices
per block; FlexAttention gets a block mask that skips the blocks outside the window. Chunks
depend on the index, not on i − j alone, so a bias encoding with chunks takes the blocked path.
Every path keeps memory linear in length.

Positions on grids, (T, A), always take the block path when the encoding has a bias: a bias of
the distance between cells is not one per index offset (ALiBi sets ``bias_is_relative`` False
on grids), and ``_contiguous`` answers no for positions with an axis dimension, so neither the
relative-table nor the FlexAttention path sees them.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.model.blocked import (
    CONTEXTUAL_KEY_TILE,
    CONTEXTUAL_TILE_ELEMENTS,
    _sdpa_causal_offset,
    blocked_bias_attention,
    local_attention,
    tiled_contextual_attention,
)
from lengen.model.config import KERNELS
from lengen.model.relative import (
    DENSE_MASK_ELEMENTS,
    RELATIVE_QUERY_BLOCK,
    _relative_table,
    relative_bias_attention,
)
from lengen.pe.base import PositionalEncoding
from lengen.schema import one_of

#: From this many keys, ``auto`` evaluates relative biases through FlexAttention on CUDA (at
#: 2,048 it already matched the relative path's time in half its memory; measured on an H100)
FLEX_AUTO_KEYS = 2048

#: Largest block of attention scores (B × H × queries × keys) built at once; 16M fp32 = 64 MiB.
MAX_BIAS_ELEMENTS = 1 << 24


def scaled_query_and_kernel(
    q: Tensor,
    k: Tensor,
    *,
    causal: bool,
    pe: PositionalEncoding | None,
    q_positions: Tensor | None,
    k_positions: Tensor | None,
    dropout_p: float,
    kernel: str,
) -> tuple[Tensor, float, str]:
    """What every attention path starts from: q (B, H, Tq, hd) with the encoding's per-query
    scale folded into its rows, the logits' float scale (``pe.query_scale / sqrt(hd)``) and the
    path ``choose_kernel`` picks for these shapes (``attend``, ``lengen.model.block_options``)."""
    scale = pe.query_scale(q.shape[2], k.shape[2], causal, q.device) if pe is not None else 1.0
    if isinstance(scale, Tensor):  # (Tq,) per query, or (H, Tq) per head (SSMax); PE docs
        q = (q.float() * scale[..., None]).to(q.dtype)  # scaling q row i scales its logits
        scale = 1.0
    scale = scale / math.sqrt(q.shape[-1])
    path = choose_kernel(
        pe,
        kernel,
        training=torch.is_grad_enabled() and q.requires_grad,
        device_type=q.device.type,
        dropout=dropout_p,
        positions=(q_positions, k_positions),
        square=q.shape[2] == k.shape[2],
        keys=k.shape[2],
    )
    return q, scale, path


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
    kernel: str = "auto",
    q_state: Tensor | tuple[Tensor, ...] | None = None,
    k_state: Tensor | tuple[Tensor, ...] | None = None,
) -> Tensor:
    """q (B, H, Tq, hd), k and v (B, H, Tk, hd) -> (B, H, Tq, hd).

    ``q_state`` / ``k_state``: the encoding's ``token_state`` of the queries' and the keys'
    tokens, for encodings that compute attention themselves (``pe.has_attention``).

    The q·k logits are scaled by ``pe.query_scale(Tq, Tk, causal) / sqrt(hd)`` (1/sqrt(hd)
    without a PE): one float, or one factor per query, applied to q's rows.
    Which kernel runs (module docstring): SDPA without a bias; the relative-bias path for
    encodings whose bias depends on q − k only, at contiguous positions; query blocks with a
    bias built per block otherwise (FIRE, randomized positions, CoPE).
    """
    width = v.shape[-1]
    if q.shape[-1] != width and not (pe is not None and pe.has_attention):
        # q and k wider than v (PoPE's polar halves): SDPA's fused kernels take equal widths
        # only and would fall back to its math path, which holds every (Tq, Tk) score at once
        # (measured: 2.6 GiB at 8,192). v padded with zeros gives the same output, cut back.
        padded = F.pad(v, (0, q.shape[-1] - width))  # (B, H, Tk, width of q)
        return attend(
            q, k, padded, causal=causal, pe=pe, q_positions=q_positions,
            k_positions=k_positions, dropout_p=dropout_p, max_bias_elements=max_bias_elements,
            kernel=kernel, q_state=q_state, k_state=k_state,
        )[..., :width]  # fmt: skip
    q, scale, path = scaled_query_and_kernel(
        q, k, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions,
        dropout_p=dropout_p, kernel=kernel,
    )  # fmt: skip
    if path == "encoding":  # FoX, stick-breaking, PaTH: the encoding attends itself
        return pe.attention(
            q, k, v, q_state, k_state, causal=causal, scale=scale, dropout_p=dropout_p
        )
    if path == "sdpa" and pe is not None and pe.local:  # a window or chunks, no bias
        return local_attention(
            q,
            k,
            v,
            causal=causal,
            pe=pe,
            scale=scale,
            dropout_p=dropout_p,
            query_block=_block_rows(q, k, max_bias_elements, pe, causal),
        )
    if path == "sdpa":
        if causal and q.shape[2] != k.shape[2]:
            return _sdpa_causal_offset(q, k, v, dropout_p, scale)
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=causal, dropout_p=dropout_p, scale=scale
        )
    if path == "flex":
        offset = q_positions[:1] - k_positions[:1]
        return _flex(q, k, v, causal=causal, pe=pe, position_offset=offset, scale=scale)
    if path == "relative":
        return relative_bias_attention(
            q,
            k,
            v,
            causal=causal,
            pe=pe,
            position_offset=q_positions[:1] - k_positions[:1],
            scale=scale,
            dropout_p=dropout_p,
            query_block=min(RELATIVE_QUERY_BLOCK, _block_rows(q, k, max_bias_elements, pe, causal)),
            dense_mask_elements=DENSE_MASK_ELEMENTS,
        )
    if _tiles_contextual(q, k, pe, dropout_p):  # DAPE evaluated on a CPU, beyond one tile
        tile = CONTEXTUAL_KEY_TILE
        per_row = q.shape[0] * q.shape[1] * tile * pe.score_copies  # B · H · n · copies
        budget = min(max_bias_elements, CONTEXTUAL_TILE_ELEMENTS)
        return tiled_contextual_attention(
            q, k, v, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions,
            scale=scale, query_block=max(1, min(q.shape[2], budget // per_row)),
            key_tile=tile,
        )  # fmt: skip
    return blocked_bias_attention(
        q,
        k,
        v,
        causal=causal,
        pe=pe,
        q_positions=q_positions,
        k_positions=k_positions,
        scale=scale,
        dropout_p=dropout_p,
        query_block=_block_rows(q, k, max_bias_elements, pe, causal),
    )


def choose_kernel(
    pe: PositionalEncoding | None,
    option: str = "auto",
    *,
    training: bool,
    device_type: str | None = None,
    dropout: float = 0.0,
    positions: tuple[Tensor | None, Tensor | None] | None = None,
    square: bool = True,
    keys: int | None = None,
) -> str:
    """The one attention-kernel policy -> ``encoding``, ``sdpa``, ``relative``, ``flex`` or
    ``blocked``; ``encoding`` for encodings that compute attention themselves (``has_attention``,
    whatever ``model.attention`` says: no other kernel knows their logits).

    Called by ``attend`` for every call, by the model constructor (``device_type=None``: only
    what the config alone can refuse) and by the run once the training device is known. Raises
    ValueError naming ``model.attention`` when the option cannot run as asked.

    Args:
        pe: the stack's encoding (None: no positional logits, e.g. cross-attention).
        option: ``model.attention`` (``lengen.model.config.KERNELS``).
        training: whether gradients will flow (FlexAttention has no CPU backward).
        device_type: ``cpu``, ``cuda``, … or None when not yet known.
        dropout: the attention dropout probability that will be applied.
        positions: (query, key) positions of the call; the relative path needs runs of
            consecutive integers (checked only for relative biases: it costs a host sync).
            None: not known yet, assumed contiguous.
        square: as many queries as keys (full passes; cached decoding is not).
        keys: the number of keys (None: not known yet); ``auto`` takes flex for evaluation on
            CUDA from ``FLEX_AUTO_KEYS``.
    """
    one_of(*KERNELS)("model.attention", option)
    if pe is not None and pe.has_attention:
        return "encoding"
    if pe is None or not (pe.has_bias or pe.has_contextual):
        return "sdpa"
    relative = pe.has_bias and not pe.has_contextual and pe.bias_is_relative
    if not relative or not (positions is None or all(_contiguous(p) for p in positions)):
        return "blocked"  # FIRE, randomized positions, CoPE: bias built per query block
    if option == "auto" and square and not training and device_type == "cuda" and not dropout:
        return "flex" if keys is not None and keys >= FLEX_AUTO_KEYS else "relative"
    if option != "flex" or not square:
        return "relative"  # flex changes nothing for encodings without a relative bias
    if dropout > 0:
        raise ValueError(
            f"model.attention=flex takes no attention dropout, got model.dropout={dropout}; "
            f"allowed: model.dropout=0.0, or model.attention=auto"
        )
    if device_type is not None and device_type != "cuda" and (training or device_type != "cpu"):
        raise ValueError(
            f"model.attention=flex cannot {'train' if training else 'evaluate'} on {device_type}: "
            f"FlexAttention trains on CUDA only and evaluates on CUDA or CPU; allowed here: auto "
            f"(on CPU, flex serves eval.py re-evaluations)"
        )
    return "flex"


def _flex(
    q: Tensor, k: Tensor, v: Tensor, *, causal: bool, pe, position_offset: Tensor, scale: float
) -> Tensor:
    """As many queries as keys through FlexAttention (``lengen.model.flex``), q, k, v
    (B, H, T, hd); query i at ``position_offset`` + i relative to key i."""
    from lengen.model.flex import flex_relative_attention

    length = q.shape[2]
    table = _relative_table(pe, length, length, position_offset, False, torch.float32, q.device)
    return flex_relative_attention(
        q, k, v, table, causal=causal, scale=scale, window=pe.cfg.window, chunk=pe.cfg.chunk
    )


def _block_rows(
    q: Tensor, k: Tensor, max_elements: int, pe: PositionalEncoding | None = None, causal=True
) -> int:
    """Queries per block so that a (B, H, block, Tk) score block stays within max_elements
    (evaluating on a CPU, divided by ``pe.score_copies``: encodings that build several per score).

    Under a window or chunks (``pe.local``) a block of c queries sees at most c + e keys (e =
    w − 1, or c_chunk − 1, on each side the mask reaches), so blocks may be larger: the largest
    c with B·H·c·(c + e) ≤ max_elements."""
    per_row = q.shape[0] * q.shape[1]  # B · H
    rows = max_elements // (per_row * k.shape[2])
    if pe is not None and pe.local:
        reach = ((pe.cfg.window or pe.cfg.chunk) - 1) * (1 if causal else 2)  # e
        budget = max_elements // per_row
        rows = max(rows, (math.isqrt(reach * reach + 4 * budget) - reach) // 2)
    if pe is not None and q.device.type == "cpu" and not torch.is_grad_enabled():
        # evaluation on a CPU: blocks sized for what the encoding builds per score (DAPE's and
        # FIRE's MLPs: ~20 score-sized tensors): the same work in more pieces, and the same
        # logits up to fp32 rounding (rows are independent without a backward pass). Not on a GPU,
        # where small blocks cost kernel launches (H100, DAPE at 8,192 tokens: 0.10 s with
        # 1.5 GiB of transients, 0.97 s in 72 MiB), nor in training, whose gradients would sum
        # in another order
        rows //= pe.score_copies
    return max(1, min(q.shape[2], rows))


def _tiles_contextual(q: Tensor, k: Tensor, pe: PositionalEncoding, dropout_p: float) -> bool:
    """Whether the blocked path's contextual logits go through ``tiled_contextual_attention``:
    an encoding whose contextual term acts per score (DAPE), evaluated on a CPU (as
    ``_block_rows``' smaller blocks: on a GPU small pieces cost launches), more keys than one
    tile. Each causal block of the one-block-per-query-block path sees more keys than the last,
    and its MLP's hidden layer is a new size each time, which glibc keeps as heap: the
    resident peak at 8,192 tokens was 8–11× RoPE's. Tiles have one size."""
    return (
        pe.has_contextual
        and getattr(pe, "contextual_per_score", False)
        and q.device.type == "cpu"
        and not torch.is_grad_enabled()
        and not dropout_p
        and k.shape[2] > CONTEXTUAL_KEY_TILE
    )


def _contiguous(positions: Tensor | None) -> bool:
    """Whether positions are p, p + 1, … (one host sync; randomized positions are not).

    Under ``torch.compile`` (``model.compile``) the answer is no: a data-dependent branch would
    break the graph, and at training lengths the bias-block path is one block, as fast."""
    if positions is None or positions.ndim != 1 or torch.compiler.is_compiling():
        return False
    return positions.numel() < 2 or bool((positions.diff() == 1).all())
