"""Dual chunk attention (``pe.extension=dual_chunk``, lengen.pe.dual_chunk) against the
reference code's position indices (HKUNLP/ChunkLlama ``chunkllama_attn_replace.py``): chunks of
C = s − w tokens, keys at j mod C; queries at i mod C (same chunk), min(i mod C + C, s) (the
chunk before), min(2C − 1, s) (earlier chunks)."""

from __future__ import annotations

import pytest
import torch

from extension_reference import arm_output, random_qkv, relative_attention
from lengen.pe.config.base import EncodingContext
from lengen.pe.config.rope import RoPEConfig

pytestmark = pytest.mark.usefixtures("single_thread")


def dca_relative(chunk_size: int, local_window: int):
    chunk = chunk_size - local_window  # C

    def relative(i: int, j: int) -> float:
        distance = i // chunk - j // chunk
        if distance == 0:
            return i - j
        if distance == 1:
            return min(i % chunk + chunk, chunk_size) - j % chunk
        return min(2 * chunk - 1, chunk_size) - j % chunk

    return relative


@pytest.mark.parametrize(("chunk_size", "local_window"), [(5, 1), (6, 3), (4, 2), (9, 2)])
def test_attention_equals_the_reference_indices(chunk_size, local_window):
    q, k, v = random_qkv(length=16)
    expected = relative_attention(q, k, v, dca_relative(chunk_size, local_window))
    actual = arm_output(
        q, k, v, extension="dual_chunk", dca_chunk_size=chunk_size, dca_local_window=local_window
    )
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_defaults_are_the_reference_fractions_of_the_training_length():
    # replace_with_chunkllama: chunk_size = 3L // 4, local_window = L // 16
    params = (
        RoPEConfig(extension="dual_chunk")
        .check(EncodingContext(8, 2, train_positions=64), "RoPE")
        .extension
    )
    assert (params.chunk_size, params.local_window, params.chunk_len) == (48, 4, 44)


def test_a_chunk_no_longer_than_the_local_window_is_refused():
    with pytest.raises(ValueError, match=r"^pe\.dca_chunk_size must be > pe\.dca_local_window"):
        RoPEConfig(extension="dual_chunk", dca_chunk_size=4, dca_local_window=4).check(
            EncodingContext(8, 2, train_positions=64), "RoPE"
        )
