"""Forgetting Attention (FoX): Lin et al., ICLR 2025, "Forgetting Transformer: Softmax Attention
with a Forget Gate" (arXiv 2503.02130).

No positional encoding; instead each head has a scalar forget gate per token, computed from the
layer's (normed) input x_t,

    f_t = σ(w·x_t + b),

and the logit of query i and key j gains the sum of the log gates between them,

    logit_ij = q_i·k_j / √d + Σ_{l=j+1}^{i} log f_l = q_i·k_j / √d + c_i − c_j,

with c the cumulative sum of log f over the sequence: a data-dependent ALiBi (a constant gate
is ALiBi with slope −log f). As the FoX reference (fla-org/flash-linear-attention,
``fla/ops/forgetting_attn/naive.py``) the gate term is not scaled by 1/√d.

**Gate projection and initialisation** as the authors' code (zhixuan-lin/forgetting-transformer,
``src/forgetting_transformer/model/forgetting_transformer/modeling_forgetting_transformer.py``:
``fgate_proj = nn.Linear(hidden_size, num_heads, bias=True)``, weights N(0, 0.02), bias 0 from
``_init_weights``): one projection per layer, weights N(0, 0.02); the bias is
``pe.gate_bias_init`` (default 0.0, the reference's, so f starts near σ(0) = 0.5).

**Bidirectional form** (``model=encoder``, ``encoder_decoder``'s encoder): x-transformers'
``DataDependentAlibi`` (lucidrains/x-transformers, ``x_transformers/x_transformers.py``), which
FoX's paper does not define: 2H gates per token, the first H cumulated into c as above for keys
at or before the query, the other H into c' for keys at or after it:
logit_ij gains c_i − c_j for j ≤ i and c'_j − c'_i for j ≥ i (both 0 at j = i), i.e. the sum
of the second gates' logs over l = i+1 … j. x-transformers starts the gates' bias at 5.0
(``pe.gate_bias_init=5.0`` gives it); lengen keeps FoX's 0.0 for both directions.

**Kernel.** ``attention`` builds the bias c_i − c_j one block of queries at a time, within
``MAX_SCORE_ELEMENTS`` scores, and passes it to SDPA as a float mask (the fused CPU kernel takes
it), so memory grows linearly with length. Gates and cumulative sums are fp32. Without autograd
(evaluation) the blocks write into one bias buffer per call instead of a new tensor each, which
glibc would keep as heap (docs/benchmarks.md, "Long evaluation memory (2024–26 mechanisms)").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.fox import ForgettingAttentionConfig

#: Largest block of attention scores (B × H × queries × keys) an encoding that attends itself
#: builds at once: 4M fp32 = 16 MiB, a quarter of lengen.model.kernels' MAX_BIAS_ELEMENTS,
#: because these paths hold several score-sized tensors per block (bias, masks, log-space
#: terms); with 16M, FoX's peak at 8,192 tokens was 4.9× RoPE's and stick-breaking's 12×
#: (docs/benchmarks.md)
MAX_SCORE_ELEMENTS = 1 << 22

#: the gate projections' initial standard deviation (both references' initializer_range)
GATE_INIT_STD = 0.02


def query_block_rows(q: Tensor, k_len: int, max_elements: int = MAX_SCORE_ELEMENTS) -> int:
    """Queries per block so that a (B, H, block, Tk) score block stays within max_elements."""
    batch, heads, q_len = q.shape[:3]
    return max(1, min(q_len, max_elements // (batch * heads * max(k_len, 1))))


def causal_future(start: int, stop: int, offset: int, visible: int, device) -> Tensor:
    """(c, Tk') True where key j lies after query i (i in start … stop − 1, at key index
    i + offset): the causal mask, by index."""
    query_index = torch.arange(start, stop, device=device)[:, None] + offset
    return torch.arange(visible, device=device)[None, :] > query_index


def forget_bias(
    cumulative: Tensor, start: int, stop: int, offset: int, visible: int, causal: bool
) -> Tensor:
    """The forget-gate bias of queries start … stop − 1 (key indices + offset) and the first
    ``visible`` keys -> (B, H, c, Tk'), fp32, −inf after the query when causal.

    cumulative: (B, H, Tk) = cumsum of log f (causal), or (B, 2H, Tk) with the reverse
    direction's in the second half (bidirectional, x-transformers' form)."""
    if causal:
        c_query = cumulative[:, :, start + offset : stop + offset, None]  # (B, H, c, 1)
        bias = c_query - cumulative[:, :, None, :visible]  # (B, H, c, Tk'): Σ_{l=j+1}^{i} log f
        future = causal_future(start, stop, offset, visible, cumulative.device)
        return bias.masked_fill(future, float("-inf"))
    forward, backward = cumulative.chunk(2, dim=1)  # (B, H, Tk) each
    before = forward[:, :, start:stop, None] - forward[:, :, None, :]  # c_i − c_j
    after = backward[:, :, None, :] - backward[:, :, start:stop, None]  # c'_j − c'_i
    later = causal_future(start, stop, 0, cumulative.shape[-1], cumulative.device)
    return torch.where(later, after, before)  # (B, H, c, Tk)


def gradients_wanted(*tensors: Tensor) -> bool:
    """Whether autograd will record work on these tensors: the evaluation paths that reuse
    buffers in place (below, ``lengen.pe.stick_breaking``, ``lengen.pe.path``) run only when not."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def forgetting_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_forget: Tensor,
    *,
    causal: bool,
    scale: float,
    dropout_p: float = 0.0,
    max_elements: int = MAX_SCORE_ELEMENTS,
) -> Tensor:
    """softmax(q·kᵀ·scale + c_i − c_j) v, one block of queries at a time.

    q (B, H, Tq, hd) — the last Tq of the keys when causal —, k and v (B, H, Tk, hd),
    log_forget (B, H, Tk) the keys' log gates (bidirectional: (B, 2H, Tk)) -> (B, H, Tq, hd).

    Without gradients (evaluation) a causal call writes every block's bias into one buffer
    and every block's output into one output tensor (``_reused_buffer_attention``): the same
    numbers, without a new score-sized tensor per block."""
    q_len, k_len = q.shape[2], k.shape[2]
    offset = k_len - q_len
    with torch.autocast(q.device.type, enabled=False):
        cumulative = log_forget.float().cumsum(dim=-1)  # (B, H or 2H, Tk)
    block = query_block_rows(q, k_len, max_elements)
    if causal and not gradients_wanted(q, k, v, log_forget):
        return _reused_buffer_attention(q, k, v, cumulative, block, scale, dropout_p)
    outputs = []
    for start in range(0, q_len, block):
        stop = min(start + block, q_len)
        visible = stop + offset if causal else k_len  # keys past the block's last query: unseen
        bias = forget_bias(cumulative, start, stop, offset, visible, causal)
        outputs.append(
            F.scaled_dot_product_attention(
                q[:, :, start:stop],
                k[:, :, :visible],
                v[:, :, :visible],
                attn_mask=bias.to(q.dtype),  # (B, H, c, Tk'): 4-D, SDPA's fused kernel takes it
                dropout_p=dropout_p,
                scale=scale,
            )
        )
    return torch.cat(outputs, dim=2)  # (B, H, Tq, hd)


def _reused_buffer_attention(
    q: Tensor, k: Tensor, v: Tensor, cumulative: Tensor, block: int, scale: float, dropout_p: float
) -> Tensor:
    """The causal blocks of ``forgetting_attention`` with one (B, H, block, Tk) bias buffer and
    one output, no autograd: q (B, H, Tq, hd), k, v (B, H, Tk, hd), cumulative (B, H, Tk) fp32.

    Why: each causal block sees more keys than the last, so a fresh bias per block is a tensor
    of a new size each time, and glibc keeps the freed ones (measured: resident memory 7× RoPE's
    at 8,192 tokens with only ~16 MiB of bias alive at once). One buffer, sliced, holds every
    block's bias; only small per-block tensors (SDPA's output) are allocated in the loop."""
    batch, heads, q_len, _ = q.shape
    k_len = k.shape[2]
    offset = k_len - q_len
    # bias c_i − c_j of the block, in q's dtype as the gradient path casts it (fp32 arithmetic)
    buffer = torch.empty(batch, heads, block, k_len, dtype=q.dtype, device=q.device)
    future = torch.ones(block, block, dtype=torch.bool, device=q.device).triu(1)  # key > query
    out = torch.empty(batch, heads, q_len, v.shape[-1], dtype=v.dtype, device=v.device)
    for start in range(0, q_len, block):
        stop = min(start + block, q_len)
        rows, visible = stop - start, stop + offset  # keys past the block's last query: unseen
        bias = buffer[:, :, :rows, :visible]  # (B, H, c, Tk'), a view
        c_query = cumulative[:, :, start + offset : visible, None]  # (B, H, c, 1)
        torch.sub(c_query, cumulative[:, :, None, :visible], out=bias)  # Σ_{l=j+1}^{i} log f
        # the causal mask: within the block's own c keys (the last c), key j after query i
        bias[..., visible - rows :].masked_fill_(future[:rows, :rows], float("-inf"))
        out[:, :, start:stop] = F.scaled_dot_product_attention(
            q[:, :, start:stop],
            k[:, :, :visible],
            v[:, :, :visible],
            attn_mask=bias,  # (B, H, c, Tk'), strided: SDPA's fused kernel reads it in place
            dropout_p=dropout_p,
            scale=scale,
        )
    return out  # (B, H, Tq, hd)


class GateProjections(nn.Module):
    """One linear projection x (B, T, D) -> gate logits per layer, weights N(0, 0.02).

    Weights (layers, G, D); biases flat (layers · G,), so the optimiser leaves them without
    weight decay (1-D parameters), like a Linear's bias."""

    def __init__(self, n_layers: int, d_model: int, gates: int, bias_init: float) -> None:
        super().__init__()
        self.gates = gates
        self.weight = nn.Parameter(torch.randn(n_layers, gates, d_model) * GATE_INIT_STD)
        self.bias = nn.Parameter(torch.full((n_layers * gates,), float(bias_init)))

    def forward(self, x: Tensor, layer: int) -> Tensor:
        """x (B, T, D) -> log σ(logits) (B, G, T), fp32."""
        bias = self.bias.view(-1, self.gates)[layer]  # (G,)
        with torch.autocast(x.device.type, enabled=False):
            logits = F.linear(x.float(), self.weight[layer].float(), bias.float())  # (B, T, G)
        return F.logsigmoid(logits).transpose(1, 2)  # (B, G, T)


class LayerViews:
    """``for_layer`` for encodings with per-layer parameters: a shallow copy that shares them
    (as RoPE-Mixed's), reading layer ``self.layer``."""

    layer = 0

    def for_layer(self, index: int):
        if index == self.layer:
            return self
        if not 0 <= index < self.n_layers:
            raise ValueError(
                f"pe: {type(self).__name__} holds parameters for {self.n_layers} layers, "
                f"not layer {index}"
            )
        view = object.__new__(type(self))
        view.__dict__ = dict(self.__dict__)  # the same parameter dicts: one set of weights
        view.layer = index
        return view


class ForgettingAttention(LayerViews, PositionalEncoding):
    """Softmax attention whose logits decay by data-dependent forget gates (no positions).

    Args:
        gate_bias_init: the gates' bias at initialisation (FoX: 0.0; x-transformers: 5.0).
    """

    Options = ForgettingAttentionConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        # bidirectional: a second set of gates for keys after the query (x-transformers)
        gates = self.n_heads if self.causal else 2 * self.n_heads
        self.gate = GateProjections(self.n_layers, self.d_model, gates, self.cfg.gate_bias_init)

    def token_state(self, x: Tensor) -> Tensor:
        return self.gate(x, self.layer)  # (B, H or 2H, T): log f

    def attention(self, q, k, v, q_state, k_state, *, causal, scale, dropout_p) -> Tensor:
        # the queries are the last Tq keys: their cumulative gates come from k_state
        return forgetting_attention(
            q, k, v, k_state, causal=causal, scale=scale, dropout_p=dropout_p
        )

    def describe(self) -> dict:
        form = "causal" if self.causal else "bidirectional (x-transformers DataDependentAlibi)"
        return {"gate_bias_init": self.cfg.gate_bias_init, "form": form}


__all__ = ["ForgettingAttention", "forget_bias", "forgetting_attention"]
