"""Stick-breaking attention (Tan et al., 2025) against loops written from the formula, in
float64: the reference's default (keys before the query, left-over weight to the query's own
value) and its options."""

from __future__ import annotations

import pytest
import torch

from lengen.model import DecoderOnly
from lengen.pe.stick_breaking import StickBreaking, stick_breaking_attention

pytestmark = pytest.mark.usefixtures("single_thread")


def random(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def loop_reference(q, k, v, scale, attend_current: bool, remainder: bool):
    """A_ij = β_ij ∏_{j<m<i} (1 − β_im) (m ≤ i with attend_current), β = σ(scale·q_i·k_j), one
    query and key at a time; out_i = Σ_j A_ij v_j (+ (1 − Σ_j A_ij) v_i)."""
    batch, heads, length, _ = q.shape
    out = torch.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            for i in range(length):
                last = i if attend_current else i - 1  # the nearest key that takes part
                beta = [torch.sigmoid(scale * q[b, h, i] @ k[b, h, j]) for j in range(last + 1)]
                total = torch.zeros((), dtype=torch.float64)
                for j in range(last + 1):
                    weight = beta[j]
                    for m in range(j + 1, last + 1):
                        weight = weight * (1 - beta[m])
                    out[b, h, i] += weight * v[b, h, j]
                    total = total + weight
                if remainder:
                    out[b, h, i] += (1 - total) * v[b, h, i]
    return out


@pytest.mark.parametrize("attend_current", [False, True])
@pytest.mark.parametrize("remainder", ["current_value", "none"])
def test_attention_matches_a_loop_over_the_sticks(attend_current, remainder):
    q, k, v = (random(2, 2, 7, 4, seed=s) for s in range(3))
    got = stick_breaking_attention(
        q,
        k,
        v,
        scale=0.7,
        attend_current=attend_current,
        remainder=remainder,
        max_elements=2 * 2 * 3 * 7,  # blocks of 3 queries
    )
    expected = loop_reference(q, k, v, 0.7, attend_current, remainder == "current_value")
    torch.testing.assert_close(got, expected)


def test_last_queries_of_a_cached_call_equal_the_full_pass():
    q, k, v = (random(1, 2, 9, 4, seed=s) for s in range(3))
    full = stick_breaking_attention(q, k, v, scale=0.5)
    torch.testing.assert_close(
        stick_breaking_attention(q[:, :, 5:], k, v, scale=0.5), full[:, :, 5:]
    )


def test_large_logits_stay_finite():
    """Log space: β near 0 and 1 (logits ±200) give finite weights, no NaN."""
    q = torch.full((1, 1, 6, 2), 10.0)
    k = torch.tensor([[1.0, 1.0], [-1.0, -1.0]]).repeat(3, 1)[None, None]  # logits ±200
    out = stick_breaking_attention(q, k, k.clone(), scale=10.0)
    assert torch.isfinite(out).all()


def test_the_first_query_outputs_its_own_value():
    """It sees no earlier key: the whole stick is left over, to its own value (reference)."""
    q, k, v = (random(1, 1, 4, 4, seed=s) for s in range(3))
    torch.testing.assert_close(stick_breaking_attention(q, k, v, scale=0.5)[:, :, 0], v[:, :, 0])


def test_bidirectional_stacks_are_refused_in_one_line():
    with pytest.raises(ValueError) as error:
        StickBreaking(d_model=16, n_heads=2, causal=False)
    message = str(error.value)
    assert message.startswith("pe: StickBreaking is defined for causal attention only")
    assert "allowed: model=decoder" in message and "\n" not in message


def test_gradients_reach_queries_and_keys_through_the_sticks():
    torch.manual_seed(0)
    model = DecoderOnly(pe=StickBreaking, vocab_size=11, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    tokens = torch.randint(0, 11, (2, 8), generator=torch.Generator().manual_seed(1))
    model(tokens).square().mean().backward()
    attention = model.stack.blocks[0].attn
    for parameter in (attention.query.weight, attention.key_value.weight):
        assert parameter.grad.abs().sum() > 0
