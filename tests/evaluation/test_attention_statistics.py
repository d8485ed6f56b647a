"""Attention statistics (``lengen.evaluation.attention``) on hand-built attention matrices, and
the recorder that computes them one block of queries at a time inside a forward pass."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import compose_train
from lengen.build import build
from lengen.evaluation.attention import (
    AttentionStatistics,
    bucket_labels,
    distance_bucket,
    own_attention_weights,
    recording_statistics,
    statistics_of_call,
    statistics_of_weights,
    weights_unavailable,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def statistics(weights: torch.Tensor, causal: bool = False) -> dict:
    """Means of the statistics of weights (B, H, T, T), queries at key indices 0 … T − 1."""
    length = weights.shape[-1]
    query_index = torch.arange(length)[:, None]
    seen = torch.arange(length) <= query_index if causal else None
    stats = AttentionStatistics(weights.shape[1], length)
    stats.add(weights, query_index, seen)
    return stats.means()


def assert_values(actual: list, expected) -> None:
    """Per-head means against reference values, in float64."""
    expected = torch.as_tensor(expected, dtype=torch.float64)
    torch.testing.assert_close(torch.tensor(actual, dtype=torch.float64), expected)


def test_uniform_attention_has_entropy_log_n():
    n = 8
    assert_values(statistics(torch.full((1, 1, n, n), 1 / n))["entropy"], [math.log(n)])


def test_uniform_attention_has_normalized_entropy_one():
    assert_values(statistics(torch.full((1, 2, 5, 5), 1 / 5))["entropy_normalized"], [1.0, 1.0])


def uniform_causal(n: int) -> torch.Tensor:
    weights = torch.tril(torch.ones(n, n))
    return (weights / weights.sum(-1, keepdim=True))[None, None]  # (1, 1, n, n)


def test_uniform_causal_attention_has_entropy_log_of_the_prefix():
    n = 6  # query i sees i + 1 keys: entropy log(i + 1)
    expected = sum(math.log(i + 1) for i in range(n)) / n
    assert_values(statistics(uniform_causal(n), causal=True)["entropy"], [expected])


def test_normalized_entropy_divides_by_the_keys_each_query_sees():
    # uniform over each prefix: 1 for every query but the first (one key), left out of the mean
    assert_values(statistics(uniform_causal(6), causal=True)["entropy_normalized"], [1.0])


def test_one_hot_rows_have_entropy_zero():
    assert_values(statistics(torch.eye(4)[None, None])["entropy"], [0.0])


def test_one_hot_rows_have_largest_weight_one():
    assert_values(statistics(torch.eye(4)[None, None])["max_weight"], [1.0])


def test_sink_mass_is_the_weight_on_the_first_token():
    n = 5
    weights = torch.full((1, 1, n, n), 0.5 / (n - 1))
    weights[..., 0] = 0.5  # half of every row on token 0
    assert_values(statistics(weights)["sink_mass"], [0.5])


def test_distances_fall_in_logarithmic_buckets():
    distances = torch.tensor([0, 1, 2, 3, 4, 7, 8, 15, 16])
    assert distance_bucket(distances).tolist() == [0, 1, 2, 2, 3, 3, 4, 4, 5]


def test_bucket_labels_name_their_distances():
    assert bucket_labels(5) == ["0", "1", "2–3", "4–7", "8–15"]


def test_a_head_looking_five_back_puts_its_mass_in_the_4_to_7_bucket():
    n = 12
    weights = torch.zeros(1, 1, n, n)
    weights[0, 0, torch.arange(5, n), torch.arange(0, n - 5)] = 1.0  # query i on key i − 5
    weights[0, 0, torch.arange(5), torch.arange(5)] = 1.0  # the first five on themselves
    mass = statistics(weights, causal=True)["bucket_mass"][0]  # buckets 0, 1, 2–3, 4–7, 8–15
    assert_values(mass, [5 / n, 0.0, 0.0, (n - 5) / n, 0.0])


def test_blocks_of_queries_give_the_statistics_of_the_whole_matrix():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 40, 8), torch.randn(2, 3, 40, 8)
    whole = statistics_of_call(q, k, causal=True).means()
    blocked = statistics_of_call(q, k, causal=True, max_block_elements=2 * 3 * 40 * 7).means()
    for name, values in whole.items():
        torch.testing.assert_close(torch.tensor(blocked[name]), torch.tensor(values))


def _model(pe: str):
    cfg = compose_train(f"pe={pe}", "model.d_model=32", "data.len=6")
    data, model, _ = build(cfg)
    return data, model.eval()


@pytest.mark.parametrize("pe", ["rope", "alibi", "cope"])
def test_recording_leaves_the_forward_pass_unchanged(pe):
    data, model = _model(pe)
    batch = next(iter(data.eval_batches(12, 4, 4)))
    with torch.no_grad():
        expected = model(**batch["inputs"])
        with recording_statistics() as recorded:
            actual = model(**batch["inputs"])
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert len(recorded) == model.cfg.n_layers


OWN_ATTENTION = ["fox", "stick_breaking", "path", "path_fox"]


def own_attention_call(pe_name: str, causal: bool = True):
    """(attend, q, k, v, kwargs) of the first layer of a small model of ``pe_name``, fp64."""
    from lengen.model.kernels import attend

    torch.manual_seed(0)
    cfg = compose_train(f"pe={pe_name}", "model.d_model=16", "model.n_heads=2", "data.len=6")
    pe = build(cfg)[1].stack.pe.double().eval().for_layer(0)
    x = torch.randn(2, 7, 16, dtype=torch.float64)  # (B, T, D)
    state = pe.token_state(x)
    q, k, v = (torch.randn(2, 2, 7, 8, dtype=torch.float64) for _ in range(3))  # (B, H, T, hd)
    kwargs = {"causal": causal, "pe": pe, "q_state": state, "k_state": state}
    return attend, q, k, v, kwargs


@pytest.mark.parametrize(
    ("pe_name", "causal"), [(name, True) for name in OWN_ATTENTION] + [("fox", False)]
)
def test_own_attention_weights_give_the_kernels_output(pe_name, causal):
    attend, q, k, v, kwargs = own_attention_call(pe_name, causal)
    weights = own_attention_weights(attend, q, k, max_elements=2 * 8 * 7 * 3, **kwargs)
    torch.testing.assert_close(weights.double() @ v, attend(q, k, v, **kwargs))


@pytest.mark.parametrize("pe_name", OWN_ATTENTION)
def test_own_attention_weights_are_causal(pe_name):
    attend, q, k, _, kwargs = own_attention_call(pe_name)
    weights = own_attention_weights(attend, q, k, **kwargs)  # (B, H, 7, 7)
    assert torch.all(weights.triu(1) == 0)


def test_stick_breaking_weights_that_round_below_zero_give_finite_statistics():
    attend, _, _, _, kwargs = own_attention_call("stick_breaking")
    torch.manual_seed(0)
    q, k = (3 * torch.randn(4, 2, 30, 8) for _ in range(2))  # fp32, sharp sticks: 1 − Σ ≈ −1e-7
    weights = own_attention_weights(attend, q, k, **{**kwargs, "q_state": None, "k_state": None})
    assert weights.min() >= 0
    stats = statistics_of_weights(weights, kwargs["pe"], causal=True).means()
    assert all(math.isfinite(value) for value in stats["entropy"])


def test_fox_weights_are_softmax_of_logits_plus_the_summed_log_gates():
    attend, q, k, _, kwargs = own_attention_call("fox")
    log_f = kwargs["k_state"].double()  # (B, H, T): the keys' log forget gates
    i, j = torch.arange(7)[:, None], torch.arange(7)[None, :]
    # Σ_{l=j+1}^{i} log f_l written as a sum over a mask, not a cumulative difference
    between = ((j[..., None] < torch.arange(7)) & (torch.arange(7) <= i[..., None])).double()
    bias = torch.einsum("ijl,bhl->bhij", between, log_f)  # (B, H, T, T)
    logits = (q @ k.transpose(-1, -2)) / math.sqrt(8) + bias
    expected = torch.softmax(logits.masked_fill(j > i, float("-inf")), dim=-1)
    torch.testing.assert_close(own_attention_weights(attend, q, k, **kwargs).double(), expected)


def test_own_attention_weights_are_refused_beyond_their_budget():
    class Attending:
        has_attention = True

    small, large = torch.zeros(1, 2, 64, 4), torch.zeros(4, 4, 2048, 4)
    assert weights_unavailable(Attending(), small, small) is None
    assert "one-hot values" in weights_unavailable(Attending(), large, large)


def test_the_recorder_measures_encodings_that_attend_themselves():
    data, model = _model("stick_breaking")
    batch = next(iter(data.eval_batches(12, 4, 4)))
    with torch.no_grad(), recording_statistics() as recorded:
        model(**batch["inputs"])
    assert [type(stats) for stats in recorded] == [AttentionStatistics] * model.cfg.n_layers
