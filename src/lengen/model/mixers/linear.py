"""The linear-attention family (GLA, DeltaNet, Gated DeltaNet): one recurrence, two forms.

Per head, a matrix memory S (dk × dv) is updated token by token,

    S_t = α_t · S_{t−1} + β_t · k_t (v_t − α_t S_{t−1}ᵀ k_t)ᵀ   (the delta rule), or
    S_t = α_t · S_{t−1} + k_t v_tᵀ                               (without it: GLA),
    o_t = S_tᵀ q_t,

with α_t = exp(log_decay_t) a scalar forget gate per head and token (1 without a gate:
DeltaNet) and β_t the writing strength. ``recurrent_form`` is this loop, for decoding one token
at a time. ``chunked_form`` computes the same for a whole sequence in chunks of C tokens: inside
a chunk every output is a masked product (quadratic in C, parallel), and only the state passes
between chunks, so training costs T / C sequential steps instead of T. For the delta rule the
chunk's corrected values come from one unit-lower-triangular solve (the WY / UT form of Yang et
al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length"), whose
derivation is in docs/models.md. References, read and re-derived, not copied:
``fla-org/flash-linear-attention`` ``fla/ops/simple_gla/naive.py`` (``naive_chunk_simple_gla``),
``fla/ops/delta_rule/naive.py`` (``delta_rule_recurrence``, ``delta_rule_chunkwise``),
``fla/ops/gated_delta_rule/naive.py`` (``naive_recurrent_gated_delta_rule``,
``naive_chunk_gated_delta_rule``; in the repository's history and its forks).
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.model.canon import causal_depthwise_conv
from lengen.model.mixers.base import RecurrentMixer


def chunked_form(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor | None = None,
    log_decay: Tensor | None = None,
    state: Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[Tensor, Tensor]:
    """The recurrence over a whole sequence, chunk by chunk.

    q, k: (B, H, T, dk); v: (B, H, T, dv); beta: (B, H, T) writing strengths (None: no delta
    rule, GLA); log_decay: (B, H, T) log α ≤ 0 (None: α = 1); state: (B, H, dk, dv) before the
    first token (None: zeros) -> outputs (B, H, T, dv), the state after the last token.

    Terms that are exactly 0 or 1 are left out rather than computed (a zero start state's
    products; without a gate, γ = 1 and the decay is the causal mask), so each case runs only
    the ops it needs: at the default training size, one chunk from a zero state, that is half
    the per-chunk ops (profiled for #49), with the same values.
    """
    batch, heads, length, dk = q.shape
    outputs = []
    for start in range(0, length, chunk_size):
        part = slice(start, min(start + chunk_size, length))
        qc, kc, vc = q[:, :, part], k[:, :, part], v[:, :, part]  # (B, H, C, d)
        size = qc.shape[2]
        causal = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()
        if log_decay is None:  # α = 1: γ_t = 1, γ_t / γ_j = 1 on and below the diagonal
            cum = decay = None
        else:
            cum = log_decay[:, :, part].cumsum(-1)  # (B, H, C): log γ_t = Σ_{i ≤ t} log α_i
            # decay[t, j] = γ_t / γ_j for j ≤ t, else 0; masked before exp (γ_t / γ_j > 1 above)
            decay = (cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, -math.inf).exp()
        # (B, H, C, 1): γ_t, what survives of the start state; None: all of it (or no state)
        carried = None if cum is None or state is None else cum.exp()[..., None]
        if beta is None:
            written = vc  # (B, H, C, dv): GLA writes the values as they are
        else:
            bc = beta[:, :, part, None]  # (B, H, C, 1)
            # w_t = β_t (v_t − γ_t S₀ᵀ k_t − Σ_{j<t} (γ_t/γ_j) (k_t·k_j) w_j): a unit lower
            # triangular system (I + A) w = β (v − γ K S₀), A strictly below the diagonal. The
            # solve reads only that part of A (unitriangular, lower) and its gradient is
            # projected onto it, so the diagonal and the upper triangle need no masking.
            strict = kc @ kc.transpose(-1, -2)  # (B, H, C, C)
            strict = (strict if decay is None else strict * decay) * bc
            rhs = vc if state is None else vc - _scaled(carried, kc @ state)  # (B, H, C, dv)
            written = torch.linalg.solve_triangular(
                strict, bc * rhs, upper=False, unitriangular=True
            )  # (B, H, C, dv)
        scores = qc @ kc.transpose(-1, -2)  # (B, H, C, C)
        # causal incl. the diagonal: the decay is 0 above it, the mask where there is none
        scores = scores.masked_fill(~causal, 0.0) if decay is None else scores * decay
        chunk = scores @ written  # (B, H, C, dv)
        outputs.append(chunk if state is None else _scaled(carried, qc @ state) + chunk)
        update = kc if cum is None else kc * (cum[..., -1:] - cum).exp()[..., None]  # γ_C / γ_j
        update = update.transpose(-1, -2) @ written  # (B, H, dk, dv)
        if state is not None:  # γ_C S₀ + Σ_j (γ_C / γ_j) k_j w_jᵀ
            update = (
                _scaled(None if cum is None else cum[..., -1:].exp()[..., None], state) + update
            )
        state = update
    if state is None:  # no token: the zero start state, unchanged
        state = q.new_zeros(batch, heads, dk, v.shape[-1])
    # one chunk (the default training size): its output as it is, not copied by cat
    return (outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=2)), state


def _unit(x: Tensor, scale: float = 1.0) -> Tensor:
    """scale · x / ‖x‖ over the last dim (F.normalize's, eps 1e-12, times scale), as a product
    with a (…, 1) factor: F.normalize divides by the norm expanded to x's shape, whose
    backward then forms three tensors of x's size (profiled for #49)."""
    return x * (scale / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-12))


def _scaled(factor: Tensor | None, x: Tensor) -> Tensor:
    """factor · x, where None stands for a factor of exactly 1 (no op)."""
    return x if factor is None else factor * x


def recurrent_form(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor | None = None,
    log_decay: Tensor | None = None,
    state: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The same recurrence token by token (decoding); arguments and results as
    ``chunked_form``'s."""
    batch, heads, length, dk = q.shape
    if state is None:
        state = q.new_zeros(batch, heads, dk, v.shape[-1])
    outputs = []
    for t in range(length):
        if log_decay is not None:
            state = state * log_decay[:, :, t, None, None].exp()  # α_t S_{t−1}
        written = v[:, :, t]  # (B, H, dv)
        if beta is not None:  # β_t (v_t − Sᵀ k_t): the error of the memory's prediction of v_t
            predicted = (k[:, :, t, None, :] @ state).squeeze(-2)  # (B, H, dv)
            written = beta[:, :, t, None] * (written - predicted)
        state = state + k[:, :, t, :, None] * written[:, :, None, :]  # (B, H, dk, dv)
        outputs.append((q[:, :, t, None, :] @ state).squeeze(-2))  # (B, H, dv)
    return torch.stack(outputs, dim=2), state


def mamba2_log_decay(projected: Tensor, a_log: Tensor, dt_bias: Tensor) -> Tensor:
    """Mamba-2's scalar forget gate per head (Dao & Gu 2024, "Transformers are SSMs", §4):
    log α = −exp(A_log) · softplus(W_Δ x + dt_bias). projected: (B, T, H) = W_Δ x -> (B, H, T)."""
    return (-a_log.exp() * F.softplus(projected + dt_bias)).transpose(1, 2)


class LinearMixer(RecurrentMixer):
    """Projections around the recurrence: q, k, v per head, each through a short causal
    depthwise convolution and SiLU where ``conv_size`` > 0 (fla's ``ShortConvolution``, Mamba-2's
    conv); the gate and β where the variant has them; a per-head RMSNorm of the outputs and a
    SiLU output gate (as GLA, Mamba-2 and Gated DeltaNet do), then the output projection
    (``out``: GPT-2's depth-scaled init applies to it by name, as to attention's).

    Its state is (S, tail): the matrix memory (B, H, dk, dv) and the last ``conv_size`` − 1
    projected inputs (B, conv_size − 1, 3·D) that the convolution still reads (None without one).
    """

    #: the variant: the delta rule (DeltaNet) and a forget gate (GLA, Gated DeltaNet)
    delta: ClassVar[bool] = False
    gated: ClassVar[bool] = False

    def __init__(
        self,
        *,
        d_model,
        n_heads,
        chunk_size=64,
        conv_size=0,
        negative_eigenvalues=False,
        **ignored,
    ) -> None:
        super().__init__(d_model=d_model, n_heads=n_heads, **ignored)
        self.head_dim = d_model // n_heads
        self.chunk_size = chunk_size
        self.conv_size = conv_size
        # Grazzi et al. 2025: β in (0, 2) lets I − β k kᵀ have a negative eigenvalue
        self.beta_scale = 2.0 if negative_eigenvalues else 1.0
        self.query = nn.Linear(d_model, d_model, bias=False)
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        if conv_size:  # one depthwise filter per channel of q, k and v together (3·D)
            channels = 3 * d_model
            self.conv = nn.Conv1d(channels, channels, conv_size, groups=channels, bias=False)
        if self.delta:
            self.beta = nn.Linear(d_model, n_heads)
        if self.gated:
            self.decay = nn.Linear(d_model, n_heads, bias=False)
            # Mamba-2's initialisation: A ~ U(1, 16), Δ = softplus(dt_bias) ~ log-U(0.001, 0.1);
            # plain parameters, not Linear biases, which the model's init sets to zero
            self.a_log = nn.Parameter(torch.empty(n_heads).uniform_(1.0, 16.0).log())
            dt = torch.empty(n_heads).uniform_(math.log(1e-3), math.log(1e-1)).exp()
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus⁻¹(dt)
        self.norm = nn.RMSNorm(self.head_dim, eps=1e-5)
        self.gate = nn.Linear(d_model, d_model, bias=False)
        self.out = nn.Linear(d_model, d_model)

    def heads(self, projected: Tensor) -> Tensor:
        batch, length, _ = projected.shape
        return projected.view(batch, length, self.n_heads, self.head_dim).transpose(1, 2)

    def convolve(self, projected: Tensor, tail: Tensor | None) -> tuple[Tensor, Tensor]:
        """Causal depthwise convolution, then SiLU: (B, T, 3D) and the inputs before them
        (B, w − 1, 3D; None: zeros, the sequence's start) -> (B, T, 3D), the new tail."""
        if tail is None:
            tail = projected.new_zeros(projected.shape[0], self.conv_size - 1, projected.shape[2])
        # Canon's convolution (the same causal sum; no copy to conv1d's layout, see there);
        # the weights stay nn.Conv1d's (3D, 1, w), so checkpoints keep their keys and shapes
        mixed = causal_depthwise_conv(projected, self.conv.weight[:, 0], tail)  # (B, T, 3D)
        kept, length = self.conv_size - 1, projected.shape[1]
        # the last w − 1 inputs, from the tail where T < w − 1; copied: a slice would keep the
        # whole projected input alive in the decoding state, which then grew with the prompt
        # (scripts/bench_options.py)
        recent = torch.cat(
            [tail, projected[:, max(0, length - kept) :]], dim=1
        )  # (B, ≤ 2(w − 1), 3D)
        tail = recent[:, recent.shape[1] - kept :].clone()  # (B, w − 1, 3D)
        return F.silu(mixed), tail

    def terms(self, x: Tensor, tail: Tensor | None = None):
        """x (B, T, D) and the convolution's tail -> (q, k (B, H, T, dk) with q scaled by
        dk^−½, v (B, H, T, dv), β and log α (B, H, T) or None), the new tail."""
        if self.conv_size:
            # one product with the three weights stacked, not three and a concatenation of
            # their outputs: the convolution reads q, k and v together (the same values)
            stacked = torch.cat([self.query.weight, self.key.weight, self.value.weight])
            qkv, tail = self.convolve(F.linear(x, stacked), tail)  # (B, T, 3D)
            q, k, v = qkv.chunk(3, dim=-1)  # SiLU'd by the convolution
        else:
            q, k, v = self.query(x), self.key(x), self.value(x)  # (B, T, D) each
            if self.delta:  # SiLU before the L2 norm (fla's DeltaNet)
                q, k = F.silu(q), F.silu(k)
        q, k, v = self.heads(q), self.heads(k), self.heads(v)
        scale = self.head_dim**-0.5
        if self.delta:  # ‖k‖ = 1 keeps I − β k kᵀ's eigenvalues in [1 − β, 1]
            q, k = _unit(q, scale), _unit(k)
        else:
            q = q * scale
        beta = None
        if self.delta:
            beta = self.beta_scale * torch.sigmoid(self.beta(x)).transpose(1, 2)  # (B, H, T)
        log_decay = None
        if self.gated:
            log_decay = mamba2_log_decay(self.decay(x), self.a_log, self.dt_bias)  # (B, H, T)
        return (q, k, v, beta, log_decay), tail

    def memory_shapes(self, batch: int) -> list[tuple[int, ...]]:
        return [(batch, self.n_heads, self.head_dim, self.head_dim)]  # S: (B, H, dk, dv)

    def memory_dtype(self, x: Tensor) -> torch.dtype:
        return torch.promote_types(x.dtype, torch.float32)  # the recurrence's, as in mix

    def memory_of(self, state) -> tuple[Tensor, ...]:
        return (state[0],)

    def with_memory(self, memory: tuple[Tensor, ...]):
        return memory[0], None  # the convolution's tail starts at zero, as a sequence's does

    def mix(self, x: Tensor, state, decoding: bool):
        batch, length, d_model = x.shape
        memory, tail = (None, None) if state is None else state
        terms, tail = self.terms(x, tail)
        # the recurrence in fp32 at least: products of many gates underflow in bf16
        compute = torch.promote_types(terms[0].dtype, torch.float32)
        terms = [None if term is None else term.to(compute) for term in terms]
        if decoding and length == 1:
            y, memory = recurrent_form(*terms, state=memory)
        else:
            y, memory = chunked_form(*terms, state=memory, chunk_size=self.chunk_size)
        y = self.norm(y.to(x.dtype))  # (B, H, T, dv), per head
        y = y.transpose(1, 2).reshape(batch, length, d_model) * F.silu(self.gate(x))
        return self.out(y), (memory, tail)  # (B, T, D)
