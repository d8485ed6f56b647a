"""DAPE's evaluation path on a CPU (``lengen.model.blocked.tiled_contextual_attention``): key
tiles under an online softmax equal the one-block contextual path, keep causality, are chosen
by ``attend`` only where they apply, and bound the largest tensor by the tile (allocations
counted by the profiler, not timed)."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import lengen.model.kernels as kernels
from lengen.model.blocked import blocked_bias_attention, tiled_contextual_attention
from lengen.pe.cope import CoPE
from lengen.pe.dape import DAPE

pytestmark = pytest.mark.usefixtures("single_thread")

HEADS, HEAD_DIM = 2, 8


def make(bias: str = "alibi", causal: bool = True, **options) -> DAPE:
    torch.manual_seed(0)
    return DAPE(
        d_model=HEADS * HEAD_DIM, n_heads=HEADS, bias=bias, causal=causal, train_positions=8,
        max_positions=512, **options,
    )  # fmt: skip


def qkv(q_len: int, k_len: int, batch: int = 2, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    return tuple(
        torch.randn(batch, HEADS, n, HEAD_DIM, generator=generator, dtype=torch.float64)
        for n in (q_len, k_len, k_len)
    )


def both(pe, q, k, v, *, causal=True, query_block=5, key_tile=6):
    """(tiled, one-block) outputs of the same call."""
    k_positions = torch.arange(k.shape[2])
    common = dict(causal=causal, pe=pe, q_positions=k_positions[-q.shape[2] :],
                  k_positions=k_positions, scale=0.35)  # fmt: skip
    with torch.no_grad():
        tiled = tiled_contextual_attention(
            q, k, v, **common, query_block=query_block, key_tile=key_tile
        )
        one_block = blocked_bias_attention(q, k, v, **common, query_block=q.shape[2])
    return tiled, one_block


@pytest.mark.parametrize("bias", ["alibi", "kerple", "fire"])
@pytest.mark.parametrize(("query_block", "key_tile"), [(5, 6), (3, 1), (40, 64)])
def test_tiles_equal_one_block(bias, query_block, key_tile):
    # logits are fp32 inside DAPE (its MLP), so the two sums agree to fp32 rounding
    tiled, one_block = both(make(bias), *qkv(40, 40), query_block=query_block, key_tile=key_tile)
    torch.testing.assert_close(tiled, one_block, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("causal", "q_len", "options"),
    [(True, 9, {}), (False, 40, {}), (True, 40, {"window": 7}), (False, 40, {"window": 7}),
     (True, 40, {"chunk": 8})],
)  # fmt: skip
def test_tiles_equal_one_block_for_cached_bidirectional_and_local_calls(causal, q_len, options):
    pe = make(causal=causal, **options)
    tiled, one_block = both(pe, *qkv(q_len, 40), causal=causal)
    torch.testing.assert_close(tiled, one_block, rtol=1e-5, atol=1e-5)


def test_tiles_take_values_narrower_than_queries():
    q, k, v = qkv(20, 20)
    tiled, one_block = both(make(), q, k, v[..., :3])
    torch.testing.assert_close(tiled, one_block, rtol=1e-5, atol=1e-5)


def test_tiles_are_causal():
    """New keys and values after token 20 leave the outputs up to token 20 alone."""
    pe = make()
    q, k, v = qkv(32, 32)
    changed_k, changed_v = k.clone(), v.clone()
    changed_k[:, :, 21:] += 1.0
    changed_v[:, :, 21:] -= 1.0
    before, _ = both(pe, q, k, v)
    after, _ = both(pe, q, changed_k, changed_v)
    torch.testing.assert_close(after[:, :, :21], before[:, :, :21])
    assert not torch.allclose(after[:, :, 21:], before[:, :, 21:])


def test_attend_tiles_dape_only_evaluating_on_a_cpu_past_one_tile(monkeypatch):
    calls = []
    original = kernels.tiled_contextual_attention

    def recording(*arguments, **keywords):
        calls.append(keywords["key_tile"])
        return original(*arguments, **keywords)

    monkeypatch.setattr(kernels, "tiled_contextual_attention", recording)
    monkeypatch.setattr(kernels, "CONTEXTUAL_KEY_TILE", 8)
    positions = torch.arange(20)
    common = dict(causal=True, q_positions=positions, k_positions=positions)
    q, k, v = (t.float() for t in qkv(20, 20))
    with torch.no_grad():
        tiled = kernels.attend(q, k, v, pe=make(), **common)
        kernels.attend(q, k, v, pe=make(), **common, dropout_p=0.1)  # dropout: no tiles
        kernels.attend(q[:, :, :6], k[:, :, :6], v[:, :, :6], pe=make(),
                       causal=True, q_positions=positions[:6], k_positions=positions[:6])  # fmt: skip
        torch.manual_seed(0)
        kernels.attend(q, k, v, pe=CoPE(d_model=16, n_heads=HEADS, causal=True), **common)
    assert calls == [8]  # DAPE past one tile only: not with dropout, ≤ 8 keys, nor CoPE
    reference = kernels.attend(q, k, v, pe=make(), **common)  # with gradients: no tiles
    assert calls == [8]
    torch.testing.assert_close(tiled, reference.detach(), rtol=1e-5, atol=1e-5)


def largest_allocation(fn) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    return max(e.nbytes() for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")


def test_the_tile_bounds_the_largest_tensor_whatever_the_length():
    """Blocks of 4 queries, tiles of 8 keys: the MLP's hidden layer is (B, 4, 8, 32) fp32
    at every length, so the largest allocation is a per-token tensor (the output, B·H·T·hd
    float64) at 256 tokens; the one-block path's (B, 4, Tk, 32) hidden layer passes it."""
    pe = make()
    q, k, v = qkv(256, 256, batch=1)
    positions = torch.arange(256)
    common = dict(causal=True, pe=pe, q_positions=positions, k_positions=positions, scale=0.35)
    per_token = 1 * HEADS * 256 * HEAD_DIM * 8
    with torch.no_grad():
        tiled = largest_allocation(
            lambda: tiled_contextual_attention(q, k, v, **common, query_block=4, key_tile=8)
        )
        one_block = largest_allocation(
            lambda: blocked_bias_attention(q, k, v, **common, query_block=4)
        )
    assert tiled <= per_token
    assert one_block > per_token
