"""Bias encodings (T5, KERPLE, FIRE, Sandwich, ALiBi variants) against their formulas.

References are written here independently of lengen, as plain Python ``math`` loops in float64:
Raffel et al. 2020 (T5 buckets, as in T5's ``_relative_position_bucket``), Chi et al. 2022
(KERPLE), Li et al. 2023 (FIRE), Chi et al. 2023 (Sandwich), Press et al. 2022 and the
Chomsky-hierarchy code of Delétang et al. 2023 / Ruoss et al. 2023 (ALiBi variants).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from lengen.model import DecoderOnly, EncoderOnly
from lengen.pe import sinusoidal_table
from lengen.pe.alibi import ALiBi, alibi_slopes
from lengen.pe.fire import FIRE
from lengen.pe.kerple import KERPLE, kerple_bias
from lengen.pe.sandwich import Sandwich, sandwich_head_scales, sandwich_profile
from lengen.pe.t5 import T5RelativeBias, t5_relative_bucket

pytestmark = pytest.mark.usefixtures("single_thread")

NEW_BIAS_PES = {"t5": T5RelativeBias, "kerple": KERPLE, "fire": FIRE, "sandwich": Sandwich}
ALIBI_VARIANTS = {
    f"alibi-{variant}-{'learned' if learned else 'fixed'}": (variant, learned)
    for variant in ("symmetric", "asymmetric_offset", "separate")
    for learned in (False, True)
}


def make(name: str, causal: bool, d_model: int = 32, n_heads: int = 4):
    if name in NEW_BIAS_PES:
        return NEW_BIAS_PES[name](d_model=d_model, n_heads=n_heads, causal=causal)
    variant, learned = ALIBI_VARIANTS[name]
    return ALiBi(
        d_model=d_model,
        n_heads=n_heads,
        causal=causal,
        bidirectional=variant,
        learnable_slopes=learned,
    )


ALL_NAMES = [*NEW_BIAS_PES, *ALIBI_VARIANTS]


# -- independent references ------------------------------------------------------------------
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


def reference_cos_sum(distance: int, dim: int, base: float) -> float:
    """Σ_{i=0}^{dim/2−1} cos(distance / base^(2i/dim)), float64."""
    return sum(math.cos(distance / base ** (2 * i / dim)) for i in range(dim // 2))


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


def reference_block(value, n_heads: int, q_positions, k_positions) -> Tensor:
    """(H, Tq, Tk) float64 tensor of value(h, i, j) for heads h, queries i and keys j."""
    q_list, k_list = [int(i) for i in q_positions], [int(j) for j in k_positions]
    return torch.tensor(
        [[[value(h, i, j) for j in k_list] for i in q_list] for h in range(n_heads)],
        dtype=torch.float64,
    )


# -- every new bias encoding -----------------------------------------------------------------
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_dense_bias_block_shape_and_fp32(name, causal):
    pe = make(name, causal)
    assert pe.has_bias is True
    bias = pe.attention_bias(torch.arange(5, 12), torch.arange(12))
    assert bias.shape == (4, 7, 12)
    assert bias.dtype == torch.float32
    assert torch.isfinite(bias).all()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_score_bias_elementwise_equals_dense_block(name, causal):
    # one definition serves the dense block and a per-element score_mod
    pe = make(name, causal)
    q_positions, k_positions = torch.tensor([0, 3, 40]), torch.tensor([0, 2, 3, 39, 41])
    dense = pe.attention_bias(q_positions, k_positions)
    for h in range(4):
        for a, i in enumerate(q_positions):
            for b, j in enumerate(k_positions):
                value = pe.score_bias(torch.tensor(h), i, j)
                assert value.dtype == torch.float32
                torch.testing.assert_close(value, dense[h, a, b], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_bias_fp32_and_unchanged_under_bf16_autocast(name):
    pe = make(name, causal=False)
    q_positions, k_positions = torch.arange(3000, 3016), torch.arange(3040)
    expected = pe.attention_bias(q_positions, k_positions)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bias = pe.attention_bias(q_positions, k_positions)
    assert bias.dtype == torch.float32
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_bias_fp32_when_module_cast_to_bf16(name):
    pe = make(name, causal=True).to(torch.bfloat16)
    bias = pe.attention_bias(torch.arange(8), torch.arange(8))
    assert bias.dtype == torch.float32


@pytest.mark.parametrize("name", ["t5", "kerple", "fire", "alibi-separate-learned"])
def test_gradient_reaches_every_parameter(name):
    pe = make(name, causal=False)
    bias = pe.attention_bias(torch.arange(20), torch.arange(20))
    (bias * torch.randn(bias.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
    for parameter_name, parameter in pe.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
        assert parameter.grad.abs().sum() > 0, parameter_name


# -- T5 --------------------------------------------------------------------------------------
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


# -- KERPLE ----------------------------------------------------------------------------------
def set_kerple(pe: KERPLE, r1: list[float], r2: list[float]) -> KERPLE:
    with torch.no_grad():
        pe.r1.copy_(torch.tensor(r1))
        pe.r2.copy_(torch.tensor(r2))
    return pe


@pytest.mark.parametrize("causal", [True, False])
def test_kerple_log_closed_form(causal):
    r1, r2 = [0.5, 1.0, 1.7], [0.05, 0.3, 1.0]
    pe = set_kerple(KERPLE(d_model=24, n_heads=3, causal=causal, variant="log"), r1, r2)
    q_positions, k_positions = torch.tensor([0, 9, 500]), torch.tensor([0, 4, 9, 300, 510])
    bias = pe.attention_bias(q_positions, k_positions)
    expected = reference_block(
        lambda h, i, j: -r1[h] * math.log(1 + r2[h] * abs(i - j)), 3, q_positions, k_positions
    )
    torch.testing.assert_close(bias.double(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_kerple_power_closed_form(causal):
    r1, r2 = [0.5, 1.0, 0.02], [0.5, 1.3, 2.0]
    pe = set_kerple(KERPLE(d_model=24, n_heads=3, causal=causal, variant="power"), r1, r2)
    q_positions, k_positions = torch.tensor([0, 9, 500]), torch.tensor([0, 4, 9, 300, 510])
    bias = pe.attention_bias(q_positions, k_positions)
    expected = reference_block(
        lambda h, i, j: -r1[h] * abs(i - j) ** r2[h], 3, q_positions, k_positions
    )
    torch.testing.assert_close(bias.double(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["log", "power"])
@pytest.mark.parametrize("raw", [-5.0, 0.0, 1e-4, 0.7, 3.0, 100.0])
def test_kerple_parameters_stay_positive_after_any_raw_value(variant, raw):
    pe = set_kerple(KERPLE(d_model=16, n_heads=2, variant=variant), [raw, raw], [raw, raw])
    bias = pe.attention_bias(torch.arange(50), torch.arange(50))
    # the authors' projection: r >= 0.01, and the power's exponent r2 <= 2
    r1 = min(max(raw, 0.01), math.inf)
    r2 = min(max(raw, 0.01), 2.0 if variant == "power" else math.inf)
    torch.testing.assert_close(pe.r1.detach(), torch.full((2,), r1))
    torch.testing.assert_close(pe.r2.detach(), torch.full((2,), r2))
    assert torch.isfinite(bias).all() and (bias <= 0).all()
    assert (bias[:, 1, 0] < 0).all()  # a positive penalty at distance 1
    distance = torch.arange(50.0)
    expected = kerple_bias(distance, torch.tensor(r1), torch.tensor(r2), variant)
    torch.testing.assert_close(bias[0, 49], expected.flip(0))


@pytest.mark.parametrize(
    ("variant", "r1_high", "r2_high"), [("log", 2.0, 1.0), ("power", 1.0, 2.0)]
)
def test_kerple_initialisation_follows_authors_code(variant, r1_high, r2_high):
    torch.manual_seed(0)
    pe = KERPLE(d_model=256, n_heads=64, variant=variant)
    for values, high in ((pe.r1, r1_high), (pe.r2, r2_high)):
        assert values.min() >= 0 and values.max() <= high
        assert values.max() > 0.8 * high  # uniform over the whole range, not a constant


def test_kerple_unknown_variant_raises():
    with pytest.raises(ValueError, match=r"^pe\.variant"):
        KERPLE(d_model=16, n_heads=2, variant="exp")


def test_kerple_bias_function_unknown_variant_raises():
    with pytest.raises(ValueError, match=r"^pe\.variant"):
        kerple_bias(torch.arange(3), torch.tensor(1.0), torch.tensor(1.0), "exp")


@pytest.mark.parametrize("variant", ["log", "power"])
def test_kerple_non_causal_bias_is_symmetric(variant):
    pe = KERPLE(d_model=16, n_heads=2, causal=False, variant=variant)
    bias = pe.attention_bias(torch.arange(12), torch.arange(12))
    # (vectorised pow may differ in the last bit between equal inputs: fp32 tolerance)
    torch.testing.assert_close(bias, bias.transpose(1, 2))


# -- FIRE ------------------------------------------------------------------------------------
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


# -- Sandwich --------------------------------------------------------------------------------
@pytest.mark.parametrize(("dim", "base"), [(128, 10000.0), (16, 100.0), (2, 10.0)])
def test_sandwich_profile_is_sinusoidal_inner_product(dim, base):
    table = sinusoidal_table(60, dim, base).double()  # rows p_m, interleaved sin/cos
    inner = table @ table.T - dim / 2  # (60, 60): p_m · p_n − d/2
    m = torch.arange(60)
    profile = sandwich_profile(m[:, None] - m[None, :], dim, base)
    torch.testing.assert_close(profile.double(), inner, rtol=0, atol=1e-4)


@pytest.mark.parametrize("distance", [0, 1, 7, 100, 12_345, 100_000, -100_000])
def test_sandwich_profile_matches_cosine_sum(distance):
    expected = reference_cos_sum(distance, 128, 10000.0) - 64
    profile = sandwich_profile(torch.tensor(distance), 128, 10000.0)
    torch.testing.assert_close(profile.double(), torch.tensor(expected, dtype=torch.float64))


def test_sandwich_head_scales_are_inverse_alibi_exponents():
    # r_h = 8h/H: 8 heads -> 1/1, 1/2, …, 1/8
    expected = torch.tensor([1 / h for h in range(1, 9)])
    torch.testing.assert_close(sandwich_head_scales(8), expected, rtol=0, atol=1e-7)
    torch.testing.assert_close(sandwich_head_scales(2), torch.tensor([0.25, 0.125]))


@pytest.mark.parametrize("causal", [True, False])
def test_sandwich_bias_equals_scaled_cosine_sum(causal):
    n_heads = 4
    pe = Sandwich(d_model=32, n_heads=n_heads, causal=causal, dim=16, base=100.0)
    q_positions, k_positions = torch.tensor([0, 5, 200]), torch.tensor([0, 3, 5, 150, 230])
    bias = pe.attention_bias(q_positions, k_positions)
    expected = reference_block(  # head h = 0 … H−1 is the paper's h + 1
        lambda h, i, j: (reference_cos_sum(i - j, 16, 100.0) - 8) * n_heads / (8 * (h + 1)),
        n_heads,
        q_positions,
        k_positions,
    )
    torch.testing.assert_close(bias.double(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shift", [1, 77, 10_000])
def test_sandwich_depends_only_on_absolute_offset(shift):
    pe = Sandwich(d_model=32, n_heads=4, causal=False)
    positions = torch.arange(25)
    bias = pe.attention_bias(positions, positions)
    torch.testing.assert_close(
        pe.attention_bias(positions + shift, positions + shift), bias, rtol=0, atol=0
    )
    torch.testing.assert_close(bias, bias.transpose(1, 2), rtol=0, atol=0)


def test_sandwich_zero_at_distance_zero_and_non_positive():
    pe = Sandwich(d_model=32, n_heads=4, causal=False)
    bias = pe.attention_bias(torch.arange(300), torch.arange(300))
    assert (bias.diagonal(dim1=1, dim2=2) == 0).all()
    assert (bias <= 1e-5).all()


def test_sandwich_table_grows_with_longer_distances():
    pe = Sandwich(d_model=32, n_heads=4, causal=True)
    pe.attention_bias(torch.arange(4), torch.arange(4))
    far = pe.attention_bias(torch.tensor([70_000]), torch.tensor([0, 69_999]))
    expected = (reference_cos_sum(70_000, 128, 10000.0) - 64) * 4 / 8
    torch.testing.assert_close(far[0, 0, 0].double(), torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize(
    ("options", "key"),
    [({"dim": 7}, "pe.dim"), ({"dim": 0}, "pe.dim"), ({"base": 1.0}, "pe.base")],
)
def test_sandwich_bad_options_raise_naming_the_key(options, key):
    with pytest.raises(ValueError, match="^" + key.replace(".", r"\.")):
        Sandwich(d_model=32, n_heads=4, **options)


# -- ALiBi variants --------------------------------------------------------------------------
def reference_alibi_slopes(n_heads: int) -> list[float]:
    """Press et al. for power-of-two head counts: 2^(−8h/n), h = 1 … n."""
    return [2.0 ** (-8 * h / n_heads) for h in range(1, n_heads + 1)]


def test_alibi_asymmetric_offset_matches_chomsky_hierarchy_code():
    # their matrix: −|i − j| everywhere, + 0.5 where the key is strictly before the query,
    # all multiplied by the head's slope
    pe = ALiBi(d_model=16, n_heads=4, causal=False, bidirectional="asymmetric_offset")
    positions = torch.arange(9)
    bias = pe.attention_bias(positions, positions)
    slopes = reference_alibi_slopes(4)
    expected = reference_block(
        lambda h, i, j: slopes[h] * (-abs(i - j) + (0.5 if j < i else 0.0)), 4, positions, positions
    )
    torch.testing.assert_close(bias.double(), expected, rtol=0, atol=1e-7)


def test_alibi_asymmetric_offset_golden_small():
    # 2 heads: slopes 2^-4, 2^-8; rows = queries 0, 1, 2; columns = keys 0, 1, 2
    pe = ALiBi(d_model=4, n_heads=2, causal=False, bidirectional="asymmetric_offset")
    bias = pe.attention_bias(torch.arange(3), torch.arange(3))
    pattern = torch.tensor([[0.0, -1.0, -2.0], [-0.5, 0.0, -1.0], [-1.5, -0.5, 0.0]])
    torch.testing.assert_close(bias, torch.stack([pattern / 16, pattern / 256]), rtol=0, atol=0)


def test_alibi_separate_uses_reversed_slopes_after_the_query():
    pe = ALiBi(d_model=16, n_heads=4, causal=False, bidirectional="separate")
    bias = pe.attention_bias(torch.arange(7), torch.arange(7))
    past, future = reference_alibi_slopes(4), reference_alibi_slopes(4)[::-1]
    expected = reference_block(
        lambda h, i, j: -(past[h] if j <= i else future[h]) * abs(i - j), 4, range(7), range(7)
    )
    torch.testing.assert_close(bias.double(), expected, rtol=0, atol=1e-7)
    assert pe.describe()["future_slopes"] == [round(s, 8) for s in future]


@pytest.mark.parametrize("learned", [False, True])
@pytest.mark.parametrize("variant", ["asymmetric_offset", "separate"])
def test_alibi_variants_give_paper_bias_when_causal(variant, learned):
    pe = ALiBi(d_model=16, n_heads=4, causal=True, bidirectional=variant, learnable_slopes=learned)
    bias = pe.attention_bias(torch.arange(10), torch.arange(10))
    paper = ALiBi(d_model=16, n_heads=4, causal=True).attention_bias(
        torch.arange(10), torch.arange(10)
    )
    torch.testing.assert_close(bias, paper, rtol=1e-6, atol=1e-7)


def test_alibi_default_has_fixed_symmetric_slopes():
    pe = ALiBi(d_model=16, n_heads=4, causal=False)
    assert list(pe.parameters()) == []
    assert pe.describe() == {
        "slopes": [round(s, 8) for s in reference_alibi_slopes(4)],
        "bidirectional": "symmetric",
        "learnable_slopes": False,
    }


def test_alibi_learnable_slopes_start_at_press_values():
    pe = ALiBi(d_model=24, n_heads=12, causal=True, learnable_slopes=True)
    assert [name for name, _ in pe.named_parameters()] == ["log_slopes"]
    torch.testing.assert_close(pe.slopes.detach(), alibi_slopes(12), rtol=1e-6, atol=0)


def test_alibi_learnable_slopes_separate_has_two_sets():
    pe = ALiBi(d_model=16, n_heads=4, causal=False, bidirectional="separate", learnable_slopes=True)
    assert sorted(name for name, _ in pe.named_parameters()) == ["log_future_slopes", "log_slopes"]
    torch.testing.assert_close(pe.future_slopes.detach(), alibi_slopes(4).flip(0))


@pytest.mark.parametrize("raw", [-60.0, -5.0, 0.0, 3.0])
def test_alibi_learnable_slopes_stay_positive(raw):
    pe = ALiBi(d_model=16, n_heads=4, causal=False, learnable_slopes=True)
    with torch.no_grad():
        pe.log_slopes.fill_(raw)
    bias = pe.attention_bias(torch.arange(6), torch.arange(6))
    assert (pe.slopes > 0).all()
    torch.testing.assert_close(bias[:, 0, 5], torch.full((4,), -5 * math.exp(raw)))


def test_alibi_learnable_slopes_receive_gradient():
    pe = ALiBi(d_model=16, n_heads=4, causal=True, learnable_slopes=True)
    pe.attention_bias(torch.arange(8), torch.arange(8)).sum().backward()
    assert (pe.log_slopes.grad < 0).all()  # d/d log m of Σ −m·d is −m·Σd


def test_alibi_learnable_slopes_must_be_boolean():
    with pytest.raises(ValueError, match=r"^pe\.learnable_slopes"):
        ALiBi(d_model=16, n_heads=4, learnable_slopes="yes")


# -- through a model -------------------------------------------------------------------------
def build_and_run(model_kind: str, pe_factory) -> tuple[torch.nn.Module, Tensor]:
    """A tiny model of the given kind with the encoding, and its logits on random tokens."""
    torch.manual_seed(0)
    cls = DecoderOnly if model_kind == "decoder" else EncoderOnly
    model = cls(pe=pe_factory, vocab_size=11, d_model=32, n_layers=2, n_heads=4, d_ff=64)
    tokens = torch.randint(0, 11, (2, 9), generator=torch.Generator().manual_seed(1))
    return model, model(tokens)


@pytest.mark.parametrize("model_kind", ["decoder", "encoder"])
@pytest.mark.parametrize("name", ["t5", "kerple", "fire", "sandwich"])
def test_model_trains_through_new_bias(name, model_kind):
    model, logits = build_and_run(model_kind, NEW_BIAS_PES[name])
    assert torch.isfinite(logits).all()
    logits.square().mean().backward()
    for parameter_name, parameter in model.stack.pe.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), parameter_name


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


# -- defaults sized from the run's training positions -----------------------------------------
@pytest.mark.parametrize(
    ("train_positions", "expected"), [(None, 128), (34, 17), (68, 17), (100, 25), (258, 64)]
)
def test_t5_default_max_distance_keeps_t5s_ratio(train_positions, expected):
    # T5: 128 for 512-token training, i.e. train_positions // 4, at least num_buckets // 2 + 1
    pe = T5RelativeBias(d_model=32, n_heads=4, train_positions=train_positions)
    assert pe.max_distance == expected
    assert pe.describe()["max_distance"] == expected
    assert pe.describe()["max_distance_from"] != "given"


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


def test_explicit_sizes_are_used_as_given():
    t5 = T5RelativeBias(d_model=32, n_heads=4, train_positions=258, max_distance=128)
    assert t5.max_distance == 128 and t5.describe()["max_distance_from"] == "given"
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


@pytest.mark.parametrize(
    ("pe", "key", "value"),
    [
        ("t5", "max_distance", "0"),
        ("t5", "max_distance", "16"),
        ("t5", "max_distance", "true"),
        ("t5", "max_distance", "40.5"),
        ("t5", "max_distance", "far"),
        ("fire", "init_threshold", "0"),
        ("fire", "init_threshold", "-3"),
        ("fire", "init_threshold", "true"),
        ("fire", "init_threshold", "far"),
    ],
)
def test_bad_sizes_are_refused_in_one_line_naming_the_key(pe, key, value):
    from helpers import compose_train
    from lengen.build import build
    from lengen.config import ConfigError

    with pytest.raises(ConfigError, match=rf"^pe\.{key} must be") as caught:
        build(compose_train(f"pe={pe}", f"pe.{key}={value}"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("pe", "key", "ratio"), [("t5", "max_distance", 4), ("fire", "init_threshold", 4)]
)
def test_run_sizes_the_default_from_its_training_positions(pe, key, ratio):
    from helpers import compose_train
    from lengen.build import build

    data, model, _ = build(compose_train(f"pe={pe}", "data.len=64"))
    train_positions = data.max_position(data.train_len)
    assert model.stack.pe.train_positions == train_positions
    expected = train_positions // ratio if pe == "t5" else train_positions / ratio
    assert getattr(model.stack.pe, key) == expected
    overridden = build(compose_train(f"pe={pe}", "data.len=64", f"pe.{key}=128"))[1]
    assert getattr(overridden.stack.pe, key) == 128
