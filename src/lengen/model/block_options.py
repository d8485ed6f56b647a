"""Block options that decide where attention mass goes (``model.attn_gate``, ``attn_sinks``,
``kv_bias``, ``qk_norm``, ``attn_fn``; ``lengen.model.config.AttentionOptions``, docs/models.md).

Each acts at one place of the self-attention layer (``lengen.model.attention``):

* **QK-norm** (OLMo 2, Qwen3 ``Qwen3Attention.q_norm`` / ``k_norm``): RMSNorm over each head's
  query and key, with a learned gain per channel, *before* the encoding's rotation, as Qwen3
  does: the norm bounds the logits' size, and a rotation applied after it keeps each vector's
  norm, so the relative-position signal is not rescaled away.
* **Output gate** (Qiu et al. 2025, arXiv 2505.06708; ``qiuzh20/gated_attention``
  ``modeling_qwen3.py``, ``headwise_attn_output_gate`` / ``elementwise_attn_output_gate``):
  y ⊙ sigmoid(x W_g) between attention and the output projection, x the block's normalised
  input (the reference widens ``q_proj`` by the gate's columns; a separate linear map is the
  same function). After attention, so every kernel still runs.
* **Learned sinks** (gpt-oss ``AttentionBlock.sinks``): one logit s_h per head joins every
  query's softmax and carries no value; **key / value biases** (Gu et al. 2025, arXiv
  2410.10781; ``sail-sg/Attention-Sink`` ``lit_gpt/model_kv_bias.py``): a learned key k*_h and
  value v*_h per head, seen by every query, unrotated (their ``k_bias`` / ``v_bias``, prepended
  after the rotation, init N(0, 0.02)). Both are *extra key columns*: a key with logit
  e = scale · q·k_e + c_e and value u_e (a sink: k_e = 0, c_e = s_h, u_e = 0; a key bias: k_e =
  k*_h, c_e = 0, u_e = v*_h), so without a bias SDPA still runs them (``extra_key_attention``).
* **Sigmoid attention** (Ramapuram et al. 2024, arXiv 2409.04431): y_i = Σ_j sigmoid(l_ij −
  log n_i) v_j, no normalisation, n_i the number of keys query i sees (causal: per query, so
  the output at i depends on nothing after i). No SDPA kernel computes it: query blocks.

Where SDPA cannot take the extra columns (a logit bias, a local window) and for sigmoid
attention, ``math_attention`` forms the logits one block of queries at a time, as the blocked
bias path does, so memory stays linear in length. Encodings whose logits depend on q·k itself
(CoPE, DAPE) or that attend themselves (FoX, stick-breaking, PaTH) have no such logits to
extend: ``check_encoding`` refuses them with these options.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.model.block_config import AttentionOptions, logit_option
from lengen.model.blocked import _sdpa_causal_offset
from lengen.model.kernels import scaled_query_and_kernel
from lengen.pe.base import PositionalEncoding
from lengen.pe.config.logits import plain_logits_refusal

#: Largest block of logits the math path forms at once (B × H × queries × keys): 4M fp32 =
#: 16 MiB, as FoX's and the extension arms'; with 16M (the bias kernels' ``MAX_BIAS_ELEMENTS``)
#: sigmoid attention's peak at 8,192 tokens was 4x RoPE's (scripts/bench_options.py)
MATH_SCORE_ELEMENTS = 1 << 22

#: the std of Gu et al.'s key and value biases at initialisation (``model_kv_bias.py``)
KV_BIAS_STD = 0.02


class HeadRMSNorm(nn.Module):
    """RMSNorm over the last dimension (a head's channels) with a learned gain per channel."""

    def __init__(self, head_dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(head_dim))

    def forward(self, x: Tensor) -> Tensor:
        # x: (B, H, T, hd); in fp32 whatever the model's precision, as Qwen3's Qwen3RMSNorm
        squared = x.float().pow(2).mean(-1, keepdim=True)  # (B, H, T, 1)
        return (x.float() * torch.rsqrt(squared + self.eps)).to(x.dtype) * self.weight


def add_parameters(layer: nn.Module, d_model: int, n_heads: int, options: AttentionOptions):
    """Give a self-attention layer the modules its options need (none when all are off, so the
    default model's parameters are unchanged)."""
    head_dim = d_model // n_heads
    if options.qk_norm:
        layer.q_norm, layer.k_norm = HeadRMSNorm(head_dim), HeadRMSNorm(head_dim)
    if options.gate != "none":  # initialised as every Linear (the model's _init): gate ≈ 0.5
        layer.gate = nn.Linear(d_model, n_heads if options.gate == "headwise" else d_model)
    if options.sinks:  # zero: the sink starts as one more key of logit 0
        layer.sinks = nn.Parameter(torch.zeros(n_heads))
    if options.kv_bias:
        layer.k_bias = nn.Parameter(torch.randn(n_heads, head_dim) * KV_BIAS_STD)
        layer.v_bias = nn.Parameter(torch.randn(n_heads, head_dim) * KV_BIAS_STD)


def gated(layer: nn.Module, y: Tensor, x: Tensor) -> Tensor:
    """y (B, H, T, hd) ⊙ sigmoid(gate(x)), x (B, T, D) the layer's input -> (B, H, T, hd)."""
    batch, heads, length, head_dim = y.shape
    scores = layer.gate(x)  # (B, T, H) headwise or (B, T, D) elementwise
    scores = scores.view(batch, length, heads, -1).transpose(1, 2)  # (B, H, T, 1 or hd)
    return y * torch.sigmoid(scores)


def extra_keys(layer: nn.Module, options: AttentionOptions, like: Tensor):
    """The extra key columns of a layer -> keys (H, E, hd), constants (H, E), values (H, E, hd),
    or None without any (the sink first, then the key bias)."""
    if not options.extra_keys:
        return None
    heads, head_dim = like.shape[1], like.shape[-1]
    keys, constants, values = [], [], []
    if options.sinks:
        keys.append(like.new_zeros(heads, head_dim))
        constants.append(layer.sinks.to(like.dtype))
        values.append(like.new_zeros(heads, head_dim))
    if options.kv_bias:
        keys.append(layer.k_bias.to(like.dtype))
        constants.append(like.new_zeros(heads))
        values.append(layer.v_bias.to(like.dtype))
    return torch.stack(keys, 1), torch.stack(constants, 1), torch.stack(values, 1)


def check_encoding(pe: PositionalEncoding, options: AttentionOptions) -> None:
    """Refuse options that change the weights with an encoding that has no plain logits."""
    key = logit_option(options)
    if key is None or not (pe.has_attention or pe.has_contextual):
        return
    why = "computes attention itself" if pe.has_attention else "reads its logits from q·k"
    raise ValueError(plain_logits_refusal(key, type(pe).__name__, why))


def attend_with_options(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    extra,
    options: AttentionOptions,
    *,
    causal: bool,
    pe: PositionalEncoding,
    q_positions: Tensor,
    k_positions: Tensor,
    dropout_p: float = 0.0,
    kernel: str = "auto",
) -> Tensor:
    """Attention with extra key columns or a sigmoid: q (B, H, Tq, hd), k and v (B, H, Tk, hd)
    -> (B, H, Tq, hd); the queries are the last Tq of the keys. ``extra``: ``extra_keys``."""
    q, scale, path = scaled_query_and_kernel(
        q, k, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions,
        dropout_p=dropout_p, kernel=kernel,
    )  # fmt: skip
    if options.fn == "softmax" and path == "sdpa" and not pe.local:
        return extra_key_attention(q, k, v, extra, causal=causal, scale=scale, dropout_p=dropout_p)
    return math_attention(
        q, k, v, extra, causal=causal, pe=pe, q_positions=q_positions, k_positions=k_positions,
        scale=scale, sigmoid=options.fn == "sigmoid", dropout_p=dropout_p,
    )  # fmt: skip


def extra_key_attention(
    q: Tensor, k: Tensor, v: Tensor, extra, *, causal: bool, scale: float, dropout_p: float
) -> Tensor:
    """SDPA with E extra key columns prepended: q and k widened by a block of ``pad`` channels
    (q's first is 1, real keys' 0, an extra key's the constant c_e / scale), so SDPA's logit of
    column e is scale · q·k_e + c_e and every real logit is unchanged; v padded to the same
    width (the fused kernels take equal widths only) and cut back. The extra values ``u_e``
    have v's width. Causal masking is bottom-right aligned (``_sdpa_causal_offset``), so
    query i sees the E columns and keys ≤ i + Tk − Tq."""
    keys, constants, values = extra  # (H, E, hd), (H, E), (H, E, hd)
    batch, heads, q_len, head_dim = q.shape
    pad = 8 - head_dim % 8  # whole blocks of 8 channels suit the fused kernels' layouts
    one = q.new_zeros(batch, heads, q_len, pad)
    one[..., 0] = 1
    q_wide = torch.cat([q, one], -1)  # (B, H, Tq, hd + pad)
    column = torch.zeros_like(constants[..., None]).expand(-1, -1, pad).clone()  # (H, E, pad)
    column[..., 0] = constants / scale
    extra_k = torch.cat([keys, column], -1).expand(batch, -1, -1, -1)  # (B, H, E, hd + pad)
    k_wide = torch.cat([extra_k, F.pad(k, (0, pad))], 2)  # (B, H, E + Tk, hd + pad)
    width = v.shape[-1]  # hd; the recorder's one-hot values have another width
    v_wide = torch.cat([values.expand(batch, -1, -1, -1), v], 2)  # (B, H, E + Tk, width)
    v_wide = F.pad(v_wide, (0, max(0, head_dim + pad - width)))  # (B, H, E + Tk, ≥ hd + pad)
    if causal and q_len == k.shape[2]:
        # a full causal pass: E zero queries put in front make the widened problem square, so
        # SDPA's own causal mask (top-left) lets row E + i see the E columns and keys 0 … i, and
        # its fused kernel needs no (Tq, E + Tk) mask: memory stays linear in the length (an
        # explicit mask, made float inside SDPA, was 5x RoPE's peak at 8,192 tokens)
        front = q_wide.new_zeros(batch, heads, extra_k.shape[2], q_wide.shape[-1])
        y = F.scaled_dot_product_attention(
            torch.cat([front, q_wide], 2), k_wide, v_wide, dropout_p=dropout_p, scale=scale,
            is_causal=True,
        )[:, :, extra_k.shape[2] :]  # fmt: skip
    elif causal:  # fewer queries than keys (cached decoding): a small (Tq, E + Tk) mask
        y = _sdpa_causal_offset(q_wide, k_wide, v_wide, dropout_p, scale)
    else:
        y = F.scaled_dot_product_attention(q_wide, k_wide, v_wide, dropout_p=dropout_p,
                                           scale=scale)  # fmt: skip
    return y[..., :width]  # (B, H, Tq, hd)


def math_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    extra,
    *,
    causal: bool,
    pe: PositionalEncoding,
    q_positions: Tensor,
    k_positions: Tensor,
    scale: float,
    sigmoid: bool,
    dropout_p: float = 0.0,
    max_elements: int = MATH_SCORE_ELEMENTS,
) -> Tensor:
    """The logits formed one block of queries at a time (the encoding's bias, the causal mask
    and a local window by index, the extra columns), then softmax over them, or sigmoid(l −
    log n) with n the keys each query sees. -> (B, H, Tq, hd)."""
    batch, heads, q_len, _ = q.shape
    k_len = k.shape[2]
    block = max(1, min(q_len, max_elements // max(1, batch * heads * k_len)))
    key_index = torch.arange(k_len, device=q.device)  # (Tk,)
    work = torch.promote_types(q.dtype, torch.float32)  # fp32 at least, fp64 where given
    k, v = k.to(work), v.to(work)
    # one output written block by block: per-block outputs kept in a list would sit between the
    # freed score blocks and keep them resident (as for FoX, docs/benchmarks.md)
    output = q.new_empty(batch, heads, q_len, v.shape[-1])  # (B, H, Tq, hd)
    for start in range(0, q_len, block):
        stop = min(start + block, q_len)
        q_block = q[:, :, start:stop].to(work)  # (B, H, c, hd)
        # scaled and masked in place (neither backward needs its input): one block-sized
        # tensor alive instead of two; out of place, sigmoid attention's peak at 8,192 tokens
        # was 2.4x RoPE's resident (docs/benchmarks.md)
        logits = (q_block @ k.transpose(-1, -2)).mul_(scale)  # (B, H, c, Tk)
        if pe.has_bias:
            logits = logits + pe.attention_bias(q_positions[start:stop], k_positions)
        query_index = torch.arange(start, stop, device=q.device) + (k_len - q_len)  # (c,)
        seen = _visible(pe, query_index, key_index, causal)  # (c, Tk) or None
        if seen is not None:
            logits.masked_fill_(~seen, float("-inf"))
        if sigmoid:  # −log n per query: n_i keys seen, so the output at i ignores later keys
            count = _seen_count(pe, seen, query_index, k_len, causal)  # (c,)
            # in place (autograd keeps sigmoid's output, which it needs): one block-sized
            # tensor instead of three at a time
            logits.sub_(count.float().log()[:, None]).sigmoid_()  # (B, H, c, Tk): the weights
            y = F.dropout(logits, dropout_p, training=dropout_p > 0) @ v
        else:
            y = _softmax_with_extra(logits, q_block, v, extra, scale, dropout_p)
        output[:, :, start:stop] = y.to(q.dtype)  # (B, H, c, hd)
        # freed before the next block's logits are formed, not when the name is rebound
        del logits, seen, y
    return output


def _seen_count(pe, seen: Tensor | None, query_index: Tensor, k_len: int, causal: bool) -> Tensor:
    """How many keys each query sees -> (c,): summed from the mask for a window or chunks,
    counted for the causal mask (keys 0 … i) and for none (summing the (c, Tk) bool mask makes
    an int64 copy of it first, half a block of fp32 logits)."""
    if pe.local:
        return seen.sum(-1)
    return query_index + 1 if causal else torch.full_like(query_index, k_len)


def _softmax_with_extra(logits, q_block, v, extra, scale, dropout_p):
    """softmax over [extra columns, keys] · [extra values, v]; logits (B, H, c, Tk)."""
    if extra is None:
        weights = torch.softmax(logits, -1)
        return F.dropout(weights, dropout_p, training=dropout_p > 0) @ v
    keys, constants, values = extra  # (H, E, hd), (H, E), (H, E, hd)
    keys, constants, values = keys.to(v.dtype), constants.to(v.dtype), values.to(v.dtype)
    extra_logits = q_block @ keys.transpose(-1, -2) * scale + constants[:, None]
    weights = torch.softmax(torch.cat([extra_logits, logits], -1), -1)  # (B, H, c, E + Tk)
    weights = F.dropout(weights, dropout_p, training=dropout_p > 0)
    n_extra = keys.shape[1]
    return weights[..., :n_extra] @ values + weights[..., n_extra:] @ v


def _visible(pe, query_index: Tensor, key_index: Tensor, causal: bool) -> Tensor | None:
    """Which keys each query sees -> bool (c, Tk), or None for all: the causal mask and the
    encoding's window or chunks, by index as in every kernel (``lengen.pe.local``)."""
    if pe.local:
        from lengen.pe import local

        options = {"causal": causal, "window": pe.cfg.window, "chunk": pe.cfg.chunk}
        return local.allowed(query_index, key_index, **options)
    return key_index[None, :] <= query_index[:, None] if causal else None
