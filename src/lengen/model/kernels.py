"""The attention kernels, and the one place where one is chosen (``choose_kernel``).

Pure functions on q (B, H, Tq, hd), k and v (B, H, Tk, hd); the layer that projects them and
applies the encoding's rotation is ``lengen.model.attention``. ``attend`` is the entry point:

* Encodings without a logit bias go straight to ``scaled_dot_product_attention`` (flash /
  memory-efficient kernels on GPU, the fused CPU kernel here), with ``is_causal``.
* Contextual encodings (CoPE), whose logits depend on q·k itself, use an explicit softmax over
  the same query blocks.
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
import weakref

import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.options import KERNELS
from lengen.pe import local
from lengen.pe.base import PositionalEncoding
from lengen.schema import one_of

#: From this many keys, ``auto`` evaluates relative biases through FlexAttention on CUDA (at
#: 2,048 it already matched the relative path's time in half its memory; measured on an H100)
FLEX_AUTO_KEYS = 2048

#: Largest block of attention scores (B × H × queries × keys) built at once; 16M fp32 = 64 MiB.
MAX_BIAS_ELEMENTS = 1 << 24

#: Queries per call on the relative-bias path. Its bias block is a free strided view, so the
#: block size only trades causal skipping (smaller blocks skip more masked keys) against the
#: overhead of one SDPA call per block (measured in docs/benchmarks.md).
RELATIVE_QUERY_BLOCK = 512


#: Up to this many mask elements (H × Tq × Tk; training lengths) the relative-bias path gathers
#: one dense mask from its table instead of the strided view: measured faster with a backward
#: pass, which the view's reversed keys slow down (docs/benchmarks.md).
DENSE_MASK_ELEMENTS = 1 << 20


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
        option: ``model.attention`` (``lengen.options.KERNELS``).
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


def _contiguous(positions: Tensor | None) -> bool:
    """Whether positions are p, p + 1, … (one host sync; randomized positions are not).

    Under ``torch.compile`` (``model.compile``) the answer is no: a data-dependent branch would
    break the graph, and at training lengths the bias-block path is one block, as fast."""
    if positions is None or positions.ndim != 1 or torch.compiler.is_compiling():
        return False
    return positions.numel() < 2 or bool((positions.diff() == 1).all())


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
#: small mask 4 × per step otherwise, ≈ 4 % of a step here). At most MAX_CACHED_MASKS each.
_DENSE_MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
MAX_CACHED_MASKS = 16


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
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale  # (B, H, c, Tk)
    logits = scores + bias
    logits = logits + pe.contextual_logits(q, logits, scores=scores, bias=bias)
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
