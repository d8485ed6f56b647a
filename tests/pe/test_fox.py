"""Forgetting Attention (Lin et al., 2025) against loops written from the formula, in float64:
causal (FoX) and bidirectional (x-transformers' DataDependentAlibi), its gates' initialisation
and their gradients."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lengen.model import DecoderOnly, EncoderOnly
from lengen.pe.fox import ForgettingAttention, forgetting_attention

pytestmark = pytest.mark.usefixtures("single_thread")


def random(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def loop_reference(q, k, v, log_forget, causal: bool):
    """softmax over keys of q_i·k_j/√d + the gates' sum between them, one (b, h, i, j) at a
    time: Σ_{l=j+1}^{i} log f_l for j ≤ i; Σ_{l=i+1}^{j} log f'_l (second gates) for j > i."""
    batch, heads, length, head_dim = q.shape
    out = torch.zeros_like(q)
    for b in range(batch):
        for h in range(heads):
            for i in range(length):
                logits = []
                for j in range(length if not causal else i + 1):
                    logit = float(q[b, h, i] @ k[b, h, j]) / math.sqrt(head_dim)
                    if j <= i:
                        logit += sum(float(log_forget[b, h, s]) for s in range(j + 1, i + 1))
                    else:
                        logit += sum(
                            float(log_forget[b, heads + h, s]) for s in range(i + 1, j + 1)
                        )
                    logits.append(logit)
                weights = torch.tensor(logits, dtype=torch.float64).softmax(0)
                out[b, h, i] = weights @ v[b, h, : len(logits)]
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_attention_matches_a_loop_over_the_gates(causal):
    q, k, v = (random(2, 2, 7, 4, seed=s) for s in range(3))
    gates = 2 if causal else 4  # bidirectional: a second set per head
    log_forget = F.logsigmoid(random(2, gates, 7, seed=3) + 1.0)
    got = forgetting_attention(
        q, k, v, log_forget, causal=causal, scale=0.5, max_elements=2 * 2 * 3 * 7
    )  # blocks of 3 queries
    torch.testing.assert_close(got, loop_reference(q, k, v, log_forget, causal))


def test_last_queries_of_a_cached_call_equal_the_full_pass():
    q, k, v = (random(1, 2, 9, 4, seed=s) for s in range(3))
    log_forget = F.logsigmoid(random(1, 2, 9, seed=4))
    full = forgetting_attention(q, k, v, log_forget, causal=True, scale=0.5)
    last = forgetting_attention(q[:, :, 6:], k, v, log_forget, causal=True, scale=0.5)
    torch.testing.assert_close(last, full[:, :, 6:])


def test_a_constant_gate_is_alibi_with_slope_minus_log_f():
    q, k, v = (random(1, 1, 6, 4, seed=s) for s in range(3))
    gate = torch.tensor(0.8, dtype=torch.float64)
    log_forget = torch.full((1, 1, 6), float(gate.log()), dtype=torch.float64)
    distance = torch.arange(6)[:, None] - torch.arange(6)[None, :]  # i − j
    alibi = (gate.log() * distance).masked_fill(distance < 0, float("-inf"))  # −m·(i − j)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=alibi, scale=0.5)
    got = forgetting_attention(q, k, v, log_forget, causal=True, scale=0.5)
    torch.testing.assert_close(got, expected)


def test_gates_start_as_the_reference():
    """FoX's fgate_proj: weights N(0, 0.02), bias pe.gate_bias_init (FoX's 0)."""
    torch.manual_seed(0)
    pe = ForgettingAttention(d_model=64, n_heads=4, n_layers=3, gate_bias_init=5.0)
    assert pe.gate.weight.shape == (3, 4, 64)
    assert abs(float(pe.gate.weight.detach().std()) - 0.02) < 0.002
    torch.testing.assert_close(pe.gate.bias, torch.full((12,), 5.0))


def test_bidirectional_stacks_get_a_second_set_of_gates():
    pe = ForgettingAttention(d_model=32, n_heads=4, causal=False)
    assert pe.token_state(torch.randn(2, 5, 32)).shape == (2, 8, 5)


def test_layers_have_their_own_gates():
    pe = ForgettingAttention(d_model=16, n_heads=2, n_layers=2)
    x = torch.randn(1, 5, 16)
    assert not torch.equal(pe.for_layer(0).token_state(x), pe.for_layer(1).token_state(x))


@pytest.mark.parametrize("model_class", [DecoderOnly, EncoderOnly])
def test_gradients_reach_every_gate_parameter(model_class):
    torch.manual_seed(0)
    model = model_class(
        pe=ForgettingAttention, vocab_size=11, d_model=32, n_layers=2, n_heads=4, d_ff=64
    )
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    model(tokens).square().mean().backward()
    for name, parameter in model.stack.pe.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name
