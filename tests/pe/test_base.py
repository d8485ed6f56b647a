"""``lengen.pe.base``: the options every encoding takes, implemented once in
``PositionalEncoding``: randomized positions (Ruoss et al. 2023) and the log-length attention
scale (Chiang & Cholak 2022).

Randomized relative encodings are checked against Ruoss et al.'s reference code
(google-deepmind/randomized_positional_encodings, ``models/positional_encodings.py``,
``compute_noisy_alibi_encodings_biases``): offsets 1 … T−1 get a sorted random subset of the
distances [1, max_position), offset 0 keeps 0, so the bias is Toeplitz. The log-length scale is
per query in causal attention (the prefix property over every pe yaml is in
test_invariants.py).
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from torch import Tensor

from helpers import compose_train
from lengen.build import build
from lengen.config import ConfigError
from lengen.model import DecoderOnly
from lengen.model.kernels import attend
from lengen.pe import FIRE, KERPLE, ALiBi, NoPE, RoPE, Sandwich, T5RelativeBias
from lengen.pe.fire import fire_log_transform

pytestmark = pytest.mark.usefixtures("single_thread")


# -- randomized positions --------------------------------------------------------------------
def randomized(pe=RoPE, **kwargs):
    options = dict(
        causal=True, randomized=True, max_position=256, train_positions=33, max_positions=65
    )
    return pe(d_model=32, n_heads=4, **{**options, **kwargs})


def test_default_positions_are_a_range():
    pe = RoPE(d_model=32, n_heads=4)
    torch.testing.assert_close(pe.positions(7), torch.arange(7))


@pytest.mark.parametrize("length", [1, 10, 65, 256])
def test_randomized_training_positions_sorted_unique_in_range(length):
    positions = randomized().train().positions(length)
    assert positions.shape == (length,)
    assert torch.all(positions[1:] > positions[:-1])  # sorted and unique
    assert positions.min() >= 0 and positions.max() < 256


def test_randomized_training_positions_deterministic_under_seed():
    pe = randomized().train()
    torch.manual_seed(5)
    first = pe.positions(20)
    torch.manual_seed(5)
    torch.testing.assert_close(pe.positions(20), first)


def test_randomized_training_positions_change_between_batches():
    pe = randomized().train()
    assert not torch.equal(pe.positions(20), pe.positions(20))


def test_randomized_training_positions_are_not_just_a_range():
    positions = randomized().train().positions(32)
    assert positions.max() > 31


def test_randomized_eval_uses_one_fixed_subset_per_length():
    pe = randomized().eval()
    first = pe.positions(40)
    torch.testing.assert_close(pe.positions(40), first)
    assert first.max() > 39


def test_randomized_eval_false_evaluates_on_a_range():
    pe = randomized(randomized_eval=False).eval()
    torch.testing.assert_close(pe.positions(40), torch.arange(40))


def test_randomized_needs_max_position_covering_the_run():
    with pytest.raises(ValueError, match=r"^pe\.max_position"):
        randomized(max_position=64)  # the run sees 65 positions
    with pytest.raises(ValueError, match=r"^pe\.max_position"):
        randomized(max_position=None)


def test_randomized_positions_reach_the_bias():
    """Under randomized_relative=positions, ALiBi's distances are those of the drawn
    positions, not of token indices."""
    pe = randomized(ALiBi, randomized_relative="positions").eval()
    positions = pe.positions(5)
    bias = pe.attention_bias(positions, positions)
    expected = -pe.slopes[:, None, None] * (positions[:, None] - positions[None, :]).abs()
    torch.testing.assert_close(bias, expected)


def test_model_uses_randomized_positions():
    """A RoPE decoder's logits under randomized positions equal those at the drawn positions."""
    torch.manual_seed(0)
    options = dict(randomized=True, max_position=256, train_positions=33, max_positions=65)
    model = DecoderOnly(
        pe=functools.partial(RoPE, **options), vocab_size=11, d_model=32, n_heads=4, d_ff=64
    ).eval()
    tokens = torch.randint(0, 11, (2, 9))
    drawn = model.stack.pe.positions(9)
    torch.testing.assert_close(model(tokens), model(tokens, positions=drawn))
    assert not torch.allclose(model(tokens), model(tokens, positions=torch.arange(9)))


def test_randomized_run_config_is_validated_before_training():
    with pytest.raises(ConfigError, match=r"^pe\.max_position"):
        build(compose_train("pe=rope", "pe.randomized=true", "pe.max_position=10"))


def test_randomized_option_reaches_the_encoding_from_the_config():
    _, model, _ = build(compose_train("pe=alibi", "pe.randomized=true", "pe.max_position=500"))
    assert model.stack.pe.cfg.randomized and model.stack.pe.cfg.max_position == 500


@pytest.mark.parametrize("key", ["pe.randomized", "pe.log_length_scale", "pe.randomized_eval"])
def test_boolean_options_reject_non_booleans(key):
    with pytest.raises(ConfigError, match=f"^{key}"):
        build(compose_train("pe=rope", f"{key}=3"))


# -- randomized relative encodings: the reference code's randomized distances ----------------
DISTANCE_BIASES = {
    "alibi": ALiBi,
    "t5": T5RelativeBias,
    "kerple": KERPLE,
    "sandwich": Sandwich,
    "fire": FIRE,
}


TOEPLITZ = ["alibi", "t5", "kerple", "sandwich"]  # FIRE also reads the query position


def distances_pe(name: str, causal: bool = True, **kwargs):
    return randomized(
        DISTANCE_BIASES[name], causal=causal, randomized_relative="distances", **kwargs
    )


def drawn_distances(pe, length: int) -> Tensor:
    """The distances d_0 … d_{T−1} of a pass of ``length`` tokens (drawn by ``positions``),
    read back through the public ``relative_distance`` (query δ, key 0)."""
    positions = pe.positions(length)
    return pe.relative_distance(positions, torch.zeros_like(positions))


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("length", [1, 2, 17, 65, 256])
def test_randomized_distances_are_a_sorted_subset_of_the_range(length, training):
    pe = distances_pe("alibi").train(training)
    positions = pe.positions(length)
    torch.testing.assert_close(positions, torch.arange(length))  # tokens keep their indices
    distances = pe.relative_distance(positions, torch.zeros_like(positions))
    assert distances[0] == 0
    assert torch.all(distances[1:] > distances[:-1])  # sorted, distinct
    assert length == 1 or (distances[1] >= 1 and distances[-1] <= 255)  # [1, max_position)


def test_randomized_distances_spread_over_the_range():
    distances = drawn_distances(distances_pe("alibi").eval(), 32)
    assert distances[-1] > 31  # not just the offsets


def test_randomized_distances_fresh_per_training_batch_fixed_per_evaluation_length():
    pe = distances_pe("alibi").train()
    assert not torch.equal(drawn_distances(pe, 20), drawn_distances(pe, 20))
    torch.manual_seed(3)
    first = drawn_distances(pe, 20)
    torch.manual_seed(3)
    torch.testing.assert_close(drawn_distances(pe, 20), first)
    pe.eval()
    torch.testing.assert_close(drawn_distances(pe, 40), drawn_distances(pe, 40))


@pytest.mark.parametrize("name", TOEPLITZ)
@pytest.mark.parametrize("causal", [True, False])
def test_randomized_distance_bias_is_the_plain_bias_at_the_drawn_distance(name, causal):
    """bias(i, j) = b(sign(i − j) · d_|i−j|), b the encoding's bias per offset: Toeplitz."""
    torch.manual_seed(0)
    pe = distances_pe(name, causal=causal).eval()
    plain = DISTANCE_BIASES[name](d_model=32, n_heads=4, causal=causal, train_positions=33)
    plain.load_state_dict(pe.state_dict())
    length = 12
    distances = drawn_distances(pe, length)
    positions = pe.positions(length)  # the same (fixed) draw at evaluation
    offsets = positions[:, None] - positions[None, :]  # (T, T): i − j
    signed = offsets.sign() * distances[offsets.abs()]
    expected = plain.relative_bias_table(signed.flatten()).view(4, length, length)
    bias = pe.attention_bias(positions, positions)  # (H, T, T)
    torch.testing.assert_close(bias, expected)
    for delta in range(-(length - 1), length):  # Toeplitz: constant along every diagonal
        diagonal = bias.diagonal(offset=-delta, dim1=1, dim2=2)  # entries with i − j = δ
        torch.testing.assert_close(diagonal, diagonal[:, :1].expand_as(diagonal))


def test_randomized_alibi_asymmetric_offset_is_the_reference_codes_noisy_alibi():
    # compute_noisy_alibi_encodings_biases (randomize_both_sides=False) for the same draw:
    # keys before the query −m·(d_{i−j} − 0.5), keys after it −m·d_{j−i}, the query itself 0
    pe = distances_pe("alibi", causal=False, bidirectional="asymmetric_offset").eval()
    distances = drawn_distances(pe, 9).tolist()
    positions = pe.positions(9)
    bias = pe.attention_bias(positions, positions)
    for h, slope in enumerate(pe.slopes.tolist()):
        for i in range(9):
            for j in range(9):
                d = distances[abs(i - j)]
                expected = -slope * (d - 0.5) if j < i else -slope * d
                assert bias[h, i, j].item() == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_randomized_fire_uses_drawn_distances_and_query_distance():
    pe = distances_pe("fire").eval()
    with torch.no_grad():
        pe.threshold_multiplier.fill_(5 / pe.init_threshold)  # L = 5: both regimes occur
    distances = drawn_distances(pe, 10)
    positions = pe.positions(10)
    bias = pe.attention_bias(positions, positions).detach()
    c = pe.c.detach()
    for i in range(10):
        for j in range(i + 1):
            query = torch.maximum(distances[i].float(), pe.threshold.detach())
            x = fire_log_transform(distances[i - j], c) / (fire_log_transform(query, c) + 1e-6)
            torch.testing.assert_close(bias[:, i, j], pe.mlp(x).detach())


@pytest.mark.parametrize("name", list(DISTANCE_BIASES))
def test_randomized_positions_option_keeps_distances_of_random_positions(name):
    pe = randomized(DISTANCE_BIASES[name], randomized_relative="positions").eval()
    positions = pe.positions(8)
    assert positions.max() > 7
    offsets = pe.relative_distance(positions[:, None], positions[None, :])
    torch.testing.assert_close(offsets, positions[:, None] - positions[None, :])


def test_randomized_bias_from_the_config_is_toeplitz():
    """A run's ALiBi under pe.randomized=true is the reference code's bias, a function of
    i − j; distances of random positions, |p_i − p_j|, are not."""
    _, model, _ = build(compose_train("pe=alibi", "pe.randomized=true", "pe.max_position=500"))
    pe = model.stack.pe.eval()
    positions = pe.positions(24)
    bias = pe.attention_bias(positions, positions)[0]  # (T, T), head 0
    for delta in range(24):
        diagonal = bias.diagonal(offset=-delta)  # entries with i − j = δ
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))
    assert bias[23, 0] < -pe.slopes[0] * 23  # distances drawn from [1, 500), not the offsets


def test_randomized_relative_is_refused_outside_distance_biases():
    with pytest.raises(ValueError, match=r"^pe\.randomized_relative"):
        RoPE(d_model=32, n_heads=4, randomized_relative="distances")
    with pytest.raises(ValueError, match=r"^pe\.randomized_relative"):
        ALiBi(d_model=32, n_heads=4, randomized_relative="offsets")


def test_randomized_relative_and_length_globality_are_recorded():
    options = distances_pe("alibi").describe_options()
    assert options["randomized_relative"] == "distances"
    assert "length_global" in options


# -- log-length scale ------------------------------------------------------------------------
@pytest.mark.parametrize("pe_class", [NoPE, RoPE, ALiBi])
def test_log_length_scale_is_one_within_training_length(pe_class):
    pe = pe_class(d_model=32, n_heads=4, train_positions=33, log_length_scale=True)
    assert pe.attention_scale(33) == 1.0 and pe.attention_scale(5) == 1.0


def test_log_length_scale_beyond_training_length():
    pe = NoPE(d_model=32, n_heads=4, train_positions=33, log_length_scale=True)
    assert pe.attention_scale(132) == pytest.approx(math.log(132) / math.log(33))


def test_log_length_scale_off_by_default():
    assert NoPE(d_model=32, n_heads=4, train_positions=33).attention_scale(1000) == 1.0


def test_log_length_scale_sharpens_attention_logits():
    """The attention output equals softmax(s · qkᵀ/√d) V with s the log-length factor."""
    from lengen.model.kernels import attend

    pe = NoPE(d_model=32, n_heads=4, train_positions=4, log_length_scale=True)
    q, k, v = torch.randn(3, 1, 4, 16, 8).unbind(0)
    factor = math.log(16) / math.log(4)
    expected = torch.softmax(factor * q @ k.transpose(-1, -2) / math.sqrt(8), -1) @ v
    torch.testing.assert_close(attend(q, k, v, causal=False, pe=pe), expected)


def test_causal_query_scale_counts_the_keys_each_query_sees():
    pe = NoPE(d_model=32, n_heads=4, train_positions=4, log_length_scale=True)
    # 3 queries, the last of 10 keys (7 cached): they see 8, 9, 10 keys
    expected = torch.tensor([max(1.0, math.log(n) / math.log(4)) for n in (8, 9, 10)])
    torch.testing.assert_close(pe.query_scale(3, 10, causal=True), expected)
    full = pe.query_scale(10, 10, causal=True)  # a full pass: query i sees i + 1 keys
    expected = torch.tensor([max(1.0, math.log(n) / math.log(4)) for n in range(1, 11)])
    torch.testing.assert_close(full, expected)


def test_query_scale_is_the_window_float_when_bidirectional_or_within_training():
    pe = NoPE(d_model=32, n_heads=4, train_positions=4, log_length_scale=True)
    assert pe.query_scale(10, 10, causal=False) == pe.attention_scale(10)
    assert pe.query_scale(4, 4, causal=True) == 1.0  # a float: the untouched SDPA path
    off = NoPE(d_model=32, n_heads=4, train_positions=4)
    assert off.query_scale(100, 100, causal=True) == 1.0


def test_causal_log_length_scale_multiplies_each_querys_logits():
    """softmax(s_i · q_i·kᵀ/√d) V with s_i the factor of the i + 1 keys query i sees."""
    pe = NoPE(d_model=32, n_heads=4, train_positions=4, log_length_scale=True)
    q, k, v = torch.randn(3, 2, 4, 16, 8, generator=torch.Generator().manual_seed(0)).unbind(0)
    factor = torch.tensor([max(1.0, math.log(n) / math.log(4)) for n in range(1, 17)])
    logits = factor[:, None] * (q @ k.transpose(-1, -2)) / math.sqrt(8)
    logits = logits.masked_fill(torch.ones(16, 16).triu(1).bool(), float("-inf"))
    expected = torch.softmax(logits, -1) @ v
    torch.testing.assert_close(attend(q, k, v, causal=True, pe=pe), expected)
