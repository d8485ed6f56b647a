"""The peers that scripts/bench.py measures lengen against: a hand-written PyTorch model and
loop of the same sizes (``PlainLM``, ``timed_loop``, ~80 lines), and x-transformers'
``TransformerWrapper`` + ``Decoder`` (``xt_model``); and the GPU clock both loops share.

Every function takes the sizes (bench.py's ``SIZES``) from its caller.
"""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn


def gpu_clock() -> float:
    """The host clock once the GPU has finished what was queued."""
    torch.cuda.synchronize()
    return time.perf_counter()


def gpu_mean(start: float, steps: int) -> list[float]:
    """``steps`` copies of the mean step time since ``start`` (``gpu_clock``). On a GPU the host
    queues steps ahead of the device, so one step's host interval is not its time, and a sync
    per step would change what is timed; the mean over the timed steps is."""
    return [(gpu_clock() - start) / steps] * steps


# -- the hand-written loop --------------------------------------------------------------------
class PlainBlock(nn.Module):
    def __init__(self, d, h, ff):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x, rope=None, bias=None):
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        if rope is not None:  # (B, H, T, hd), half-split rotation
            cos, sin = rope
            q, k = (torch.cat([-t[..., t.shape[-1] // 2 :], t[..., : t.shape[-1] // 2]], -1)
                    * sin + t * cos for t in (q, k))  # fmt: skip
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class PlainLM(nn.Module):
    """Pre-LN decoder, SDPA; the PE as the simplest code that does it (caches per length)."""

    def __init__(self, pe: str, vocab, d_model, n_layers, n_heads, d_ff, max_len):
        super().__init__()
        self.pe, self.h = pe, n_heads
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model) if pe == "learned" else None
        self.blocks = nn.ModuleList(PlainBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.ln, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab, bias=False)
        self.cache = {}

    def extras(self, T, device):
        if T not in self.cache:
            d, hd = self.tok.embedding_dim, self.tok.embedding_dim // self.h
            pos = torch.arange(T, device=device, dtype=torch.float32)
            sinusoid = rope = bias = None
            if self.pe == "sinusoidal":
                freq = 10000.0 ** (-torch.arange(0, d, 2, device=device) / d)
                angle = pos[:, None] * freq  # (T, d/2)
                sinusoid = torch.stack([angle.sin(), angle.cos()], -1).flatten(1)  # (T, d)
            if self.pe == "rope":
                freq = 10000.0 ** (-torch.arange(0, hd, 2, device=device) / hd)
                angle = torch.cat([pos[:, None] * freq] * 2, -1)  # (T, hd)
                rope = (angle.cos(), angle.sin())
            if self.pe == "alibi":
                slopes = 2.0 ** (-8.0 * torch.arange(1, self.h + 1, device=device) / self.h)
                distance = (pos[:, None] - pos[None, :]).clamp(min=0)
                bias = -slopes[:, None, None] * distance  # (H, T, T)
                bias = bias.masked_fill(pos[None, :] > pos[:, None], float("-inf"))[None]
            self.cache[T] = (sinusoid, rope, bias)
        return self.cache[T]

    def forward(self, tokens):
        B, T = tokens.shape
        sinusoid, rope, bias = self.extras(T, tokens.device)
        x = self.tok(tokens)
        if self.pos is not None:
            x = x + self.pos(torch.arange(T, device=tokens.device))
        if sinusoid is not None:
            x = x + sinusoid
        for block in self.blocks:
            x = block(x, rope, bias)
        return self.head(self.ln(x))


def plain_step(model: nn.Module, optimizer, forward, inputs, targets) -> None:
    """One step of the hand-written loop: cross-entropy, AdamW, clipping at 1.0 (also run
    between lengen's steps by scripts/bench_interleave.py, on lengen's batches)."""
    logits = forward(model, inputs)  # (B, T, vocab)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()


def timed_loop(
    model: nn.Module, forward, warmup: int, steps: int, device, sizes: dict, hook=None
) -> list[float]:
    """AdamW + clipping at 1.0 on random batches; per-step seconds after the warm-up (on a GPU
    the mean over the timed steps, as ``train_lengen``). ``hook(step)`` runs before each step."""
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    times = []
    cuda = device.type == "cuda"
    for step in range(warmup + steps):
        if hook is not None:
            hook(step)  # scripts/profile_step.py: starts its profilers after the warm-up
        if cuda and step == warmup:
            started = gpu_clock()
        start = time.perf_counter()
        generator = torch.Generator().manual_seed(step)
        tokens = torch.randint(
            0, sizes["vocab"], (sizes["batch"], sizes["seq"] + 1), generator=generator
        ).to(device)
        plain_step(model, optimizer, forward, tokens[:, :-1], tokens[:, 1:])
        if step >= warmup and not cuda:
            times.append(time.perf_counter() - start)
    return gpu_mean(started, steps) if cuda else times


def train_plain(name: str, warmup: int, steps: int, device, sizes: dict) -> list[float]:
    torch.manual_seed(0)
    model = PlainLM(
        name, sizes["vocab"], sizes["d_model"], sizes["n_layers"], sizes["n_heads"],
        sizes["d_ff"], sizes["seq"],
    )  # fmt: skip
    return timed_loop(model, lambda m, t: m(t), warmup, steps, device, sizes)


# -- x-transformers ---------------------------------------------------------------------------
def xt_model(name: str, flash: bool, sizes: dict) -> nn.Module:
    """x-transformers at the same sizes. Differences from lengen (noted in the docs): no bias in
    its q/k/v projections; its sinusoidal embedding has a learned scale
    (``scaled_sinu_pos_emb``); ALiBi and RoPE must switch the learned absolute embedding off
    themselves (``use_abs_pos_emb=False``), or it stays on."""
    from x_transformers import Decoder, TransformerWrapper

    attn = dict(
        dim=sizes["d_model"], depth=sizes["n_layers"], heads=sizes["n_heads"],
        attn_dim_head=sizes["d_model"] // sizes["n_heads"], ff_mult=sizes["d_ff"] // sizes["d_model"],
        attn_flash=flash,
    )  # fmt: skip
    wrapper = dict(num_tokens=sizes["vocab"], max_seq_len=sizes["seq"], use_abs_pos_emb=False)
    if name == "rope":
        attn.update(rotary_pos_emb=True, rotary_emb_dim=sizes["d_model"] // sizes["n_heads"])
    elif name == "alibi":
        attn.update(alibi_pos_bias=True)
    elif name == "learned":
        wrapper.update(use_abs_pos_emb=True)
    elif name == "sinusoidal":
        wrapper.update(use_abs_pos_emb=True, scaled_sinu_pos_emb=True)
    return TransformerWrapper(attn_layers=Decoder(**attn), **wrapper)


def train_xt(name: str, flash: bool, warmup: int, steps: int, device, sizes: dict) -> list[float]:
    torch.manual_seed(0)
    return timed_loop(xt_model(name, flash, sizes), lambda m, t: m(t), warmup, steps, device, sizes)
