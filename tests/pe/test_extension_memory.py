"""RoPE's training-free arms (``pe.extension``) write their blocks into one output tensor: a list
of small per-block outputs concatenated at the end sat between the freed score blocks and kept
them resident (ReRoPE at 8,192 tokens: 750 MiB resident against 58 MiB of live tensors; 72 MiB
after, scripts/bench_options.py --memory-lengths 8192)."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

import lengen.pe.extension as extension
from lengen.pe.config.rerope import ReRoPEParams
from lengen.pe.rerope import ReRoPE

pytestmark = pytest.mark.usefixtures("single_thread")


def identity(x, positions):
    return x


def test_blocks_are_written_into_one_output_not_concatenated(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("per-block outputs concatenated")

    monkeypatch.setattr(extension.torch, "cat", refuse)
    q, k, v = (
        torch.randn(1, 2, 12, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)
    )
    out = extension.extended_attention(
        q, k, v, ReRoPE(ReRoPEParams(window=3, leak=None)), identity, scale=0.5, max_elements=96
    )  # several blocks of queries
    assert out.shape == (1, 2, 12, 4)


def test_small_blocks_give_the_same_output_as_one_block():
    q, k, v = (
        torch.randn(1, 2, 12, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)
    )
    arm = ReRoPE(ReRoPEParams(window=3, leak=None))
    one = extension.extended_attention(q, k, v, arm, identity, scale=0.5)
    blocks = extension.extended_attention(q, k, v, arm, identity, scale=0.5, max_elements=96)
    assert_close(blocks, one)
