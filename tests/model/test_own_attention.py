"""Encodings that compute attention themselves (``has_attention``: FoX, stick-breaking, PaTH):
the one kernel choice sends them to their own path whatever ``model.attention`` says, the
attention layer hands them the tokens' states, and the decoding cache keeps the keys' states."""

from __future__ import annotations

import pytest
import torch

from lengen.model.cache import KVCache
from lengen.model.kernels import attend, choose_kernel
from lengen.pe import NoPE
from lengen.pe.fox import ForgettingAttention
from lengen.pe.path import PaTH
from lengen.pe.stick_breaking import StickBreaking

pytestmark = pytest.mark.usefixtures("single_thread")

OWN_ATTENTION = [ForgettingAttention, StickBreaking, PaTH]


@pytest.mark.parametrize("option", ["auto", "flex"])
@pytest.mark.parametrize("encoding", OWN_ATTENTION, ids=lambda cls: cls.__name__)
def test_the_kernel_is_the_encodings_own(encoding, option):
    pe = encoding(d_model=16, n_heads=2)
    assert pe.has_attention and pe.provides_positions
    assert choose_kernel(pe, option, training=True, device_type="cpu", dropout=0.1) == "encoding"


def test_other_encodings_have_no_attention_of_their_own():
    assert not NoPE(d_model=16, n_heads=2).has_attention


def test_attend_passes_the_keys_state_to_the_encoding():
    pe = ForgettingAttention(d_model=16, n_heads=2)
    q, k, v = (torch.randn(1, 2, 5, 8) for _ in range(3))
    strong = torch.full((1, 2, 5), -30.0)  # f ≈ 0: every query sees only itself
    out = attend(q, k, v, causal=True, pe=pe, q_state=strong, k_state=strong)
    torch.testing.assert_close(out, v)


def test_cache_keeps_the_keys_states_beside_them():
    cache = KVCache(torch.arange(6))
    first = (torch.randn(1, 2, 4, 3), torch.randn(1, 2, 4))  # (w, β) of 4 tokens
    second = (torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2))
    cache.append(torch.randn(1, 2, 4, 3), torch.randn(1, 2, 4, 3), first)
    cache.append(torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3), second)
    w, beta = cache.key_state()
    torch.testing.assert_close(w, torch.cat((first[0], second[0]), dim=2))
    torch.testing.assert_close(beta, torch.cat((first[1], second[1]), dim=2))


def test_cache_returns_one_tensor_for_a_state_of_one_tensor():
    cache = KVCache(torch.arange(3))
    gates = torch.randn(1, 2, 3)
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4), gates)
    torch.testing.assert_close(cache.key_state(), gates)


def test_cache_without_states_has_none():
    cache = KVCache(torch.arange(3))
    cache.append(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    assert cache.key_state() is None
