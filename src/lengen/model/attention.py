"""Multi-head attention: the layer around the kernels.

``MultiHeadAttention`` projects q, k and v, applies the encoding's rotation, and hands the rest
(scale, bias, masking, the kernel itself) to ``attend`` (``lengen.model.kernels``, where the
kernel is chosen). Its cached forward serves incremental decoding (``lengen.model.cache``).

The layer calls ``attend`` through this module's name for it, looked up at every call:
``lengen.attention_maps`` swaps that name for one forward pass to record the weights.

Block options (``model.attn_gate``, ``attn_sinks``, ``kv_bias``, ``qk_norm``, ``attn_fn``;
``lengen.model.block_options``) act on self-attention only: QK-norm before the rotation, the
gate after attention; sinks, key biases and sigmoid attention change the weights and go
through ``block_options.attend_with_options``, looked up at every call as well: the
diagnostics recorder (``lengen.evaluation.attention``) and ``lengen.attention_maps`` swap it too.
All off, the layer is the plain one, module for module and operation for operation.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from lengen.model import block_options
from lengen.model.block_config import AttentionOptions
from lengen.model.cache import KVCache, MemoryCache
from lengen.model.canon import Canon, CanonState
from lengen.model.kernels import attend
from lengen.pe.base import PositionalEncoding


class MultiHeadAttention(nn.Module):
    """Self- or cross-attention with the PE's rotation and bias hooks.

    Cross-attention (``cross=True``) uses no positional information: positions enter each stack
    through its own self-attention, as in T5, whose relative bias is also absent from
    cross-attention. Query and key positions live in different sequences there, so a relative
    signal between them would have no meaning.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float,
        causal: bool,
        cross: bool,
        kernel: str = "auto",
    ):
        super().__init__()
        self.n_heads = n_heads
        self.causal = causal
        self.cross = cross
        self.dropout = dropout
        self.kernel = kernel  # model.attention: choose_kernel decides per call
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.options = AttentionOptions()
        #: model.canon's B: a Canon layer on the projected q, k, v (self-attention; the block
        #: sets it), None without
        self.canon_qkv: Canon | None = None

    def use_options(self, options: AttentionOptions) -> None:
        """Take the block options (self-attention only), adding the parameters they need."""
        if self.cross or options == AttentionOptions():
            return
        self.options = options
        block_options.add_parameters(self, self.query.in_features, self.n_heads, options)

    def _attend(self, q, k, v, **kwargs) -> Tensor:
        """Self-attention's kernel call: ``attend`` (through this module's name), or
        ``attend_with_options`` when the options change the weights."""
        if not self.options.changes_attention:
            return attend(q, k, v, **kwargs)
        extra = block_options.extra_keys(self, self.options, q)
        kwargs = {key: kwargs[key] for key in ("causal", "pe", "q_positions", "k_positions",
                                               "dropout_p", "kernel") if key in kwargs}  # fmt: skip
        return block_options.attend_with_options(q, k, v, extra, self.options, **kwargs)

    def _project(
        self, x: Tensor, source: Tensor, state: CanonState | None = None
    ) -> tuple[Tensor, Tensor]:
        """x (B, T, D), source (B, S, D) -> q (B, T, D), keys and values (B, S, 2D), through
        Canon B where the block has it (on q, k, v together, as PhysicsLM4 does)."""
        q, kv = self.query(x), self.key_value(source)
        if self.canon_qkv is None:
            return q, kv
        qkv = self.canon_qkv(torch.cat((q, kv), dim=-1), state)  # (B, T, 3D)
        return qkv.split((q.shape[-1], kv.shape[-1]), dim=-1)

    def forward(
        self,
        x: Tensor,
        pe: PositionalEncoding,
        positions: Tensor,
        memory: Tensor | None = None,
        cache: KVCache | MemoryCache | None = None,
    ) -> Tensor:
        # x: (B, T, D); memory: (B, S, D) for cross-attention
        if cache is not None:
            return self._forward_cached(x, pe, positions, memory, cache)
        batch, length, d_model = x.shape
        source = memory if self.cross else x
        head_dim = d_model // self.n_heads
        q, kv = self._project(x, source)  # (B, T, D), (B, S, 2D)
        q = q.view(batch, length, self.n_heads, head_dim).transpose(1, 2)  # (B, H, T, hd)
        k, v = kv.view(batch, -1, 2, self.n_heads, head_dim).unbind(2)
        k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, hd)
        dropout_p = self.dropout if self.training else 0.0
        if self.cross:
            y = attend(q, k, v, causal=False, dropout_p=dropout_p)
        else:
            if self.options.qk_norm:  # before the rotation (block_options)
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = pe.rotate(q, k, positions, positions)
            state = pe.token_state(x)  # FoX's gates, PaTH's transforms (None for the others)
            y = self._attend(
                q,
                k,
                v,
                causal=self.causal,
                pe=pe,
                q_positions=positions,
                k_positions=positions,
                dropout_p=dropout_p,
                kernel=self.kernel,
                q_state=state,
                k_state=state,
            )
            if self.options.gate != "none":
                y = block_options.gated(self, y, x)  # (B, H, T, hd)
        return self.out(y.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, D)

    def _forward_cached(
        self,
        x: Tensor,
        pe: PositionalEncoding,
        positions: Tensor,
        memory: Tensor | None,
        cache: KVCache | MemoryCache,
    ) -> Tensor:
        """Incremental decoding (``lengen.model.cache``): x (B, T, D) holds the next T tokens,
        ``positions`` (T,) their positions; earlier keys and values come from the cache."""
        batch, length, d_model = x.shape
        head_dim = d_model // self.n_heads
        if self.cross:
            q = self.query(x).view(batch, length, self.n_heads, head_dim).transpose(1, 2)
            if cache.keys is None:  # the memory's keys and values, once per sequence
                k, v = self.key_value(memory).view(batch, -1, 2, self.n_heads, head_dim).unbind(2)
                cache.keys, cache.values = k.transpose(1, 2), v.transpose(1, 2)  # (B, H, S, hd)
            y = attend(q, cache.keys, cache.values, causal=False)
        else:
            q, kv = self._project(x, x, cache.canon)  # Canon B continues from its inputs
            q = q.view(batch, length, self.n_heads, head_dim).transpose(1, 2)  # (B, H, T, hd)
            k, v = kv.view(batch, length, 2, self.n_heads, head_dim).unbind(2)
            k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, hd)
            if self.options.qk_norm:  # stored normalised, rotated as the full pass does
                q, k = self.q_norm(q), self.k_norm(k)
            if cache.store_rotated:  # each key rotated once, as it arrives
                q, k = pe.rotate(q, k, positions, positions)
            state = pe.token_state(x)  # the new tokens' (None for most encodings)
            k, v = cache.append(k, v, state)  # (B, H, t, hd): every key so far
            seen = k.shape[2]
            if not cache.store_rotated:
                # rotate every stored key with all N positions in view, as the full pass does
                # (xPos centres, dynamic NTK frequencies); unfilled slots are sliced off
                q, k = pe.rotate(q, cache.keys, positions, cache.positions)
                k = k[:, :, :seen]
            y = self._attend(
                q,
                k,
                v,
                causal=True,
                pe=pe,
                q_positions=positions,
                k_positions=cache.positions[:seen],
                q_state=state,
                k_state=cache.key_state(),  # every key's, as the full pass has them
            )
            if self.options.gate != "none":
                y = block_options.gated(self, y, x)  # (B, H, T, hd)
        return self.out(y.transpose(1, 2).reshape(batch, length, d_model))  # (B, T, D)
