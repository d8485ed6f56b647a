"""pe=t5 (``lengen.pe.t5``): T5's relative-position buckets and bias (Raffel et al. 2020).

The reference bucket is written here independently of lengen, one integer at a time with
float64 ``math.log``, as in T5's ``_relative_position_bucket``; golden buckets are computed by
hand. ``max_distance`` defaults to T5's ratio to the training length.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import compose_train
from lengen.build import build
from lengen.config import ConfigError
from lengen.pe.t5 import T5RelativeBias, t5_relative_bucket

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent reference -------------------------------------------------------------------
def reference_t5_bucket(relative_position: int, bidirectional: bool, num_buckets, max_distance):
    """T5's bucket of key − query, one integer at a time, float64 ``math.log``."""
    if bidirectional:
        side = num_buckets // 2
        first = side if relative_position > 0 else 0
        distance = abs(relative_position)
    else:
        side = num_buckets
        first = 0
        distance = -relative_position if relative_position < 0 else 0
    exact = side // 2
    if distance < exact:
        return first + distance
    steps = math.log(distance / exact) / math.log(max_distance / exact) * (side - exact)
    return first + min(exact + int(steps), side - 1)


# -- buckets ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("num_buckets", "max_distance"), [(32, 128), (16, 64), (8, 20), (64, 256), (10, 100)]
)
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_bucket_matches_reference(bidirectional, num_buckets, max_distance):
    relative = torch.arange(-300, 301)
    buckets = t5_relative_bucket(relative, bidirectional, num_buckets, max_distance)
    expected = [
        reference_t5_bucket(r, bidirectional, num_buckets, max_distance) for r in range(-300, 301)
    ]
    assert buckets.dtype == torch.int64
    assert buckets.tolist() == expected


# hand computed, num_buckets 32, max_distance 128, relative position = key − query:
# bidirectional: 16 buckets per side, exact below 8, then 8 + ⌊log(d/8)/log(16)·8⌋ (≤ 15);
#   d=15: 8 + ⌊1.814⌋ = 9; d=16: 8 + 2 = 10; d=127: 8 + ⌊7.977⌋ = 15; keys after the query +16.
# causal: 32 buckets for keys at or before the query, exact below 16, then
#   16 + ⌊log(d/16)/log(8)·16⌋ (≤ 31); d=16: 16; d=127: 16 + ⌊15.94⌋ = 31; later keys: 0.
T5_GOLDEN = [
    # (key − query, bidirectional bucket, causal bucket)
    (0, 0, 0),
    (-1, 1, 1),
    (1, 17, 0),
    (-15, 9, 15),
    (15, 25, 0),
    (-16, 10, 16),
    (16, 26, 0),
    (-127, 15, 31),
    (127, 31, 0),
    (-128, 15, 31),
    (128, 31, 0),
    (-1000, 15, 31),
    (1000, 31, 0),
]


@pytest.mark.parametrize(("relative", "bidirectional_bucket", "causal_bucket"), T5_GOLDEN)
def test_t5_bucket_golden_values(relative, bidirectional_bucket, causal_bucket):
    position = torch.tensor(relative)
    assert t5_relative_bucket(position, True, 32, 128).item() == bidirectional_bucket
    assert t5_relative_bucket(position, False, 32, 128).item() == causal_bucket


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_stay_in_range_and_grow_with_distance(bidirectional):
    distance = torch.arange(0, 5000)
    before = t5_relative_bucket(-distance, bidirectional, 32, 128)
    assert before.min() >= 0 and before.max() < 32
    assert (before[1:] >= before[:-1]).all()
    if bidirectional:
        after = t5_relative_bucket(distance, True, 32, 128)
        assert (after[1:] >= after[:-1]).all()
        assert after[1:].min() >= 16  # the other half of the table


# -- bias ------------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
def test_t5_bias_is_table_lookup_of_bucket(causal):
    pe = T5RelativeBias(d_model=32, n_heads=4, causal=causal, num_buckets=16, max_distance=40)
    q_positions, k_positions = torch.tensor([0, 7, 50]), torch.arange(0, 60, 3)
    bias = pe.attention_bias(q_positions, k_positions)
    table = pe.table.weight.detach()
    expected = torch.empty(4, 3, len(k_positions))
    for h in range(4):
        for a, i in enumerate(q_positions.tolist()):
            for b, j in enumerate(k_positions.tolist()):
                expected[h, a, b] = table[reference_t5_bucket(j - i, not causal, 16, 40), h]
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_t5_bias_depends_only_on_offset(causal):
    pe = T5RelativeBias(d_model=32, n_heads=4, causal=causal)
    positions = torch.arange(30)
    torch.testing.assert_close(
        pe.attention_bias(positions + 1000, positions + 1000),
        pe.attention_bias(positions, positions),
        rtol=0,
        atol=0,
    )


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"num_buckets": 3}, "pe.num_buckets"),
        ({"num_buckets": 32.0}, "pe.num_buckets"),
        ({"num_buckets": 32, "max_distance": 16}, "pe.max_distance"),
    ],
)
def test_t5_bad_options_raise_naming_the_key(options, key):
    with pytest.raises(ValueError, match="^" + key.replace(".", r"\.")):
        T5RelativeBias(d_model=32, n_heads=4, **options)


# -- max_distance sized from the run's training positions ------------------------------------
@pytest.mark.parametrize(
    ("train_positions", "expected"), [(None, 128), (34, 17), (68, 17), (100, 25), (258, 64)]
)
def test_t5_default_max_distance_keeps_t5s_ratio(train_positions, expected):
    # T5: 128 for 512-token training, i.e. train_positions // 4, at least num_buckets // 2 + 1
    pe = T5RelativeBias(d_model=32, n_heads=4, train_positions=train_positions)
    assert pe.max_distance == expected
    assert pe.describe()["max_distance"] == expected
    assert pe.describe()["max_distance_from"] != "given"


def test_t5_explicit_max_distance_is_used_as_given():
    t5 = T5RelativeBias(d_model=32, n_heads=4, train_positions=258, max_distance=128)
    assert t5.max_distance == 128 and t5.describe()["max_distance_from"] == "given"


@pytest.mark.parametrize("value", ["0", "16", "true", "40.5", "far"])
def test_t5_bad_max_distance_is_refused_in_one_line(value):
    with pytest.raises(ConfigError, match=r"^pe\.max_distance must be") as caught:
        build(compose_train("pe=t5", f"pe.max_distance={value}"))
    assert "\n" not in str(caught.value)


def test_t5_run_sizes_max_distance_from_its_training_positions():
    data, model, _ = build(compose_train("pe=t5", "data.len=64"))
    train_positions = data.max_position(data.train_len)
    assert model.stack.pe.train_positions == train_positions
    assert model.stack.pe.max_distance == train_positions // 4
    overridden = build(compose_train("pe=t5", "data.len=64", "pe.max_distance=128"))[1]
    assert overridden.stack.pe.max_distance == 128
