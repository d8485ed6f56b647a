"""The evaluation paths (no autograd) of FoX, stick-breaking and PaTH against their gradient
paths, in float64: the same outputs, causality kept, and memory bounded by the block or tile
(counted from the profiler's allocation events, not timed)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from lengen.pe.fox import forgetting_attention
from lengen.pe.path import path_attention
from lengen.pe.stick_breaking import stick_breaking_attention, tiled_stick_breaking

pytestmark = pytest.mark.usefixtures("single_thread")


def random(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def gates(*shape, seed: int) -> torch.Tensor:
    return F.logsigmoid(random(*shape, seed=seed) + 1.0)


def grad_path(fn, q, *rest, **keywords):
    """fn through its gradient path: q requires grad (the output is detached)."""
    return fn(q.clone().requires_grad_(), *rest, **keywords).detach()


def allocations(fn) -> list[int]:
    """The sizes in bytes of the CPU allocations ``fn()`` makes, in order."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    )
    return [nbytes for _, nbytes in events if nbytes > 0]


def live_peak(fn) -> int:
    """The peak of live bytes ``fn()`` reaches above its start (allocations minus frees)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    live = peak = 0
    for _, nbytes in sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]"
    ):
        live += nbytes
        peak = max(peak, live)
    return peak


# -- the same outputs ------------------------------------------------------------------------
@pytest.mark.parametrize("queries", [29, 9])  # a full pass, and the last queries (cached)
@pytest.mark.parametrize("max_elements", [2 * 2 * 4 * 29, 10**6])  # blocks of 4 queries, one
def test_fox_buffer_path_equals_the_gradient_path(queries, max_elements):
    q, k, v = (
        random(2, 2, queries, 4, seed=0),
        random(2, 2, 29, 4, seed=1),
        random(2, 2, 29, 4, seed=2),
    )
    log_forget = gates(2, 2, 29, seed=3)
    keywords = dict(causal=True, scale=0.5, max_elements=max_elements)
    expected = grad_path(forgetting_attention, q, k, v, log_forget, **keywords)
    torch.testing.assert_close(forgetting_attention(q, k, v, log_forget, **keywords), expected)


@pytest.mark.parametrize("attend_current", [False, True])
@pytest.mark.parametrize("remainder", ["current_value", "none"])
@pytest.mark.parametrize("queries", [37, 11])
@pytest.mark.parametrize(
    ("key_tile", "max_elements"), [(1, 1), (5, 2 * 2 * 5 * 3), (8, 10**6), (64, 10**6)]
)
def test_stick_breaking_tiles_equal_one_block(
    attend_current, remainder, queries, key_tile, max_elements
):
    q, k, v = (
        random(2, 2, queries, 4, seed=0),
        random(2, 2, 37, 4, seed=1),
        random(2, 2, 37, 4, seed=2),
    )
    keywords = dict(scale=0.7, attend_current=attend_current, remainder=remainder)
    expected = grad_path(stick_breaking_attention, q, k, v, **keywords, max_elements=10**6)
    got = tiled_stick_breaking(q, k, v, **keywords, key_tile=key_tile, max_elements=max_elements)
    torch.testing.assert_close(got, expected)


def test_stick_breaking_tiles_take_values_narrower_than_queries():
    """The attention recorder probes the weights with one-hot values of any width."""
    q, k, v = random(1, 2, 20, 4, seed=0), random(1, 2, 20, 4, seed=1), random(1, 2, 20, 3, seed=2)
    expected = grad_path(stick_breaking_attention, q, k, v, scale=0.5)
    torch.testing.assert_close(tiled_stick_breaking(q, k, v, scale=0.5, key_tile=8), expected)


def test_stick_breaking_without_gradients_takes_the_tiles(monkeypatch):
    import lengen.pe.stick_breaking as module

    calls = []
    monkeypatch.setattr(module, "tiled_stick_breaking", lambda *a, **k: calls.append(1))
    q = random(1, 1, 5, 4, seed=0)
    stick_breaking_attention(q, q, q, scale=0.5)
    stick_breaking_attention(q.clone().requires_grad_(), q, q, scale=0.5)  # gradient path
    with torch.no_grad():
        stick_breaking_attention(q.clone().requires_grad_(), q, q, scale=0.5)
    assert len(calls) == 2


@pytest.mark.parametrize("forget_gate", [False, True])
@pytest.mark.parametrize("queries", [40, 17])
@pytest.mark.parametrize("block", [7, 64])
def test_path_buffer_path_equals_the_gradient_path(forget_gate, queries, block):
    q, k, v = (
        random(2, 2, queries, 4, seed=0),
        random(2, 2, 40, 4, seed=1),
        random(2, 2, 40, 4, seed=2),
    )
    w = F.normalize(random(2, 2, 40, 4, seed=3), dim=-1)
    beta = 2 * torch.sigmoid(random(2, 2, 40, seed=4))
    log_forget = gates(2, 2, 40, seed=5) if forget_gate else None
    expected = grad_path(path_attention, q, k, v, w, beta, log_forget, scale=0.6, block=block)
    got = path_attention(q, k, v, w, beta, log_forget, scale=0.6, block=block)
    torch.testing.assert_close(got, expected)


# -- causality -------------------------------------------------------------------------------
def _eval_paths():
    w = F.normalize(random(1, 2, 24, 4, seed=3), dim=-1)
    beta = 2 * torch.sigmoid(random(1, 2, 24, seed=4))
    log_forget = gates(1, 2, 24, seed=5)
    return {
        "fox": lambda q, k, v: forgetting_attention(
            q, k, v, log_forget, causal=True, scale=0.5, max_elements=2 * 5 * 24
        ),
        "stick_breaking": lambda q, k, v: tiled_stick_breaking(
            q, k, v, scale=0.5, key_tile=4, max_elements=2 * 3 * 4
        ),
        "path_fox": lambda q, k, v: path_attention(
            q, k, v, w, beta, log_forget, scale=0.5, block=5
        ),
    }


@pytest.mark.parametrize("name", ["fox", "stick_breaking", "path_fox"])
def test_evaluation_paths_are_causal(name):
    """Changing the keys and values after token 10 leaves the outputs up to token 10 alone."""
    attention = _eval_paths()[name]
    q, k, v = (random(1, 2, 24, 4, seed=s) for s in range(3))
    changed_k, changed_v = k.clone(), v.clone()
    changed_k[:, :, 11:] = random(1, 2, 13, 4, seed=7)
    changed_v[:, :, 11:] = random(1, 2, 13, 4, seed=8)
    before = attention(q, k, v)
    after = attention(q, changed_k, changed_v)
    torch.testing.assert_close(after[:, :, :11], before[:, :, :11])
    assert not torch.allclose(after[:, :, 11:], before[:, :, 11:])


# -- memory ----------------------------------------------------------------------------------
def test_stick_breaking_tiles_bound_the_largest_tensor_whatever_the_length():
    """Tiles of 16 keys and at most 2·16·16 scores: at 128 and at 512 tokens no allocation is
    larger than a tile or a per-token tensor (q, k, v, their reversed copies: 2 × T × 4
    float64); the one-block path's blocks hold 16 queries × all their keys."""
    for length in (128, 512):
        q = random(1, 2, length, 4, seed=0)
        largest = max(
            allocations(
                lambda q=q: tiled_stick_breaking(
                    q, q, q, scale=0.5, key_tile=16, max_elements=2 * 16 * 16
                )
            )
        )
        assert largest <= max(2 * 16 * 16, 2 * length * 4) * 8, length
    one_block = max(allocations(lambda: stick_breaking_attention(
        q.clone().requires_grad_(), q, q, scale=0.5, max_elements=2 * 16 * 512
    )))  # fmt: skip
    assert one_block > 2 * 512 * 4 * 8  # the bound above is one the one-block path misses


def test_fox_holds_one_bias_buffer_not_one_per_block():
    """Blocks of 16 queries over 512 keys: the live peak is one (B, H, 16, Tk) bias buffer,
    the output, the cumulative gates and SDPA's scratch (which grows with the keys up to
    512): under buffer + 4 per-token tensors. One more copy of the last blocks' bias, as the
    per-block path made (the masked bias, its cast), would pass it."""
    q, k, v = (random(1, 2, 512, 4, seed=s) for s in range(3))
    log_forget = gates(1, 2, 512, seed=3)
    keywords = dict(causal=True, scale=0.5, max_elements=2 * 16 * 512)
    buffer = 2 * 16 * 512 * 8  # bytes of one (1, 2, 16, 512) float64 buffer
    per_token = 2 * 512 * 4 * 8  # one (1, 2, 512, 4) float64 tensor
    evaluation = live_peak(lambda: forgetting_attention(q, k, v, log_forget, **keywords))
    assert buffer <= evaluation <= buffer + 4 * per_token


def test_path_holds_one_logits_buffer_not_one_per_block():
    """PaTH-FoX, blocks of 16 tokens over 512: the live peak is one (B, H, 16, Tk) logits
    buffer plus the per-block transforms and per-token tensors (linear in length). One more
    logits-sized tensor at the last blocks (the per-block path's concatenation, its scaled,
    masked and softmax copies) would pass the bound."""
    q, k, v = (random(1, 2, 512, 4, seed=s) for s in range(3))
    w = F.normalize(random(1, 2, 512, 4, seed=3), dim=-1)
    beta = 2 * torch.sigmoid(random(1, 2, 512, seed=4))
    log_forget = gates(1, 2, 512, seed=5)
    buffer = 2 * 16 * 512 * 8
    per_token = 2 * 512 * 4 * 8
    transforms = 2 * 512 * (16 + 16 + 4) * 8  # D N, (W kᵀ), carried keys, per block of 16
    peak = live_peak(lambda: path_attention(q, k, v, w, beta, log_forget, scale=0.5, block=16))
    assert buffer + transforms <= peak <= buffer + transforms + 4 * per_token
