"""PaTH attention: Yang et al., NeurIPS 2025, "PaTH Attention: Position Encoding via Accumulating
Householder Transformations" (arXiv 2505.16381).

No positional encoding; the logit of query i and key j passes through the data-dependent
Householder-like transforms of the tokens between them,

    logit_ij = q_iᵀ H_i H_{i−1} ⋯ H_{j+1} k_j / √d,     H_s = I − β_s w_s w_sᵀ,

(the empty product, j = i, is I): key j is transformed by H_{j+1} first, as the reference's
decoding applies each new token's H to the cached keys. PaTH-FoX (``pe.forget_gate=true``,
``path_fox.yaml``) adds FoX's forget gates, c_i − c_j (``lengen.pe.fox``).

**Projections and initialisation** as the reference layer (fla-org/flash-linear-attention,
``fla/layers/path_attn.py``, ``PaTHAttention``; initialisation from
``fla/models/path_attn/modeling_path_attention.py``, ``_init_weights``: Linear and Conv1d
weights N(0, 0.02), biases 0), one set per layer:
* w: a low-rank projection D → ``pe.w_rank`` (32) → H·hd without biases, then (``pe.short_conv``,
  on by default) a causal depthwise convolution of width 3 over the tokens followed by SiLU
  (fla's ``ShortConvolution``), then an L2 norm per head;
* β = 2σ(W_β x + b_β), one per head and token, in (0, 2): "allowing negative eigenvalues";
* PaTH-FoX: f = σ(W_f x + b_f) per head (``g_proj``), as FoX.
``token_state`` returns the vectors *before* the convolution (per token, so the decoding cache
keeps them), and ``attention`` convolves and normalises them over the keys it is given.
Differences: the L2 norm divides by max(‖w‖, 1e-6) (``F.normalize``) where fla's ``l2_norm``
puts its 1e-6 under the square root: at d_model 128 the initial vectors have ‖w‖² ≈ 5e-6 (median;
5e-7 to 2e-5 per token, docs/pe.md), which fla's form would shrink instead of normalising.

**The gate term is scaled too.** The reference kernel (``fla/ops/path_attn/parallel_path_fwd.py``)
and its naive test (``tests/ops/test_path_attn.py``, ``naive_path_attn``) multiply q·k *plus*
c_i − c_j by the softmax scale; lengen follows them (FoX alone does not scale its gates).

**Algorithm** (the reference's blockwise form, ``naive_path_attn``, re-derived): within a block
of C tokens the product H_{s+n−1} ⋯ H_s is I − Wᵀ D N W, with W the block's vectors (rows),
D = diag(β) and N = (I + L)⁻¹, L_{rr'} = β_{r'} w_r·w_{r'} for r' < r (the UT transform; any
contiguous run of the block's H uses the same N, restricted). So, per block, each key is carried
to the block's end once (k̃ = k − (D N (W kᵀ)_{r'>j})ᵀ W); each query block gets its logits
within the block from masked products, and then walks back through the earlier blocks, taking
q̂·k̃ with each and carrying q̂ through the block's product (q̂ ← q̂ − q̂ Wᵀ D N W). Work grows as
T²·(hd + C), memory as one (B, H, C, T) block of logits (C ≤ 64, smaller when needed to stay
within ``MAX_SCORE_ELEMENTS``), in fp32; without autograd (evaluation) every block's logits are
written into one buffer per call and their softmax taken in place.

**Cached decoding** is exact by recomputation: the cache keeps every key's raw key, w and β
(and forget gate); each step's call recomputes the keys' block transforms over the whole prefix
(linear work per step, O(T·C·hd), since only the few new queries walk back through the
blocks), with blocks aligned so that the new queries start a block.

Causal only, as the reference (a bidirectional form of the transforms' order is not defined).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.path import PaTHConfig, PaTHFoXConfig
from lengen.pe.fox import (
    GATE_INIT_STD,
    MAX_SCORE_ELEMENTS,
    GateProjections,
    LayerViews,
    causal_future,
    gradients_wanted,
)

#: tokens per block of the UT transform (the reference's BT = 64)
PATH_BLOCK = 64
#: width of the short convolution over the vectors (fla's ShortConvolution(kv_dim, 3))
CONV_WIDTH = 3


def short_convolution(x: Tensor, weight: Tensor) -> Tensor:
    """SiLU of a causal depthwise convolution over tokens: x (B, H, T, hd), weight
    (H·hd, width) -> (B, H, T, hd); token t sees t − width + 1 … t, zeros before the first."""
    batch, heads, length, head_dim = x.shape
    channels = x.permute(0, 1, 3, 2).reshape(batch, heads * head_dim, length)  # (B, H·hd, T)
    width = weight.shape[-1]
    mixed = F.conv1d(F.pad(channels, (width - 1, 0)), weight[:, None, :], groups=heads * head_dim)
    return F.silu(mixed).view(batch, heads, head_dim, length).transpose(2, 3)  # (B, H, T, hd)


def householder_block(w: Tensor, beta: Tensor) -> Tensor:
    """D N = diag(β) (I + L)⁻¹ of a block: w (B, H, n, hd) unit rows, beta (B, H, n)
    -> (B, H, n, n), lower triangular; the block's product H_{n−1} ⋯ H_0 is I − Wᵀ (D N) W."""
    n = w.shape[-2]
    lower = ((w @ w.transpose(-1, -2)) * beta[..., None, :]).tril(-1)  # β_{r'} w_r·w_{r'}
    eye = torch.eye(n, dtype=w.dtype, device=w.device)
    inverse = torch.linalg.solve_triangular(
        eye + lower, eye.expand_as(lower), upper=False, unitriangular=True
    )  # (I + L)⁻¹
    return beta[..., :, None] * inverse


def block_bounds(offset: int, length: int, block: int) -> list[tuple[int, int]]:
    """Blocks of ``block`` tokens covering 0 … length − 1, one of them starting at ``offset``
    (the first query): [(start, stop), …], the first possibly shorter."""
    starts = list(range(offset % block, length, block))
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return list(zip(starts, [*starts[1:], length], strict=True))


def path_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    w: Tensor,
    beta: Tensor,
    log_forget: Tensor | None = None,
    *,
    scale: float,
    dropout_p: float = 0.0,
    block: int = PATH_BLOCK,
    max_elements: int = MAX_SCORE_ELEMENTS,
) -> Tensor:
    """Causal PaTH attention: softmax(scale · (q_iᵀ H_i ⋯ H_{j+1} k_j + c_i − c_j)) v.

    q (B, H, Tq, hd) the last Tq of the keys k, v (B, H, Tk, hd); w (B, H, Tk, hd) unit
    vectors and beta (B, H, Tk) of the keys' tokens; log_forget (B, H, Tk) or None
    -> (B, H, Tq, hd)."""
    batch, heads, q_len, _ = q.shape
    k_len = k.shape[2]
    offset = k_len - q_len  # query i is the token of key i + offset
    dtype = torch.promote_types(q.dtype, torch.float32)  # fp32, or fp64 when given fp64
    block = max(1, min(block, max_elements // (batch * heads * max(k_len, 1))))
    outputs = []
    wanted = gradients_wanted(q, k, v, w, beta, log_forget)
    with torch.autocast(q.device.type, enabled=False):
        q, k, w, beta = (t.to(dtype) for t in (q, k, w, beta))
        cumulative = None if log_forget is None else log_forget.to(dtype).cumsum(-1)  # (B, H, Tk)
        bounds = block_bounds(offset, k_len, block)
        blocks = []  # per block of keys: W, D N, (W kᵀ) with j < r', keys carried to its end
        for start, stop in bounds:
            w_block, k_block = w[:, :, start:stop], k[:, :, start:stop]  # (B, H, n, hd)
            dn = householder_block(w_block, beta[:, :, start:stop])  # (B, H, n, n)
            wk = (w_block @ k_block.transpose(-1, -2)).tril(-1)  # (B, H, n, n): w_r'·k_j, j < r'
            carried = k_block - (dn @ wk).transpose(-1, -2) @ w_block  # (B, H, n, hd)
            blocks.append((w_block, dn, wk, carried))
        inference = not dropout_p and not wanted  # evaluation: one logits buffer, reused
        buffer = q.new_empty(batch, heads, block, k_len) if inference else None
        out = v.new_empty(batch, heads, q_len, v.shape[-1]) if inference else None
        future = torch.ones(block, block, dtype=torch.bool, device=q.device).triu(1)  # key > query
        for index, (start, stop) in enumerate(bounds):
            if start < offset:
                continue  # a block of cached keys only: no query of this call
            pieces = _walk_back(q[:, :, start - offset : stop - offset], k, blocks, bounds, index)
            if inference:
                rows = stop - start
                logits = buffer[:, :, :rows, :stop]  # (B, H, n, stop), a view
                for (key_start, key_stop), piece in pieces:
                    logits[..., key_start:key_stop] = piece
                out[:, :, start - offset : stop - offset] = _softmax_in_place(
                    logits, cumulative, start, stop, scale, future[:rows, :rows]
                ).to(v.dtype) @ v[:, :, :stop]  # fmt: skip
                continue
            logits = torch.cat([piece for _, piece in pieces][::-1], dim=-1)  # (B, H, n, stop)
            if cumulative is not None:  # PaTH-FoX: Σ_{l=j+1}^{i} log f_l, scaled with q·k
                logits = logits + cumulative[:, :, start:stop, None] - cumulative[:, :, None, :stop]
            hidden = causal_future(start - offset, stop - offset, offset, stop, q.device)
            weights = torch.softmax((logits * scale).masked_fill(hidden, float("-inf")), dim=-1)
            if dropout_p:
                weights = F.dropout(weights, dropout_p)
            outputs.append(weights.to(v.dtype) @ v[:, :, :stop])  # (B, H, n, hd)
    return out if inference else torch.cat(outputs, dim=2)


def _walk_back(q_block: Tensor, k: Tensor, blocks: list, bounds: list, index: int):
    """The logits q_iᵀ H_i ⋯ H_{j+1} k_j of one block of queries (B, H, n, hd), the tokens of
    block ``index``, against keys 0 … stop − 1, one block of keys at a time, nearest first:
    yields ((key start, key stop), (B, H, n, n') logits) — the caller keeps or places them."""
    w_block, dn, wk, _ = blocks[index]
    start, stop = bounds[index]
    # c_{tr'} = Σ_{r ≤ t} (q_t·w_r) (D N)_{rr'}: query t sees only H_s … H_t of its block
    coefficients = (q_block @ w_block.transpose(-1, -2)).tril() @ dn  # (B, H, n, n)
    yield (start, stop), q_block @ k[:, :, start:stop].transpose(-1, -2) - coefficients @ wk
    q_hat = q_block - coefficients @ w_block  # queries carried back to the block's start
    for prior in range(index - 1, -1, -1):
        w_prior, dn_prior, _, carried_prior = blocks[prior]
        yield bounds[prior], q_hat @ carried_prior.transpose(-1, -2)  # (B, H, n, n')
        q_hat = q_hat - (q_hat @ w_prior.transpose(-1, -2)) @ dn_prior @ w_prior


def _softmax_in_place(
    logits: Tensor, cumulative: Tensor | None, start: int, stop: int, scale: float, future: Tensor
) -> Tensor:
    """The gradient path's softmax(scale · (logits + c_i − c_j)), causal, computed in the
    (B, H, n, stop) buffer view ``logits`` itself (no autograd): queries start … stop − 1 are
    the keys of the same indices; future (n, n) marks key > query among them."""
    if cumulative is not None:  # PaTH-FoX, in the gradient path's order: (logits + c_i) − c_j
        logits.add_(cumulative[:, :, start:stop, None]).sub_(cumulative[:, :, None, :stop])
    logits.mul_(scale)
    logits[..., start:stop].masked_fill_(future, float("-inf"))  # only the block's own keys
    logits.sub_(logits.amax(-1, keepdim=True)).exp_()
    return logits.div_(logits.sum(-1, keepdim=True))  # (B, H, n, stop)


class HouseholderProjections(nn.Module):
    """Per layer: x (B, T, D) -> the vectors w before the convolution and β = 2σ(·), as the
    reference's ``w_proj`` (low rank), ``w_conv1d`` and ``bt_proj``; weights N(0, 0.02)."""

    def __init__(
        self, n_layers: int, d_model: int, n_heads: int, rank: int, short_conv: bool
    ) -> None:
        super().__init__()
        self.n_heads = n_heads

        def normal(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(n_layers, *shape) * GATE_INIT_STD)

        self.down = normal(rank, d_model)  # D -> rank
        self.up = normal(d_model, rank)  # rank -> H·hd
        self.conv = normal(d_model, CONV_WIDTH) if short_conv else None  # depthwise
        self.beta_weight = normal(n_heads, d_model)
        self.beta_bias = nn.Parameter(torch.zeros(n_layers * n_heads))  # flat: no weight decay

    def forward(self, x: Tensor, layer: int) -> tuple[Tensor, Tensor]:
        """x (B, T, D) -> (w before the convolution (B, H, T, hd), β (B, H, T)), fp32."""
        batch, length, d_model = x.shape
        bias = self.beta_bias.view(-1, self.n_heads)[layer]  # (H,)
        with torch.autocast(x.device.type, enabled=False):
            x = x.float()
            w = F.linear(F.linear(x, self.down[layer].float()), self.up[layer].float())  # (B, T, D)
            beta = 2 * torch.sigmoid(F.linear(x, self.beta_weight[layer].float(), bias.float()))
        w = w.view(batch, length, self.n_heads, d_model // self.n_heads).transpose(1, 2)
        return w, beta.transpose(1, 2)  # (B, H, T, hd), (B, H, T)

    def directions(self, w: Tensor, layer: int) -> Tensor:
        """The unit vectors w of the tokens (B, H, T, hd): convolved over the tokens (when
        ``short_conv``), then L2-normalised per head."""
        if self.conv is not None:
            w = short_convolution(w, self.conv[layer].to(w.dtype))
        return F.normalize(w, dim=-1, eps=1e-6)


class PaTH(LayerViews, PositionalEncoding):
    """Softmax attention through accumulated data-dependent Householder transforms.

    Args:
        w_rank: rank of the projection to the Householder vectors (the reference's 32).
        short_conv: convolve the vectors over 3 tokens before normalising them (reference).
        forget_gate: PaTH-FoX, FoX's forget gates on top.
    """

    Options = PaTHConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        cfg = self.cfg
        self.transforms = HouseholderProjections(
            self.n_layers, self.d_model, self.n_heads, cfg.w_rank, cfg.short_conv
        )
        # PaTH-FoX: FoX's gates, bias 0 as the reference's g_proj
        self.gate = (
            GateProjections(self.n_layers, self.d_model, self.n_heads, 0.0)
            if cfg.forget_gate
            else None
        )

    def token_state(self, x: Tensor) -> tuple[Tensor, ...]:
        w, beta = self.transforms(x, self.layer)  # (B, H, T, hd), (B, H, T)
        if self.gate is None:
            return w, beta
        return w, beta, self.gate(x, self.layer)  # + log f (B, H, T)

    def attention(self, q, k, v, q_state, k_state, *, causal, scale, dropout_p) -> Tensor:
        # every key's state: the convolution runs over the keys' tokens, as in the full pass
        w, beta, *gates = k_state
        return path_attention(
            q,
            k,
            v,
            self.transforms.directions(w, self.layer),
            beta,
            gates[0] if gates else None,
            scale=scale,
            dropout_p=dropout_p,
        )

    def describe(self) -> dict:
        cfg = self.cfg
        return {"w_rank": cfg.w_rank, "short_conv": cfg.short_conv, "forget_gate": cfg.forget_gate}


class PaTHFoX(PaTH):
    """PaTH-FoX: PaTH with FoX's forget gates on by default (``path_fox.yaml``)."""

    Options = PaTHFoXConfig


__all__ = [
    "PaTH",
    "PaTHFoX",
    "block_bounds",
    "householder_block",
    "path_attention",
    "short_convolution",
]
