"""RoPE's context extensions (``lengen.pe.rope_frequencies``, ``pe.scaling``) against the
published formulas and reference code: Position Interpolation (Chen et al. 2023), NTK-aware and
dynamic NTK (Peng et al. 2024 §3; Hugging Face ``dynamic``), YaRN's ramp and temperature (the
paper's ramp linear in the rotations; the authors' code, jquesnelle/yarn
``scaled_rope/LlamaYaRNScaledRotaryEmbedding.py``, and Hugging Face's
``_compute_yarn_parameters``, linear in the pair index), scaling factor 1 and the checks of the
scaling keys.

References are written here in float64 numpy / math, never from lengen's own helpers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import ref_rotate, ref_theta, rope_pe, rotate_with
from lengen.model.kernels import attend
from lengen.pe.config.rope import SCALINGS
from lengen.pe.rope import RoPE, apply_rope
from lengen.pe.rope_frequencies import rope_inverse_frequencies, yarn_ramp

STATIC_SCALINGS = ["pi", "ntk", "yarn"]

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent references ------------------------------------------------------------------
def ref_ntk_theta(dim: int, base: float, factor: float) -> np.ndarray:
    """YaRN paper §3.1 (NTK-aware): b' = b · s^(|D|/(|D|−2))."""
    return ref_theta(dim, base * factor ** (dim / (dim - 2)))


def ref_dynamic_theta(dim, base, factor, length, original) -> np.ndarray:
    """Hugging Face ``dynamic``: b' = b · ((s·ℓ/L) − (s − 1))^(d/(d−2)) for ℓ > L."""
    if length <= original:
        return ref_theta(dim, base)
    return ref_theta(dim, base * (factor * length / original - (factor - 1)) ** (dim / (dim - 2)))


def ref_yarn_gamma(dim, base, original, alpha=1.0, beta=32.0) -> list[float]:
    """YaRN §3.2 (NTK-by-parts): r(d) = L/λ_d, λ_d = 2π/θ_d; γ(r) = 0 (r < α), 1 (r > β),
    (r − α)/(β − α) in between."""
    gammas = []
    for i in range(dim // 2):
        r = original / (2 * math.pi / base ** (-2 * i / dim))
        gammas.append(0.0 if r < alpha else 1.0 if r > beta else (r - alpha) / (beta - alpha))
    return gammas


def ref_yarn_theta(dim, base, factor, original, alpha=1.0, beta=32.0) -> np.ndarray:
    """h(θ_d) = (1 − γ(r(d))) θ_d / s + γ(r(d)) θ_d."""
    theta = ref_theta(dim, base)
    gammas = np.array(ref_yarn_gamma(dim, base, original, alpha, beta))
    return (1 - gammas) * theta / factor + gammas * theta


def ref_yarn_theta_code(
    dim, base, factor, original, beta_fast=32.0, beta_slow=1.0, truncate=True
) -> np.ndarray:
    """YaRN as the authors' code and Hugging Face compute it: ``find_correction_dim`` gives the
    real pair index where a pair makes ρ rotations within L, d·ln(L/(2πρ))/(2 ln base); the
    ramp runs linearly in the pair index from low = ⌊dim(β_fast)⌋ to high = ⌈dim(β_slow)⌉
    (clamped to [0, d − 1]; no floor/ceil with ``truncate=False``); the extrapolation mask is
    1 − ramp and θ' = θ/s · (1 − mask) + θ · mask."""

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    theta = ref_theta(dim, base)
    mask = np.array([1 - min(max((i - low) / (high - low), 0.0), 1.0) for i in range(dim // 2)])
    return theta / factor * (1 - mask) + theta * mask


# -- Position Interpolation ------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.5])
def test_pi_equals_plain_rope_at_divided_positions(factor, layout):
    pe = rope_pe(scaling="pi", scaling_factor=factor, layout=layout)
    generator = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 40, 16, generator=generator)
    k = torch.randn(2, 4, 40, 16, generator=generator)
    positions = torch.arange(40) * 3
    rotated_q, rotated_k = rotate_with(pe, q, k, positions)
    divided = positions.double() / factor
    torch.testing.assert_close(rotated_q, apply_rope(q, divided, layout=layout))
    torch.testing.assert_close(rotated_k, apply_rope(k, divided, layout=layout))
    expected = ref_rotate(q, divided.numpy(), ref_theta(16, 10000.0), layout)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=2e-5)


# -- NTK-aware -------------------------------------------------------------------------------
@pytest.mark.parametrize(("dim", "factor", "base"), [(16, 4.0, 10000.0), (64, 2.0, 500.0)])
def test_ntk_frequencies_follow_base_formula(dim, factor, base):
    theta = rope_inverse_frequencies(dim, base, scaling="ntk", factor=factor)
    expected = torch.from_numpy(ref_ntk_theta(dim, base, factor))
    torch.testing.assert_close(theta.double(), expected, rtol=2e-6, atol=0)


def test_ntk_keeps_highest_frequency_and_divides_lowest_by_factor():
    # the design property of b·s^(d/(d−2)): θ_0 = 1 untouched, θ_{d/2−1} exactly θ_{d/2−1}/s
    dim, factor = 16, 4.0
    theta = rope_inverse_frequencies(dim, 10000.0, scaling="ntk", factor=factor).double()
    plain = torch.from_numpy(ref_theta(dim, 10000.0))
    assert theta[0].item() == 1.0
    torch.testing.assert_close(theta[-1], plain[-1] / factor, rtol=2e-6, atol=0)
    assert (theta[1:-1] < plain[1:-1]).all() and (theta[1:-1] > plain[1:-1] / factor).all()


def test_ntk_module_rotates_with_scaled_base():
    pe = rope_pe(scaling="ntk", scaling_factor=3.0)
    generator = torch.Generator().manual_seed(2)
    q, k = torch.randn(1, 4, 30, 16, generator=generator), torch.randn(1, 4, 30, 16)
    positions = torch.arange(30)
    rotated_q, _ = rotate_with(pe, q, k, positions)
    expected = ref_rotate(q, positions.numpy(), ref_ntk_theta(16, 10000.0, 3.0))
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=1e-5)


# -- dynamic NTK -----------------------------------------------------------------------------
@pytest.mark.parametrize("length", [1, 17, 32])
def test_dynamic_ntk_equals_plain_rope_up_to_original_length(length):
    pe = rope_pe(scaling="dynamic_ntk", scaling_factor=4.0)  # L = train_positions = 32
    plain = rope_pe()
    generator = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, length, 16, generator=generator)
    k = torch.randn(2, 4, length, 16, generator=generator)
    positions = torch.arange(length)
    for got, want in zip(
        rotate_with(pe, q, k, positions), rotate_with(plain, q, k, positions), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("length", [33, 80, 500])
@pytest.mark.parametrize("factor", [1.0, 2.0, 4.0])
def test_dynamic_ntk_beyond_original_length_matches_formula(length, factor):
    pe = rope_pe(scaling="dynamic_ntk", scaling_factor=factor)
    generator = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, length, 16, generator=generator)
    k = torch.randn(1, 4, length, 16, generator=generator)
    positions = torch.arange(length)
    rotated_q, rotated_k = rotate_with(pe, q, k, positions)
    theta = ref_dynamic_theta(16, 10000.0, factor, length, 32)
    for got, x in ((rotated_q, q), (rotated_k, k)):
        expected = ref_rotate(x, positions.numpy(), theta)
        torch.testing.assert_close(got.double(), torch.from_numpy(expected), rtol=0, atol=1e-4)
    # and it differs from plain RoPE there (also at factor 1: the YaRN paper's s = ℓ/L)
    assert not torch.allclose(rotated_q, apply_rope(q, positions), atol=1e-3)


def test_dynamic_ntk_length_is_largest_key_position_plus_one():
    # a chunk of queries sees the frequencies of the whole key sequence (keys 0 … 99)
    pe = rope_pe(scaling="dynamic_ntk", scaling_factor=2.0)
    generator = torch.Generator().manual_seed(5)
    q = torch.randn(1, 4, 10, 16, generator=generator)
    k = torch.randn(1, 4, 100, 16, generator=generator)
    rotated_q, _ = pe.rotate(q, k, torch.arange(90, 100), torch.arange(100))
    theta = ref_dynamic_theta(16, 10000.0, 2.0, 100, 32)
    expected = ref_rotate(q, np.arange(90, 100), theta)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=1e-4)


# -- YaRN ------------------------------------------------------------------------------------
def test_yarn_default_ramp_by_hand():
    # the authors' code / Hugging Face, d = 16, base 10^4, L = 2048: the pair index where r = ρ
    # is 16·ln(2048/(2πρ))/(2 ln 10^4): ρ = 32 -> 2.016, floor 2; ρ = 1 -> 5.026, ceil 6;
    # γ_i = 1 − clamp((i − 2)/4): pairs 0–2 keep θ, 6–7 take θ/s, 3–5 get 3/4, 1/2, 1/4
    gamma = yarn_ramp(16, 10000.0, 2048, alpha=1.0, beta=32.0)
    assert gamma.tolist() == [1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]


def test_yarn_paper_ramp_by_hand():
    # d = 16, base 10^4, L = 2048, α = 1, β = 32. θ_i = 10^(−i/2), λ_i = 2π·10^(i/2),
    # r_i = 2048/λ_i = 325.9, 103.1, 32.59, 10.31, 3.259, 1.031, 0.326, 0.103:
    # pairs 0–2 (r > 32) keep θ (extrapolation), 6–7 (r < 1) take θ/s (interpolation),
    # 3–5 are on the ramp (r − 1)/31 = 0.3003, 0.0729, 0.00099.
    gamma = yarn_ramp(16, 10000.0, 2048, alpha=1.0, beta=32.0, ramp="rotations")
    assert gamma.tolist()[:3] == [1.0, 1.0, 1.0]
    assert gamma.tolist()[6:] == [0.0, 0.0]
    torch.testing.assert_close(
        gamma[3:6],
        torch.tensor([0.300239, 0.0728867, 0.000991686], dtype=torch.float64),
        rtol=2e-5,
        atol=0,
    )
    torch.testing.assert_close(
        gamma, torch.tensor(ref_yarn_gamma(16, 10000.0, 2048), dtype=torch.float64)
    )


@pytest.mark.parametrize("ramp", ["dimension", "rotations"])
@pytest.mark.parametrize(
    ("dim", "base", "original"), [(16, 10000.0, 2048), (64, 10000.0, 4096), (32, 500.0, 128)]
)
def test_yarn_kept_and_interpolated_pairs_agree_with_the_authors_code(dim, base, original, ramp):
    # the authors' code ramps linearly in the pair index between floor(i_β) and ceil(i_α),
    # i_ρ = dim · ln(L / (2π ρ)) / (2 ln base) the (real) index where r = ρ; the paper's ramp
    # is linear in r, but both keep and both interpolate the same pairs
    def index_where(rotations):
        return dim * math.log(original / (2 * math.pi * rotations)) / (2 * math.log(base))

    low, high = math.floor(index_where(32.0)), math.ceil(index_where(1.0))
    if ramp == "dimension":
        # the code clamps low to 0: at L = 128, base 500 (low = −2) pair 0, which the paper
        # puts on its ramp (r_0 = 20.4 < β), is kept whole
        low = max(low, 0)
    gamma = yarn_ramp(dim, base, original, ramp=ramp).tolist()
    for i, value in enumerate(gamma):
        if i <= low:
            assert value == 1.0, i
        elif i >= high:
            assert value == 0.0, i
        else:
            assert 0.0 < value < 1.0, i


@pytest.mark.parametrize("ramp", ["dimension", "rotations"])
def test_yarn_frequencies_interpolate_only_low_frequencies(ramp):
    factor = 4.0
    theta = rope_inverse_frequencies(
        16, 10000.0, scaling="yarn", factor=factor, original_max_position=2048, yarn_ramp_kind=ramp
    ).double()
    plain = torch.from_numpy(ref_theta(16, 10000.0))
    torch.testing.assert_close(theta[:3], plain[:3], rtol=1e-6, atol=0)  # extrapolated
    torch.testing.assert_close(theta[6:], plain[6:] / factor, rtol=1e-6, atol=0)  # interpolated
    assert ((theta[3:6] < plain[3:6]) & (theta[3:6] > plain[3:6] / factor)).all()
    if ramp == "rotations":
        expected = torch.from_numpy(ref_yarn_theta(16, 10000.0, factor, 2048))
    else:
        expected = torch.from_numpy(ref_yarn_theta_code(16, 10000.0, factor, 2048))
    torch.testing.assert_close(theta, expected, rtol=1e-6, atol=0)


#: d = 32 and 128, s = 2 and 16, L = 128 and 8192
YARN_GRID = [
    (dim, factor, original)
    for dim in (32, 128)
    for factor in (2.0, 16.0)
    for original in (128, 8192)
]


@pytest.mark.parametrize(("dim", "factor", "original"), YARN_GRID)
def test_yarn_default_frequencies_equal_the_authors_and_hugging_face_code(dim, factor, original):
    theta = rope_inverse_frequencies(
        dim, 10000.0, scaling="yarn", factor=factor, original_max_position=original
    )
    expected = ref_yarn_theta_code(dim, 10000.0, factor, original)
    torch.testing.assert_close(theta, torch.from_numpy(expected).float(), rtol=1e-6, atol=0)


@pytest.mark.parametrize(("dim", "factor", "original"), YARN_GRID)
def test_yarn_rotations_ramp_frequencies_equal_the_paper(dim, factor, original):
    theta = rope_inverse_frequencies(
        dim,
        10000.0,
        scaling="yarn",
        factor=factor,
        original_max_position=original,
        yarn_ramp_kind="rotations",
    )
    expected = ref_yarn_theta(dim, 10000.0, factor, original)
    torch.testing.assert_close(theta, torch.from_numpy(expected).float(), rtol=1e-6, atol=0)


@pytest.mark.parametrize(("dim", "original"), [(32, 128), (32, 8192), (128, 128), (128, 8192)])
def test_yarn_untruncated_ramp_equals_hugging_face_truncate_false(dim, original):
    theta = rope_inverse_frequencies(
        dim, scaling="yarn", factor=4.0, original_max_position=original, yarn_truncate=False
    )
    expected = ref_yarn_theta_code(dim, 10000.0, 4.0, original, truncate=False)
    torch.testing.assert_close(theta, torch.from_numpy(expected).float(), rtol=1e-6, atol=0)
    truncated = rope_inverse_frequencies(
        dim, scaling="yarn", factor=4.0, original_max_position=original
    )
    assert not torch.equal(theta, truncated)


@pytest.mark.parametrize(("dim", "original"), [(32, 128), (32, 8192), (128, 128), (128, 8192)])
def test_yarn_ramps_differ_far_more_than_slightly(dim, original):
    # inside the ramp the two conventions give frequencies 25–67 % apart at s = 2 (30–42 % at
    # these sizes, relative to the paper's) and more than 67 % apart at s = 16 (188–300 %)
    def largest_relative_difference(factor):
        code = ref_yarn_theta_code(dim, 10000.0, factor, original)
        paper = ref_yarn_theta(dim, 10000.0, factor, original)
        ours = [
            rope_inverse_frequencies(
                dim, scaling="yarn", factor=factor, original_max_position=original, **options
            ).double()
            for options in ({}, {"yarn_ramp_kind": "rotations"})
        ]
        torch.testing.assert_close(ours[0], torch.from_numpy(code), rtol=1e-6, atol=0)
        torch.testing.assert_close(ours[1], torch.from_numpy(paper), rtol=1e-6, atol=0)
        return float(np.max(np.abs(code - paper) / paper))

    assert 0.25 <= largest_relative_difference(2.0) <= 0.67
    assert largest_relative_difference(16.0) > 0.67


@pytest.mark.parametrize("ramp", ["dimension", "rotations"])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 32.0), (2.0, 8.0)])
def test_yarn_module_rotates_with_ramped_frequencies(alpha, beta, ramp):
    pe = rope_pe(
        scaling="yarn", scaling_factor=8.0, yarn_alpha=alpha, yarn_beta=beta, yarn_ramp=ramp
    )
    generator = torch.Generator().manual_seed(6)
    q, k = torch.randn(1, 4, 50, 16, generator=generator), torch.randn(1, 4, 50, 16)
    positions = torch.arange(50)
    rotated_q, _ = rotate_with(pe, q, k, positions)
    # L = train_positions = 32
    if ramp == "rotations":
        theta = ref_yarn_theta(16, 10000.0, 8.0, 32, alpha, beta)
    else:
        theta = ref_yarn_theta_code(16, 10000.0, 8.0, 32, beta_fast=beta, beta_slow=alpha)
    expected = ref_rotate(q, positions.numpy(), theta)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=1e-5)


@pytest.mark.parametrize("factor", [1.0, 2.0, 4.0, 16.0])
def test_yarn_temperature_multiplies_logits(factor):
    pe = rope_pe(scaling="yarn", scaling_factor=factor)
    expected = (0.1 * math.log(factor) + 1) ** 2  # √(1/t) on q and on k
    for length in (8, 32, 1000):
        assert pe.attention_scale(length) == pytest.approx(expected, rel=1e-12)
    if factor == 4.0:
        assert pe.attention_scale(10) == pytest.approx(1.1386294361**2, rel=1e-9)


def test_yarn_temperature_composes_with_log_length_scale():
    pe = rope_pe(scaling="yarn", scaling_factor=4.0, log_length_scale=True)
    temperature = (0.1 * math.log(4.0) + 1) ** 2
    assert pe.attention_scale(16) == pytest.approx(temperature)
    assert pe.attention_scale(128) == pytest.approx(temperature * math.log(128) / math.log(32))


def test_yarn_temperature_reaches_the_attention_logits():
    pe = rope_pe(scaling="yarn", scaling_factor=4.0)
    generator = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 4, 12, 16, generator=generator) for _ in range(3))
    output = attend(q, k, v, causal=True, pe=pe)
    logits = (q.double() @ k.double().transpose(-1, -2)) * (0.1 * math.log(4) + 1) ** 2 / 4
    logits = logits.masked_fill(torch.ones(12, 12).triu(1).bool(), float("-inf"))
    expected = logits.softmax(-1) @ v.double()
    torch.testing.assert_close(output.double(), expected, rtol=1e-5, atol=1e-5)


# -- factor 1 and validation -----------------------------------------------------------------
@pytest.mark.parametrize("scaling", STATIC_SCALINGS)
@pytest.mark.parametrize("length", [10, 32, 300])
def test_factor_one_equals_no_scaling_exactly(scaling, length):
    scaled = rope_pe(scaling=scaling, scaling_factor=1.0)
    plain = rope_pe()
    generator = torch.Generator().manual_seed(8)
    q = torch.randn(1, 4, length, 16, generator=generator)
    k = torch.randn(1, 4, length, 16, generator=generator)
    positions = torch.arange(length) * 7
    for got, want in zip(
        rotate_with(scaled, q, k, positions), rotate_with(plain, q, k, positions), strict=True
    ):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert scaled.attention_scale(length) == plain.attention_scale(length) == 1.0


def test_dynamic_ntk_factor_one_is_plain_within_and_paper_dynamic_beyond():
    # Hugging Face's formula at s = 1 is the YaRN paper's Dynamic NTK, s' = max(1, ℓ/L):
    # a no-op up to L, a real scaling beyond it
    pe = rope_pe(scaling="dynamic_ntk", scaling_factor=1.0)
    assert torch.equal(
        pe.inverse_frequencies(torch.arange(32)), rope_pe().inverse_frequencies(torch.arange(32))
    )
    theta = pe.inverse_frequencies(torch.arange(96)).double()
    expected = ref_theta(16, 10000.0 * (96 / 32) ** (16 / 14))
    torch.testing.assert_close(theta, torch.from_numpy(expected), rtol=2e-6, atol=0)


@pytest.mark.parametrize(
    ("scaling", "factor"),
    # every scaling refuses one factor below 1; one scaling refuses each kind of bad factor
    [(scaling, 0.5) for scaling in SCALINGS] + [(SCALINGS[1], f) for f in (0.999, 0.0, -2.0)],
)
def test_scaling_factor_below_one_raises(scaling, factor):
    with pytest.raises(ValueError, match=r"pe\.scaling_factor"):
        rope_pe(scaling=scaling, scaling_factor=factor)


def test_unknown_scaling_raises_listing_the_allowed():
    with pytest.raises(ValueError, match=r"pe\.scaling") as error:
        rope_pe(scaling="linear", scaling_factor=2.0)
    assert all(name in str(error.value) for name in SCALINGS)


@pytest.mark.parametrize("scaling", ["dynamic_ntk", "yarn"])
def test_scaling_without_a_training_length_raises(scaling):
    with pytest.raises(ValueError, match=r"pe\.original_max_position"):
        RoPE(d_model=64, n_heads=4, scaling=scaling, scaling_factor=2.0)


def test_original_max_position_overrides_train_positions():
    pe = rope_pe(scaling="yarn", scaling_factor=4.0, original_max_position=2048)
    assert pe.original_max_position == 2048
    expected = torch.from_numpy(ref_yarn_theta_code(16, 10000.0, 4.0, 2048)).float()
    torch.testing.assert_close(pe.inverse_frequencies(torch.arange(4)), expected)


def test_original_max_position_defaults_to_randomized_range():
    pe = RoPE(
        d_model=64,
        n_heads=4,
        train_positions=32,
        max_positions=64,
        randomized=True,
        max_position=256,
        scaling="yarn",
        scaling_factor=2.0,
    )
    assert pe.original_max_position == 256
