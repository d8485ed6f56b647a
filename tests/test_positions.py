"""Options every encoding takes: randomized positions (Ruoss et al. 2023) and the log-length
attention scale (Chiang & Cholak 2022)."""

from __future__ import annotations

import functools
import math

import pytest
import torch

from helpers import compose_train
from lengen.config import ConfigError
from lengen.model import DecoderOnly
from lengen.pe import ALiBi, NoPE, RoPE
from lengen.train import build

pytestmark = pytest.mark.usefixtures("single_thread")


def randomized(pe=RoPE, **kwargs):
    options = dict(randomized=True, max_position=256, train_positions=33, max_positions=65)
    return pe(d_model=32, n_heads=4, causal=True, **{**options, **kwargs})


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
    """ALiBi's distances come from the drawn positions, not from token indices."""
    pe = randomized(ALiBi).eval()
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
    assert model.stack.pe.randomized and model.stack.pe.max_position == 500


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
    from lengen.model.attention import attend

    pe = NoPE(d_model=32, n_heads=4, train_positions=4, log_length_scale=True)
    q, k, v = torch.randn(3, 1, 4, 16, 8).unbind(0)
    factor = math.log(16) / math.log(4)
    expected = torch.softmax(factor * q @ k.transpose(-1, -2) / math.sqrt(8), -1) @ v
    torch.testing.assert_close(attend(q, k, v, causal=False, pe=pe), expected)


@pytest.mark.parametrize("key", ["pe.randomized", "pe.log_length_scale", "pe.randomized_eval"])
def test_boolean_options_reject_non_booleans(key):
    with pytest.raises(ConfigError, match=f"^{key}"):
        build(compose_train("pe=rope", f"{key}=3"))
