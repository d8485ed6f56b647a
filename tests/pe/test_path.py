"""PaTH attention (Yang et al., 2025) against explicit products of Householder matrices, in
float64: the blockwise algorithm at several block sizes, cached calls, PaTH-FoX, the short
convolution, and gradients to every projection."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lengen.model import DecoderOnly
from lengen.pe.path import PaTH, block_bounds, path_attention, short_convolution

pytestmark = pytest.mark.usefixtures("single_thread")


def random(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def inputs(length: int = 9, heads: int = 2, head_dim: int = 4):
    q, k, v = (random(2, heads, length, head_dim, seed=s) for s in range(3))
    w = F.normalize(random(2, heads, length, head_dim, seed=3), dim=-1)
    beta = 2 * torch.sigmoid(random(2, heads, length, seed=4))  # (0, 2), as the reference
    return q, k, v, w, beta


def product_reference(q, k, v, w, beta, log_forget=None, scale=0.5):
    """logit_ij = scale · (q_iᵀ H_i H_{i−1} ⋯ H_{j+1} k_j + Σ_{l=j+1}^{i} log f_l) with the
    matrices H_s = I − β_s w_s w_sᵀ multiplied out, causal softmax, one (b, h, i) at a time."""
    batch, heads, length, head_dim = q.shape
    eye = torch.eye(head_dim, dtype=torch.float64)
    out = torch.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            householder = [
                eye - beta[b, h, s] * torch.outer(w[b, h, s], w[b, h, s]) for s in range(length)
            ]
            for i in range(length):
                logits = torch.zeros(i + 1, dtype=torch.float64)
                for j in range(i + 1):
                    product = eye
                    for s in range(i, j, -1):  # H_i H_{i−1} ⋯ H_{j+1}
                        product = product @ householder[s]
                    logits[j] = q[b, h, i] @ product @ k[b, h, j]
                    if log_forget is not None:
                        logits[j] += log_forget[b, h, j + 1 : i + 1].sum()
                out[b, h, i] = (logits * scale).softmax(0) @ v[b, h, : i + 1]
    return out


@pytest.mark.parametrize("block", [1, 3, 4, 64])
def test_attention_matches_explicit_householder_products(block):
    q, k, v, w, beta = inputs()
    got = path_attention(q, k, v, w, beta, scale=0.5, block=block)
    torch.testing.assert_close(got, product_reference(q, k, v, w, beta))


def test_path_fox_adds_the_forget_gates_inside_the_scale():
    q, k, v, w, beta = inputs()
    log_forget = F.logsigmoid(random(2, 2, 9, seed=5) + 1.0)
    got = path_attention(q, k, v, w, beta, log_forget, scale=0.5, block=4)
    torch.testing.assert_close(got, product_reference(q, k, v, w, beta, log_forget))


@pytest.mark.parametrize("queries", [1, 2, 5])
def test_last_queries_of_a_cached_call_equal_the_full_pass(queries):
    q, k, v, w, beta = inputs(length=11)
    full = path_attention(q, k, v, w, beta, scale=0.5, block=4)
    last = path_attention(q[:, :, -queries:], k, v, w, beta, scale=0.5, block=4)
    torch.testing.assert_close(last, full[:, :, -queries:])


def test_zero_strength_is_plain_causal_softmax():
    q, k, v, w, _ = inputs()
    got = path_attention(q, k, v, w, torch.zeros(2, 2, 9, dtype=torch.float64), scale=0.5, block=4)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.5)
    torch.testing.assert_close(got, expected)


def test_blocks_start_at_the_first_query():
    assert block_bounds(offset=10, length=12, block=4) == [(0, 2), (2, 6), (6, 10), (10, 12)]
    assert block_bounds(offset=0, length=9, block=4) == [(0, 4), (4, 8), (8, 9)]


def test_short_convolution_is_causal_over_three_tokens():
    x = random(1, 2, 6, 3, seed=6)
    weight = random(6, 3, seed=7)  # (H·hd, width)
    got = short_convolution(x, weight)
    expected = torch.zeros_like(x)
    for h in range(2):
        for d in range(3):
            channel = h * 3 + d
            for t in range(6):
                total = sum(
                    weight[channel, m] * x[0, h, t - 2 + m, d] for m in range(3) if t - 2 + m >= 0
                )
                expected[0, h, t, d] = F.silu(torch.as_tensor(total))
    torch.testing.assert_close(got, expected)


def test_projections_start_as_the_reference():
    """fla's init: weights N(0, 0.02), β's bias 0 (β = 2σ(0) = 1 for a zero input)."""
    torch.manual_seed(0)
    pe = PaTH(d_model=64, n_heads=4, n_layers=2)
    transforms = pe.transforms
    assert transforms.down.shape == (2, 32, 64) and transforms.up.shape == (2, 64, 32)
    for weight in (transforms.down, transforms.up, transforms.conv, transforms.beta_weight):
        assert abs(float(weight.detach().std()) - 0.02) < 0.003
    _, beta = pe.token_state(torch.zeros(1, 3, 64))
    torch.testing.assert_close(beta, torch.ones(1, 4, 3))


def test_encoders_are_refused_in_one_line():
    with pytest.raises(
        ValueError, match=r"^pe: PaTH is defined for causal attention only; allowed: model=decoder"
    ):
        PaTH(d_model=16, n_heads=2, causal=False)


@pytest.mark.parametrize("forget_gate", [False, True])
def test_gradients_reach_every_projection(forget_gate):
    torch.manual_seed(0)
    model = DecoderOnly(
        pe=lambda **kw: PaTH(forget_gate=forget_gate, **kw),
        vocab_size=11,
        d_model=16,
        n_layers=2,
        n_heads=2,
        d_ff=32,
    )
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    model(tokens).square().mean().backward()
    names = [name for name, _ in model.stack.pe.named_parameters()]
    assert ("gate.weight" in names) is forget_gate
    for name, parameter in model.stack.pe.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name
