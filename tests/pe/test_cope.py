"""CoPE (Golovneva et al. 2024) against hand computations and an independent loop reference."""

from __future__ import annotations

import math

import pytest
import torch

from lengen.model import DecoderOnly
from lengen.model.kernels import attend
from lengen.pe import NoPE
from lengen.pe.cope import CoPE, cope_positions, interpolated_logits

pytestmark = pytest.mark.usefixtures("single_thread")


def make(npos_max=8, seed=0, **kwargs):
    kwargs = {"d_model": 16, "n_heads": 2, "causal": True, **kwargs}
    pe = CoPE(npos_max=npos_max, **kwargs)
    with torch.no_grad():
        pe.embeddings.copy_(
            torch.randn(pe.embeddings.shape, generator=torch.Generator().manual_seed(seed))
        )
    return pe


def test_positions_count_gates_from_key_to_query():
    logits = torch.tensor([[0.0, 0.0, float("-inf")]])  # query sees keys 0, 1
    expected = torch.tensor([[1.0, 0.5, 0.0]])  # σ(0) = 0.5 per visible key at or after j
    torch.testing.assert_close(cope_positions(logits, npos_max=8), expected)


def test_positions_are_clamped():
    logits = torch.full((1, 20), 50.0)  # every gate ≈ 1: counts 20 … 1
    positions = cope_positions(logits, npos_max=5)
    assert positions.max() == 4.0
    torch.testing.assert_close(positions[0, -3:], torch.tensor([3.0, 2.0, 1.0]))


def test_interpolation_is_exact_at_integers_and_linear_between():
    q = torch.randn(1, 1, 1, 4)
    embeddings = torch.randn(4, 6)
    at = lambda p: interpolated_logits(q, embeddings, torch.tensor([[[[p]]]])).item()  # noqa: E731
    exact = (q[0, 0, 0] @ embeddings).tolist()
    assert at(2.0) == pytest.approx(exact[2], abs=1e-5)
    assert at(2.25) == pytest.approx(0.75 * exact[2] + 0.25 * exact[3], abs=1e-5)


def reference_attention(q, k, v, embeddings, npos_max):
    """Loops over (i, j) and the formula of the paper, written independently."""
    _, heads, length, dim = q.shape
    out = torch.zeros_like(q)
    for h in range(heads):
        for i in range(length):
            logits = [float(q[0, h, i] @ k[0, h, j]) / math.sqrt(dim) for j in range(i + 1)]
            gates = [1 / (1 + math.exp(-a)) for a in logits]
            scores = []
            for j in range(i + 1):
                p = min(sum(gates[j : i + 1]), npos_max - 1)
                lo, hi = math.floor(p), math.ceil(p)
                e = (p - lo) * embeddings[:, hi] + (1 - (p - lo)) * embeddings[:, lo]
                scores.append(logits[j] + float(q[0, h, i] @ e))
            weights = torch.softmax(torch.tensor(scores, dtype=torch.float64), 0)
            out[0, h, i] = (weights[:, None].float() * v[0, h, : i + 1]).sum(0)
    return out


@pytest.mark.parametrize("npos_max", [3, 16])
def test_attention_matches_loop_reference(npos_max):
    pe = make(npos_max=npos_max)
    q, k, v = torch.randn(3, 1, 2, 9, 8, generator=torch.Generator().manual_seed(1)).unbind(0)
    positions = torch.arange(9)
    got = attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    expected = reference_attention(q, k, v, pe.embeddings.detach(), npos_max)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


def test_query_blocks_equal_one_block():
    pe = make()
    q, k, v = torch.randn(3, 2, 2, 13, 8).unbind(0)
    positions = torch.arange(13)
    whole = attend(q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions)
    blocks = attend(
        q,
        k,
        v,
        causal=True,
        pe=pe,
        q_positions=positions,
        k_positions=positions,
        max_bias_elements=2 * 13 * 3,
    )
    torch.testing.assert_close(blocks, whole)


def test_fresh_cope_model_equals_nope_model():
    """Embeddings start at zero, as in the reference code."""
    torch.manual_seed(0)
    cope = DecoderOnly(
        pe=lambda **kw: CoPE(npos_max=8, **kw), vocab_size=12, d_model=16, n_heads=2, d_ff=32
    ).eval()
    torch.manual_seed(0)
    nope = DecoderOnly(pe=NoPE, vocab_size=12, d_model=16, n_heads=2, d_ff=32).eval()
    nope.load_state_dict(cope.state_dict(), strict=False)
    tokens = torch.randint(0, 12, (2, 10))
    torch.testing.assert_close(cope(tokens), nope(tokens))


def test_future_tokens_do_not_change_the_past():
    torch.manual_seed(0)
    model = DecoderOnly(
        pe=lambda **kw: make(**kw), vocab_size=12, d_model=16, n_heads=2, d_ff=32
    ).eval()
    tokens = torch.randint(0, 12, (1, 10))
    changed = tokens.clone()
    changed[0, 6] = (changed[0, 6] + 1) % 12
    torch.testing.assert_close(model(tokens)[:, :6], model(changed)[:, :6])


def test_bidirectional_use_is_refused():
    with pytest.raises(ValueError, match=r"^pe: CoPE .*causal"):
        CoPE(d_model=16, n_heads=2, causal=False)


def test_npos_max_is_validated():
    with pytest.raises(ValueError, match=r"^pe\.npos_max"):
        CoPE(d_model=16, n_heads=2, npos_max=1)


def test_gradients_reach_the_embeddings():
    pe = make()
    q, k, v = torch.randn(3, 1, 2, 6, 8).unbind(0)
    positions = torch.arange(6)
    attend(
        q, k, v, causal=True, pe=pe, q_positions=positions, k_positions=positions
    ).sum().backward()
    assert pe.embeddings.grad is not None and pe.embeddings.grad.abs().sum() > 0
