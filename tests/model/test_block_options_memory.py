"""A full causal pass with extra key columns (``model.attn_sinks``, ``model.kv_bias``) asks SDPA
for its own causal mask, never a (Tq, E + Tk) one: a mask made float inside SDPA made the long
evaluation's peak 5x RoPE's at 8,192 tokens (scripts/bench_options.py --memory-lengths 8192)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import lengen.model.block_options as block_options
from lengen.model.block_options import extra_key_attention

pytestmark = pytest.mark.usefixtures("single_thread")

BATCH, HEADS, LENGTH, HEAD_DIM, EXTRA = 2, 3, 9, 8, 2


def extra(seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    keys = torch.randn(HEADS, EXTRA, HEAD_DIM, generator=generator, dtype=torch.float64)
    constants = torch.randn(HEADS, EXTRA, generator=generator, dtype=torch.float64)
    values = torch.randn(HEADS, EXTRA, HEAD_DIM, generator=generator, dtype=torch.float64)
    return keys, constants, values


def qkv(q_len: int = LENGTH):
    generator = torch.Generator().manual_seed(0)
    shape = (BATCH, HEADS, LENGTH, HEAD_DIM)
    q, k, v = (torch.randn(shape, generator=generator, dtype=torch.float64) for _ in range(3))
    return q[:, :, LENGTH - q_len :], k, v


def textbook(q, k, v, keys, constants, values, scale):
    """softmax over [extra columns, visible keys] · [extra values, v], by the formula."""
    q_len, k_len = q.shape[2], k.shape[2]
    logits = q @ k.transpose(-1, -2) * scale  # (B, H, Tq, Tk)
    hidden = torch.arange(k_len)[None, :] > torch.arange(q_len)[:, None] + (k_len - q_len)
    logits = logits.masked_fill(hidden, float("-inf"))
    extra_logits = q @ keys.transpose(-1, -2) * scale + constants[:, None]  # (B, H, Tq, E)
    weights = torch.softmax(torch.cat([extra_logits, logits], -1), -1)
    return weights @ torch.cat([values.expand(q.shape[0], -1, -1, -1), v], 2)


def test_a_full_causal_pass_passes_no_mask_to_sdpa(monkeypatch):
    seen = []
    real = F.scaled_dot_product_attention

    def recording(*args, **kwargs):
        seen.append((kwargs.get("attn_mask"), kwargs.get("is_causal", False)))
        return real(*args, **kwargs)

    monkeypatch.setattr(block_options.F, "scaled_dot_product_attention", recording)
    q, k, v = qkv()
    extra_key_attention(q, k, v, extra(), causal=True, scale=HEAD_DIM**-0.5, dropout_p=0.0)
    assert seen == [(None, True)]


@pytest.mark.parametrize("q_len", [LENGTH, 1, 4], ids=["full pass", "one query", "four"])
def test_extra_columns_equal_the_textbook_softmax(q_len):
    q, k, v = qkv(q_len)
    scale = HEAD_DIM**-0.5
    got = extra_key_attention(q, k, v, extra(), causal=True, scale=scale, dropout_p=0.0)
    assert_close(got, textbook(q, k, v, *extra(), scale))
