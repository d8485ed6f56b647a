"""Sigmoid attention (``model.attn_fn=sigmoid``) runs ``math_attention`` one block of queries at
a time; each block's logits are scaled and masked in place, so one block-sized tensor is alive,
not two (out of place: 2.4x RoPE's resident peak at 8,192 tokens, scripts/bench_options.py
--memory-lengths 8192)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from helpers import load_script
from lengen.model.block_options import math_attention
from lengen.pe.alibi import ALiBi
from lengen.pe.nope import NoPE

pytestmark = pytest.mark.usefixtures("single_thread")

BATCH, HEADS, HEAD_DIM = 1, 2, 8
SIZES = dict(d_model=HEADS * HEAD_DIM, n_heads=HEADS, causal=True)


# the peak of live CPU tensor bytes, measured as scripts/bench_memory.py measures it
live_peak_bytes = load_script("bench_memory").live_peak_bytes


def qkv(length: int, dtype=torch.float32, grad: bool = False):
    generator = torch.Generator().manual_seed(0)
    shape = (3, BATCH, HEADS, length, HEAD_DIM)
    q, k, v = torch.randn(shape, generator=generator, dtype=dtype).unbind(0)
    return [t.clone().requires_grad_(grad) for t in (q, k, v)]  # (B, H, T, hd) each


def sigmoid_attention(q, k, v, pe, max_elements):
    positions = torch.arange(q.shape[2])
    return math_attention(
        q, k, v, None, causal=True, pe=pe, q_positions=positions, k_positions=positions,
        scale=HEAD_DIM**-0.5, sigmoid=True, max_elements=max_elements,
    )  # fmt: skip


def test_sigmoid_attention_keeps_one_block_of_logits_alive():
    # 64 queries × 512 keys × 2 heads = 64K fp32 logits (256 KiB) a block; q, k, v, the output
    # and the (64, 512) masks are 32 KiB each: two live blocks would pass 512 KiB
    length, elements = 512, 1 << 16
    q, k, v = qkv(length)
    with torch.no_grad():
        sigmoid_attention(q, k, v, NoPE(**SIZES), elements)  # kernels loaded
        peak = live_peak_bytes(lambda: sigmoid_attention(q, k, v, NoPE(**SIZES), elements))
    block_bytes = elements * 4
    assert peak < 1.6 * block_bytes


def formula(q, k, v, pe):
    """sigmoid(q·kᵀ/√hd + bias − log n_i) on visible keys, n_i = i + 1, times v; float64."""
    length = q.shape[2]
    positions = torch.arange(length)
    logits = q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM)  # (B, H, T, T)
    if pe.has_bias:
        logits = logits + pe.attention_bias(positions, positions).double()
    visible = torch.ones(length, length, dtype=torch.bool).tril()
    logits = logits.masked_fill(~visible, float("-inf"))
    seen = torch.arange(1, length + 1, dtype=torch.float64)[:, None]  # (T, 1)
    return torch.sigmoid(logits - seen.log()) @ v


@pytest.mark.parametrize("cls", [NoPE, ALiBi], ids=["nope", "alibi"])
def test_blocked_sigmoid_attention_has_the_formulas_gradients(cls):
    # several query blocks (4 queries of 23), logits changed in place: autograd still right
    length, elements = 23, BATCH * HEADS * 23 * 4
    pe = cls(**SIZES)

    def gradients(attend):
        q, k, v = qkv(length, torch.float64, grad=True)
        weights = torch.linspace(-1, 1, q.numel(), dtype=torch.float64)
        loss = attend(q, k, v).flatten() @ weights
        return torch.autograd.grad(loss, [q, k, v])

    blocked = gradients(lambda q, k, v: sigmoid_attention(q, k, v, pe, elements))
    assert_close(blocked, gradients(lambda q, k, v: formula(q, k, v, pe)))
