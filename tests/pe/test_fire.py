"""pe=fire (``lengen.pe.fire``) against Li et al. 2023.

The reference is written here independently of lengen, in float64 Python from the module's own
parameters: f_θ(ψ(|i − j|) / (ψ(max(L, i)) + 1e-6)) with ψ(x) = log(|c x| + 1) and f_θ the
per-head MLP. The threshold L defaults to the paper's ratio to the training length.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import compose_train
from lengen.build import build
from lengen.config import ConfigError
from lengen.pe.fire import FIRE

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent reference -------------------------------------------------------------------
def reference_fire(pe: FIRE, i: int, j: int) -> list[float]:
    """f_θ(ψ(|i − j|) / (ψ(max(L, i)) + 1e-6)) with ψ(x) = log(|c x| + 1), per head, from the
    module's own parameters, in float64 Python."""
    c = pe.c.item()
    threshold = abs(pe.threshold_multiplier.item()) * pe.init_threshold
    x = math.log(abs(c * abs(i - j)) + 1) / (math.log(abs(c * max(threshold, i)) + 1) + 1e-6)
    return reference_mlp(pe, x)


def reference_mlp(pe: FIRE, x: float) -> list[float]:
    w_in, b_in = pe.mlp_in_weight.tolist(), pe.mlp_in_bias.tolist()
    w_out, b_out = pe.mlp_out_weight.tolist(), pe.mlp_out_bias.tolist()
    hidden = [max(0.0, x * w + b) for w, b in zip(w_in, b_in, strict=True)]
    return [
        sum(w * h for w, h in zip(row, hidden, strict=True)) + b
        for row, b in zip(w_out, b_out, strict=True)
    ]


# -- bias ------------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
def test_fire_zero_distance_is_f_of_zero_for_every_query(causal):
    pe = FIRE(d_model=32, n_heads=4, causal=causal)
    positions = torch.tensor([0, 1, 5, 511, 512, 513, 4096, 100_000])
    diagonal = pe.attention_bias(positions, positions).diagonal(dim1=1, dim2=2)  # (H, T)
    f_of_zero = torch.tensor(reference_mlp(pe, 0.0))
    torch.testing.assert_close(diagonal, f_of_zero[:, None].expand(4, len(positions)))


# (query, key): below, at and beyond the threshold, up to distance 100,000
PAIRS = [(0, 0), (3, 0), (3, 2), (100, 1), (511, 0), (512, 100), (600, 0), (600, 599)]


PAIRS += [(5000, 2500), (100_000, 0), (100_000, 99_999)]


@pytest.mark.parametrize("threshold_multiplier", [1.0, 0.01])
@pytest.mark.parametrize("c", [0.1, 2.5])
def test_fire_matches_hand_computation(c, threshold_multiplier):
    # L = 512 (the paper's) and L = 5.12, so that both regimes i < L and i ≥ L are covered
    pe = FIRE(d_model=32, n_heads=4, causal=True)
    with torch.no_grad():
        pe.c.fill_(c)
        pe.threshold_multiplier.fill_(threshold_multiplier)
    for i, j in PAIRS:
        bias = pe.score_bias(torch.arange(4), torch.tensor(i), torch.tensor(j))
        expected = torch.tensor(reference_fire(pe, i, j))
        torch.testing.assert_close(bias, expected, rtol=1e-5, atol=1e-5)


def test_fire_interpolates_beyond_threshold():
    # for i ≥ L the normaliser is ψ(i): the farthest key (j = 0) always maps to 1, so its bias is
    # f_θ(1) at every query position; below L it is f_θ(ψ(i)/ψ(L)), which varies with i
    pe = FIRE(d_model=32, n_heads=4, causal=True)
    with torch.no_grad():
        pe.threshold_multiplier.fill_(64 / 512)  # L = 64
    queries = torch.tensor([64, 100, 1000, 100_000])
    bias = pe.attention_bias(queries, torch.tensor([0]))[:, :, 0]  # (H, 4)
    f_of_one = torch.tensor(reference_mlp(pe, 1.0))
    torch.testing.assert_close(bias, f_of_one[:, None].expand(4, 4), rtol=1e-5, atol=1e-5)
    below = pe.attention_bias(torch.tensor([8, 32]), torch.tensor([0]))[:, :, 0]
    assert not torch.allclose(below[:, 0], below[:, 1])


def test_fire_depends_only_on_offset_below_threshold():
    pe = FIRE(d_model=32, n_heads=4, causal=True)  # L = 512
    positions = torch.arange(40)
    torch.testing.assert_close(
        pe.attention_bias(positions + 400, positions + 400), pe.attention_bias(positions, positions)
    )


def test_fire_non_causal_uses_absolute_distance():
    pe = FIRE(d_model=32, n_heads=4, causal=False)
    query = torch.tensor([50])
    before = pe.attention_bias(query, 50 - torch.arange(1, 20))
    after = pe.attention_bias(query, 50 + torch.arange(1, 20))
    torch.testing.assert_close(before, after, rtol=0, atol=0)


def test_fire_broadcast_shape_and_finite_at_long_distance():
    pe = FIRE(d_model=48, n_heads=6, causal=True)
    heads = torch.arange(6)[:, None, None]  # (H, 1, 1)
    q_positions = torch.tensor([0, 99_999, 100_000])[None, :, None]  # (1, Tq, 1)
    k_positions = torch.tensor([0, 1, 50_000, 100_000])[None, None, :]  # (1, 1, Tk)
    bias = pe.score_bias(heads, q_positions, k_positions)
    assert bias.shape == (6, 3, 4)
    assert bias.dtype == torch.float32
    assert torch.isfinite(bias).all()


def test_fire_input_is_monotone_in_distance_and_bounded_past_the_threshold():
    """At initialisation (c = 0.1, L = 512) the MLP's input ψ(i−j)/ψ(max(L, i)) grows strictly
    with the distance for a fixed query and stays in [0, 1] for queries past L."""
    from lengen.pe.fire import fire_normalized_distance

    pe = FIRE(d_model=32, n_heads=4, causal=True)
    for query in (100, 512, 5_000, 100_000):
        keys = torch.arange(query, -1, -1)  # distances 0 … query
        x = fire_normalized_distance(torch.tensor(query), keys, pe.c, pe.threshold)
        assert torch.all(x[1:] > x[:-1])
        if query >= 512:
            assert x[0] == 0 and x[-1] <= 1.0 + 1e-6


def test_fire_initialisation_follows_paper():
    pe = FIRE(d_model=32, n_heads=4)
    assert pe.c.item() == pytest.approx(0.1)
    assert pe.threshold.item() == pytest.approx(512.0)
    assert pe.mlp_in_weight.shape == (32,) and pe.mlp_out_weight.shape == (4, 32)
    assert pe.mlp_in_weight.abs().max() <= 1.0
    assert pe.mlp_out_weight.abs().max() <= 32**-0.5


def test_fire_gradient_reaches_mlp_c_and_threshold():
    pe = FIRE(d_model=32, n_heads=4, causal=True)
    pe.attention_bias(torch.arange(30), torch.arange(30)).square().sum().backward()
    for parameter in (pe.c, pe.threshold_multiplier, pe.mlp_in_weight, pe.mlp_out_weight):
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"mlp_width": 0}, "pe.mlp_width"),
        ({"init_c": 0.0}, "pe.init_c"),
        ({"init_threshold": -1.0}, "pe.init_threshold"),
    ],
)
def test_fire_bad_options_raise_naming_the_key(options, key):
    with pytest.raises(ValueError, match="^" + key.replace(".", r"\.")):
        FIRE(d_model=32, n_heads=4, **options)


# -- the threshold sized from the run's training positions -----------------------------------
@pytest.mark.parametrize(
    ("train_positions", "expected"), [(None, 512.0), (10, 2.5), (34, 8.5), (258, 64.5)]
)
def test_fire_default_threshold_keeps_the_papers_ratio(train_positions, expected):
    # the paper: L₀ = 512 for 2,048-token training, i.e. train_positions / 4
    pe = FIRE(d_model=32, n_heads=4, train_positions=train_positions)
    assert pe.init_threshold == expected
    assert pe.threshold.item() == pytest.approx(expected)
    assert pe.describe()["init_threshold"] == expected
    assert pe.describe()["init_threshold_from"] != "given"


def test_fire_explicit_threshold_is_used_as_given():
    fire = FIRE(d_model=32, n_heads=4, train_positions=258, init_threshold=512)
    assert fire.init_threshold == 512.0 and fire.describe()["init_threshold_from"] == "given"


def test_fire_default_threshold_interpolates_within_training():
    # with L₀ = train_positions / 4 queries past a quarter of training see ψ(i) as normaliser:
    # the farthest key maps to 1 at every query ≥ L, as the paper's interpolation intends
    pe = FIRE(d_model=32, n_heads=4, causal=True, train_positions=34)
    queries = torch.tensor([9, 20, 33])
    x = pe.attention_bias(queries, torch.tensor([0]))[:, :, 0]  # (H, 3)
    f_of_one = torch.tensor(reference_mlp(pe, 1.0))
    torch.testing.assert_close(x, f_of_one[:, None].expand(4, 3), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", ["0", "-3", "true", "far"])
def test_fire_bad_init_threshold_is_refused_in_one_line(value):
    with pytest.raises(ConfigError, match=r"^pe\.init_threshold must be") as caught:
        build(compose_train("pe=fire", f"pe.init_threshold={value}"))
    assert "\n" not in str(caught.value)


def test_fire_run_sizes_init_threshold_from_its_training_positions():
    data, model, _ = build(compose_train("pe=fire", "data.len=64"))
    train_positions = data.max_position(data.train_len)
    assert model.stack.pe.train_positions == train_positions
    assert model.stack.pe.init_threshold == train_positions / 4
    overridden = build(compose_train("pe=fire", "data.len=64", "pe.init_threshold=128"))[1]
    assert overridden.stack.pe.init_threshold == 128
