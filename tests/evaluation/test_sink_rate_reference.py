"""Gu et al.'s Sink^ε_1 (``lengen.evaluation.diagnostics.sink_rate``) against an independent
float64 re-derivation from their reference code, ``sail-sg/Attention-Sink``
``pretrain/eval_sink_pretrain.py``: attention (samples, layers, heads, T, T) of sequences cut
to ``token_length = 64``; ``ratios = torch.arange(num_tokens1, 0, -1)`` along the keys (key j
is seen by T − j queries); ``importance_scores = (attention_scores / ratios).sum(dim=-2)``;
``metric1 = (importance_scores > epsilon).to(torch.float).mean(dim=(1,2))`` with ``epsilon =
0.3``, per sample, then the mean over samples. Attention without normalisation is scored on
the proxy A / Σ_j A (``lit_gpt/inference/model_attn_sim_infer.py``,
``attn_weight_normalized``)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from helpers import compose_train
from lengen.attention_maps import record_attention
from lengen.build import build
from lengen.evaluation.attention import recording_statistics, statistics_of_weights
from lengen.evaluation.diagnostics import (
    sink_rate,
    uniform_first_token_alpha,
    uniform_sink_rate,
)

pytestmark = pytest.mark.usefixtures("single_thread")

#: the reference's token_length and epsilon
TOKENS, EPSILON = 64, 0.3


def reference_sink_rate(attention: torch.Tensor, epsilon: float = EPSILON) -> float:
    """Sink^ε_1 of ``attention`` (S, L, H, T, T), written as the reference code computes it."""
    queries = attention.shape[-2]
    ratios = torch.arange(queries, 0, -1, dtype=torch.float64)  # (T,): queries seeing key j
    importance = (attention.double() / ratios).sum(dim=-2)  # (S, L, H, T)
    return float((importance[..., 0] > epsilon).double().mean(dim=(1, 2)).mean(dim=0))


def proxy(attention: torch.Tensor) -> torch.Tensor:
    """The reference's proxy of unnormalised attention: each query's weights over their sum."""
    return attention / attention.sum(-1, keepdim=True)


def causal_weights(first_token_mass: torch.Tensor, length: int) -> torch.Tensor:
    """(S, L, H, T, T) causal weights: query i > 0 puts mass m on token 0 and 1 − m evenly on
    keys 1 … i; query 0 sees only token 0. ``first_token_mass`` (S, L, H)."""
    query = torch.arange(length, dtype=torch.float64)[:, None]  # (T, 1)
    key = torch.arange(length, dtype=torch.float64)[None, :]  # (1, T)
    rest = ((key >= 1) & (key <= query)) / query.clamp(min=1)  # (T, T): 1/i on keys 1 … i
    mass = first_token_mass.double()[..., None, None]  # (S, L, H, 1, 1)
    weights = (1 - mass) * rest + mass * (key == 0)  # (S, L, H, T, T)
    weights[..., 0, :] = (key == 0).double()  # query 0: all on token 0
    return weights


def lengen_rate(attention: torch.Tensor, normalized: bool = True) -> float:
    """lengen's sink_rate of (S, L, H, T, T) weights, one recorded call per layer."""
    options = {} if normalized else {"normalized": False}
    recorded = [
        statistics_of_weights(attention[:, layer].float(), None, True, **options)
        for layer in range(attention.shape[1])
    ]
    return sink_rate(recorded)


def test_the_threshold_is_applied_to_each_instance_before_the_mean():
    # head (0, 0): α = 0.65 in one sequence and 0.17 in the other; their mean 0.41 passes ε,
    # yet it is a sink in one sequence of two; every other head stays far below ε
    mass = torch.full((2, 2, 3), 0.02)
    mass[0, 0, 0], mass[1, 0, 0] = 0.64, 0.16
    attention = causal_weights(mass, 8)
    pooled = (attention[..., 0].mean(-1).mean(0) > EPSILON).double().mean()  # the old form
    assert reference_sink_rate(attention) == pytest.approx(1 / 12) and pooled == 1 / 6
    assert_close(lengen_rate(attention), reference_sink_rate(attention), atol=5e-5, rtol=0)


def test_the_rate_of_random_causal_softmax_at_64_tokens_is_the_references():
    torch.manual_seed(0)
    samples, layers, heads = 5, 3, 4
    logits = torch.randn(samples, layers, heads, TOKENS, TOKENS, dtype=torch.float64)
    # a first-token logit boost that differs per head and sequence, so α straddles ε
    logits[..., 0] += 6 * torch.rand(samples, layers, heads, 1, dtype=torch.float64)
    causal = torch.ones(TOKENS, TOKENS, dtype=torch.bool).tril()
    attention = torch.softmax(logits.masked_fill(~causal, -math.inf), dim=-1)
    expected = reference_sink_rate(attention)
    assert 0 < expected < 1  # the case is not trivial
    assert_close(lengen_rate(attention), expected, atol=5e-5, rtol=0)


def test_unnormalised_attention_is_scored_on_the_references_proxy():
    # weights that sum to 0.2 per query: raw, no head would pass ε; as the proxy, head 0 does
    mass = torch.tensor([[[0.9, 0.05]]])  # (S=1, L=1, H=2)
    attention = 0.2 * causal_weights(mass, TOKENS)
    assert reference_sink_rate(proxy(attention)) == 0.5 and reference_sink_rate(attention) == 0
    assert_close(lengen_rate(attention, normalized=False), 0.5, atol=5e-5, rtol=0)


def test_the_uniform_baseline_is_no_sink_at_64_tokens_but_a_sink_at_8():
    # uniform causal attention: α = H_T / T (harmonic number), 0.074 at 64 and 0.340 at 8
    for length, expected in ((TOKENS, 0.0), (8, 1.0)):
        uniform = torch.ones(length, length, dtype=torch.float64).tril()
        attention = proxy(uniform).expand(2, 1, 3, length, length)
        assert reference_sink_rate(attention) == expected
        assert uniform_sink_rate(length) == expected
        assert_close(uniform_first_token_alpha(length), float(attention[0, 0, 0, :, 0].mean()))


@pytest.mark.parametrize(
    "overrides, normalized",
    [((), True), (("model.kv_bias=true",), True), (("model.attn_fn=sigmoid",), False)],
    ids=["rope", "kv_bias", "sigmoid"],
)
def test_a_models_recorded_alphas_and_rate_are_the_references_on_its_maps(overrides, normalized):
    cfg = compose_train("data.len=6", "model.d_model=32", "pe=rope", *overrides)
    data, model, _ = build(cfg)
    inputs = next(iter(data.eval_batches(12, 3, 3)))["inputs"]  # 3 instances of 12 symbols
    with torch.no_grad():
        maps = torch.stack(record_attention(model, inputs), dim=1)  # (S, L, H, T, T)
        with recording_statistics() as recorded:
            model.eval()(**inputs)
    scored = maps.double() if normalized else proxy(maps.double())
    ratios = torch.arange(scored.shape[-2], 0, -1, dtype=torch.float64)
    importance = (scored / ratios).sum(dim=-2)[..., 0]  # (S, L, H): the reference's α
    alphas = torch.stack([stats.first_token_by_instance() for stats in recorded], dim=1)
    assert_close(alphas, importance, atol=1e-6, rtol=1e-5)
    assert_close(sink_rate(recorded), reference_sink_rate(scored), atol=5e-5, rtol=0)
