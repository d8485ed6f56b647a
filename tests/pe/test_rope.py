"""RoPE extensions (partial rotary, p-RoPE, PI / NTK / dynamic NTK / YaRN scaling), xPos and the
sinusoidal column layouts, against the published formulas.

References are written here from the papers in float64 numpy / math, never from lengen's own
helpers: Su et al. 2021 eq. 34 (RoPE), GPT-NeoX ``rotary_pct`` (partial rotary), Barbero et al.
2025 ``apply_p_rope`` (p-RoPE), Chen et al. 2023 (PI), Peng et al. 2024 §3 (NTK-aware, dynamic
scaling, NTK-by-parts ramp, YaRN temperature), Hugging Face ``dynamic``, the YaRN authors' code
(jquesnelle/yarn ``scaled_rope/LlamaYaRNScaledRotaryEmbedding.py``) and Hugging Face's
``_compute_yarn_parameters`` (YaRN as used: the ramp linear in the pair index),
Sun et al. 2023 / torchscale ``XPOS`` (xPos), Vaswani et al. 2017 §3.5 (sinusoids).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import Tensor

from helpers import CONFIG_DIR
from lengen.model.kernels import attend
from lengen.pe.rope import (
    SCALINGS,
    RoPE,
    apply_rope,
    p_rope_pairs,
    rope_inverse_frequencies,
    rotary_dimension,
    rotate_pairs,
    yarn_ramp,
)
from lengen.pe.sinusoidal import Sinusoidal, sinusoidal_table
from lengen.pe.xpos import XPos, apply_xpos, xpos_decay_rates, xpos_scale

PE_DIR = CONFIG_DIR / "pe"
STATIC_SCALINGS = ["pi", "ntk", "yarn"]

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent references ------------------------------------------------------------------
def ref_theta(dim: int, base: float) -> np.ndarray:
    """RoFormer: θ_i = base^(−2i/dim), i = 0 … dim/2 − 1, float64."""
    return np.array([base ** (-2 * i / dim) for i in range(dim // 2)], dtype=np.float64)


def ref_rotate(
    x: Tensor, positions, theta: np.ndarray, layout: str = "interleaved", magnitude=None
) -> np.ndarray:
    """Rotate the first 2·len(theta) dims of x as complex pairs by e^(i·p·θ_j) (times an
    optional per-(position, pair) magnitude); the other dims pass. float64 numpy."""
    values = x.detach().double().numpy()
    rotated = 2 * len(theta)
    half = rotated // 2
    angles = np.asarray(positions, dtype=np.float64)[..., None] * theta  # (..., seq, r/2)
    if layout == "interleaved":
        pairs = values[..., 0:rotated:2] + 1j * values[..., 1:rotated:2]
    else:
        pairs = values[..., :half] + 1j * values[..., half:rotated]
    turned = pairs * np.exp(1j * angles)
    if magnitude is not None:
        turned = turned * magnitude
    out = values.copy()
    if layout == "interleaved":
        out[..., 0:rotated:2], out[..., 1:rotated:2] = turned.real, turned.imag
    else:
        out[..., :half], out[..., half:rotated] = turned.real, turned.imag
    return out


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


def ref_zeta(dim: int, gamma: float = 0.4) -> np.ndarray:
    """xPos: ζ_i = (i/(d/2) + γ')/(1 + γ'), i = 0 … d/2 − 1 (torchscale: (2i + 0.4d)/(1.4d))."""
    return np.array([(i / (dim / 2) + gamma) / (1 + gamma) for i in range(dim // 2)])


def scores(q: Tensor, k: Tensor) -> Tensor:
    return q @ k.transpose(-1, -2)


def rope_pe(**options) -> RoPE:
    return RoPE(d_model=64, n_heads=4, train_positions=32, **options)  # head_dim 16


def rotate_with(pe, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
    """q, k (..., T, hd) through pe.rotate at one set of positions."""
    return pe.rotate(q, k, positions, positions)


# -- defaults are today's RoPE ---------------------------------------------------------------
def test_default_rope_module_equals_plain_apply_rope_bitwise():
    pe = RoPE(d_model=64, n_heads=4, train_positions=32)
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 9, 16, generator=generator)
    k = torch.randn(2, 4, 20, 16, generator=generator)
    q_positions, k_positions = torch.arange(11, 20) * 37, torch.arange(20) * 37
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    torch.testing.assert_close(rotated_q, apply_rope(q, q_positions), rtol=0, atol=0)
    torch.testing.assert_close(rotated_k, apply_rope(k, k_positions), rtol=0, atol=0)
    assert pe.attention_scale(1000) == 1.0
    assert pe.describe() == {}


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


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"fraction": 0.0}, r"pe\.fraction"),
        ({"fraction": 1.5}, r"pe\.fraction"),
        ({"p": -0.1}, r"pe\.p\b"),
        ({"p": 1.01}, r"pe\.p\b"),
        ({"original_max_position": 0}, r"pe\.original_max_position"),
        ({"yarn_alpha": 4.0, "yarn_beta": 2.0}, r"pe\.yarn_beta"),
    ],
)
def test_bad_options_name_their_key(options, key):
    with pytest.raises(ValueError, match=key):
        rope_pe(**options)


# -- partial rotary --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("head_dim", "fraction", "expected"),
    [(64, 1.0, 64), (64, 0.5, 32), (64, 0.3, 18), (64, 0.25, 16), (64, 0.01, 2), (10, 0.5, 4)],
)
def test_rotary_dimension_rounds_down_to_even(head_dim, fraction, expected):
    assert rotary_dimension(head_dim, fraction) == expected


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.3])
def test_partial_rotary_leaves_the_tail_untouched(fraction, layout):
    pe = RoPE(d_model=128, n_heads=4, fraction=fraction, layout=layout)  # head_dim 32
    rotated_dim = rotary_dimension(32, fraction)
    generator = torch.Generator().manual_seed(9)
    q, k = torch.randn(2, 4, 25, 32, generator=generator), torch.randn(2, 4, 25, 32)
    rotated_q, rotated_k = rotate_with(pe, q, k, torch.arange(25) * 11)
    torch.testing.assert_close(rotated_q[..., rotated_dim:], q[..., rotated_dim:], rtol=0, atol=0)
    torch.testing.assert_close(rotated_k[..., rotated_dim:], k[..., rotated_dim:], rtol=0, atol=0)
    assert not torch.allclose(rotated_q[..., :rotated_dim], q[..., :rotated_dim], atol=1e-2)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_partial_rotary_head_is_a_smaller_rope(fraction, layout):
    # GPT-NeoX: the first r dims are a RoPE of dimension r, θ_i = base^(−2i/r)
    pe = RoPE(d_model=128, n_heads=4, fraction=fraction, layout=layout)
    rotated_dim = rotary_dimension(32, fraction)
    generator = torch.Generator().manual_seed(10)
    q, k = torch.randn(2, 4, 25, 32, generator=generator), torch.randn(2, 4, 25, 32)
    positions = torch.arange(25) * 3
    rotated_q, _ = rotate_with(pe, q, k, positions)
    smaller = apply_rope(q[..., :rotated_dim].contiguous(), positions, layout=layout)
    torch.testing.assert_close(rotated_q[..., :rotated_dim], smaller, rtol=0, atol=0)
    expected = ref_rotate(q, positions.numpy(), ref_theta(rotated_dim, 10000.0), layout)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=2e-5)


def test_apply_rope_fraction_argument_matches_module():
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(3, 10, 32, generator=generator)
    positions = torch.arange(10)
    expected = ref_rotate(x, positions.numpy(), ref_theta(8, 10000.0))
    torch.testing.assert_close(
        apply_rope(x, positions, fraction=0.25).double(),
        torch.from_numpy(expected),
        rtol=0,
        atol=1e-5,
    )


# -- p-RoPE ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dim", "p", "expected"),
    [(16, 1.0, 8), (16, 0.5, 4), (16, 0.3, 2), (16, 0.0, 0), (64, 0.75, 24)],
)
def test_p_rope_pair_count_follows_the_paper(dim, p, expected):
    # Barbero et al.: rope_angles = int(rope_percentage * head_dim // 2)
    assert p_rope_pairs(dim, p) == expected


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("p", [0.25, 0.5, 0.75])
def test_p_rope_leaves_the_lowest_frequencies_unrotated(p, layout):
    pe = rope_pe(p=p, layout=layout)  # head_dim 16, 8 pairs
    kept = int(p * 16 // 2)
    generator = torch.Generator().manual_seed(12)
    q, k = torch.randn(2, 4, 20, 16, generator=generator), torch.randn(2, 4, 20, 16)
    positions = torch.arange(20) * 5
    rotated_q, _ = rotate_with(pe, q, k, positions)
    theta = ref_theta(16, 10000.0)
    theta[kept:] = 0.0  # the lowest frequencies: θ = 0, the highest keep their RoPE values
    expected = ref_rotate(q, positions.numpy(), theta, layout)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=1e-5)
    # the unrotated pairs come back bit for bit
    if layout == "interleaved":
        untouched = slice(2 * kept, 16)
        torch.testing.assert_close(rotated_q[..., untouched], q[..., untouched], rtol=0, atol=0)
    else:
        for part in (slice(kept, 8), slice(8 + kept, 16)):
            torch.testing.assert_close(rotated_q[..., part], q[..., part], rtol=0, atol=0)


def test_p_zero_is_nope():
    pe = rope_pe(p=0.0)
    generator = torch.Generator().manual_seed(13)
    q, k = torch.randn(1, 4, 9, 16, generator=generator), torch.randn(1, 4, 9, 16)
    rotated_q, rotated_k = rotate_with(pe, q, k, torch.arange(9) * 100)
    assert torch.equal(rotated_q, q) and torch.equal(rotated_k, k)


# -- relative positions for every option ----------------------------------------------------
OPTION_SETS = {
    "plain": {},
    "half": {"layout": "half"},
    "fraction": {"fraction": 0.5},
    "p": {"p": 0.5},
    "pi": {"scaling": "pi", "scaling_factor": 4.0},
    "ntk": {"scaling": "ntk", "scaling_factor": 4.0},
    "dynamic_ntk": {"scaling": "dynamic_ntk", "scaling_factor": 4.0},
    "yarn": {"scaling": "yarn", "scaling_factor": 4.0},
    "all": {"fraction": 0.5, "p": 0.5, "layout": "half", "scaling": "yarn", "scaling_factor": 2.0},
}


def _toeplitz_scores(pe, length: int) -> Tensor:
    """The same query vector and the same key vector at every position of one sequence."""
    generator = torch.Generator().manual_seed(14)
    head_dim = pe.head_dim
    q = torch.randn(head_dim, generator=generator).expand(1, 1, length, head_dim)
    k = torch.randn(head_dim, generator=generator).expand(1, 1, length, head_dim)
    rotated_q, rotated_k = rotate_with(pe, q, k, torch.arange(length))
    return scores(rotated_q, rotated_k)[0, 0]  # (length, length)


@pytest.mark.parametrize("name", list(OPTION_SETS))
@pytest.mark.parametrize("shift", [1, 5, 30])
def test_scores_depend_only_on_offset_within_a_sequence(name, shift):
    # scores(m, n) = scores(m + s, n + s) for fixed vectors: a Toeplitz score matrix (this form
    # also covers dynamic NTK, whose frequencies depend on the sequence's length)
    matrix = _toeplitz_scores(rope_pe(**OPTION_SETS[name]), 64)
    torch.testing.assert_close(
        matrix[shift:, shift:], matrix[:-shift, :-shift], rtol=1e-4, atol=1e-4
    )
    assert not torch.allclose(matrix[0, 1:], matrix[0, 0].expand(63), atol=1e-3)


@pytest.mark.parametrize("name", [n for n in OPTION_SETS if n != "dynamic_ntk"])
@pytest.mark.parametrize("shift", [7, 1000])
def test_scores_unchanged_when_all_positions_shift(name, shift):
    pe = rope_pe(**OPTION_SETS[name])
    generator = torch.Generator().manual_seed(15)
    q, k = torch.randn(2, 4, 10, 16, generator=generator), torch.randn(2, 4, 10, 16)
    positions = torch.arange(10)
    before = scores(*rotate_with(pe, q, k, positions))
    after = scores(*rotate_with(pe, q, k, positions + shift))
    # fp32 angles near 1000 rad carry ~1e-4 rad of rounding
    torch.testing.assert_close(after, before, rtol=1e-4, atol=5e-4)


# -- describe ---------------------------------------------------------------------------------
def test_describe_lists_the_non_default_options():
    pe = rope_pe(fraction=0.5, p=0.5, scaling="yarn", scaling_factor=4.0)
    assert pe.describe() == {
        "fraction": 0.5,
        "rotary_dim": 8,
        "p": 0.5,
        "rotated_pairs": 2,
        "scaling": "yarn",
        "scaling_factor": 4.0,
        "original_max_position": 32,
        "yarn_alpha": 1.0,
        "yarn_beta": 32.0,
        "yarn_ramp": "dimension",
        "yarn_truncate": True,
        "yarn_logit_scale": pytest.approx((0.1 * math.log(4) + 1) ** 2),
    }
    assert rope_pe(scaling="pi", scaling_factor=2.0).describe() == {
        "scaling": "pi",
        "scaling_factor": 2.0,
    }


# -- xPos ------------------------------------------------------------------------------------
def test_xpos_decay_rates_closed_form():
    # d = 8, γ' = 0.4: ζ = (0 + .4)/1.4, (.25 + .4)/1.4, (.5 + .4)/1.4, (.75 + .4)/1.4
    expected = torch.tensor([0.4 / 1.4, 0.65 / 1.4, 0.9 / 1.4, 1.15 / 1.4])
    torch.testing.assert_close(xpos_decay_rates(8), expected, rtol=1e-7, atol=0)
    torch.testing.assert_close(
        xpos_decay_rates(64, 0.4).double(), torch.from_numpy(ref_zeta(64)), rtol=1e-7, atol=0
    )


@pytest.mark.parametrize("scale_base", [512.0, 64.0])
def test_xpos_decay_factor_closed_form(scale_base):
    positions = torch.tensor([0, 1, 100, 511, 2000])
    got = xpos_scale(positions, 16, scale_base=scale_base, gamma=0.4).double()
    expected = ref_zeta(16)[None, :] ** (positions.double().numpy()[:, None] / scale_base)
    torch.testing.assert_close(got, torch.from_numpy(expected), rtol=1e-5, atol=0)


def test_apply_xpos_matches_reference():
    generator = torch.Generator().manual_seed(16)
    x = torch.randn(2, 20, 16, generator=generator)
    positions = torch.arange(20) * 9
    zeta_power = ref_zeta(16)[None, :] ** (positions.numpy()[:, None] / 512)
    for downscale, magnitude in ((False, zeta_power), (True, 1 / zeta_power)):
        expected = ref_rotate(x, positions.numpy(), ref_theta(16, 10000.0), magnitude=magnitude)
        got = apply_xpos(x, positions, downscale=downscale)
        torch.testing.assert_close(got.double(), torch.from_numpy(expected), rtol=1e-5, atol=1e-5)


def test_xpos_module_scores_match_the_paper():
    # q at n: rotate(q, n)·ζ^(n/γ); k at m: rotate(k, m)·ζ^(−m/γ); the module's centring of the
    # positions leaves every product unchanged
    pe = XPos(d_model=64, n_heads=4, causal=True)
    generator = torch.Generator().manual_seed(17)
    q, k = torch.randn(1, 4, 30, 16, generator=generator), torch.randn(1, 4, 30, 16)
    positions = torch.arange(30) * 13
    rotated_q, rotated_k = pe.rotate(q, k, positions, positions)
    power = ref_zeta(16)[None, :] ** (positions.numpy()[:, None] / 512)
    theta = ref_theta(16, 10000.0)
    ref_q = ref_rotate(q, positions.numpy(), theta, magnitude=power)
    ref_k = ref_rotate(k, positions.numpy(), theta, magnitude=1 / power)
    expected = torch.from_numpy(ref_q @ np.swapaxes(ref_k, -1, -2))
    torch.testing.assert_close(
        scores(rotated_q, rotated_k).double(), expected, rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("shift", [1, 37, 1000])
def test_xpos_scores_depend_only_on_offset(shift):
    pe = XPos(d_model=64, n_heads=4, causal=True)
    generator = torch.Generator().manual_seed(18)
    q, k = torch.randn(2, 4, 12, 16, generator=generator), torch.randn(2, 4, 12, 16)
    positions = torch.arange(12)
    before = scores(*rotate_with(pe, q, k, positions))
    after = scores(*rotate_with(pe, q, k, positions + shift))
    # fp32 angles near 1000 rad carry ~1e-4 rad of rounding
    torch.testing.assert_close(after, before, rtol=1e-4, atol=5e-4)


@pytest.mark.parametrize("shift", [1, 5, 30])
def test_xpos_scores_are_toeplitz_within_a_sequence(shift):
    matrix = _toeplitz_scores(XPos(d_model=64, n_heads=4, causal=True), 64)
    torch.testing.assert_close(
        matrix[shift:, shift:], matrix[:-shift, :-shift], rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("pair", [0, 3, 7])
def test_xpos_decays_with_distance_for_aligned_vectors(pair):
    # q = k, supported on one pair: xPos score / RoPE score = ζ_pair^((n−m)/γ), < 1 and
    # strictly decreasing in the distance n − m > 0
    xpos = XPos(d_model=64, n_heads=4, causal=True)
    rope = rope_pe()
    vector = torch.zeros(16)
    vector[2 * pair : 2 * pair + 2] = torch.tensor([0.6, 0.8])
    q = k = vector.expand(1, 1, 400, 16)
    positions = torch.arange(400)
    xpos_row = scores(*rotate_with(xpos, q, k, positions))[0, 0, -1].double()  # query n = 399
    rope_row = scores(*rotate_with(rope, q, k, positions))[0, 0, -1].double()
    distance = 399 - positions.double()
    usable = rope_row.abs() > 0.05  # away from the zeros of cos(Δθ)
    ratio = xpos_row[usable] / rope_row[usable]
    expected = torch.tensor(ref_zeta(16)[pair]) ** (distance[usable] / 512)
    torch.testing.assert_close(ratio, expected, rtol=1e-3, atol=1e-4)
    assert (expected[1:] > expected[:-1]).all()  # distances run from 399 down to 0
    assert (expected[:-1] < 1).all()


def test_xpos_bidirectional_is_refused():
    with pytest.raises(ValueError, match=r"^pe: .*causal"):
        XPos(d_model=64, n_heads=4, causal=False)


def test_xpos_long_positions_stay_finite_thanks_to_centring():
    # ζ_0^(50000/512) ≈ 1e-53 underflows fp32: uncentred keys would be scaled by 1/0 = inf
    pe = XPos(d_model=64, n_heads=4, causal=True)
    generator = torch.Generator().manual_seed(19)
    q, k = torch.randn(1, 4, 8, 16, generator=generator), torch.randn(1, 4, 8, 16)
    positions = torch.arange(8) + 50_000
    assert not torch.isfinite(apply_xpos(k, positions, downscale=True)).all()
    far = scores(*rotate_with(pe, q, k, positions))
    assert torch.isfinite(far).all()
    offsets = positions.numpy()[:, None] - positions.numpy()[None, :]  # n − m, float64 below
    theta = ref_theta(16, 10000.0)
    expected = np.zeros((1, 4, 8, 8))
    for i in range(8):  # Σ_i Re[q_i conj(k_i) e^{i(n−m)θ_i}] ζ_i^((n−m)/γ)
        q_pair = q[..., 2 * i].double().numpy() + 1j * q[..., 2 * i + 1].double().numpy()
        k_pair = k[..., 2 * i].double().numpy() + 1j * k[..., 2 * i + 1].double().numpy()
        product = q_pair[..., :, None] * np.conj(k_pair[..., None, :])
        expected += (product * np.exp(1j * offsets * theta[i])).real * ref_zeta(16)[i] ** (
            offsets / 512
        )
    # fp32 angles near 50,000 rad carry ~3e-3 rad of rounding, as in plain RoPE
    torch.testing.assert_close(far.double(), torch.from_numpy(expected), rtol=0, atol=3e-2)


def test_xpos_bf16_inputs_scale_in_fp32():
    pe = XPos(d_model=64, n_heads=4, causal=True)
    generator = torch.Generator().manual_seed(20)
    q = torch.randn(1, 4, 8, 16, generator=generator).bfloat16()
    k = torch.randn(1, 4, 8, 16, generator=generator).bfloat16()
    positions = torch.arange(3000, 3008)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rotated_q, rotated_k = pe.rotate(q, k, positions, positions)
    assert rotated_q.dtype == rotated_k.dtype == torch.bfloat16
    exact_q, exact_k = pe.rotate(q.float(), k.float(), positions, positions)
    torch.testing.assert_close(rotated_q, exact_q.bfloat16(), rtol=0, atol=0)
    torch.testing.assert_close(rotated_k, exact_k.bfloat16(), rtol=0, atol=0)


def test_xpos_describe_and_options():
    assert XPos(d_model=64, n_heads=4).describe() == {
        "scale_base": 512.0,
        "scale_base_from": "the paper's 512 (training positions unknown)",
    }
    assert XPos(d_model=64, n_heads=4, scale_base=128.0).describe() == {
        "scale_base": 128.0,
        "scale_base_from": "given",
    }
    with pytest.raises(ValueError, match=r"pe\.scale_base"):
        XPos(d_model=64, n_heads=4, scale_base=0)
    with pytest.raises(ValueError, match=r"pe\.gamma"):
        XPos(d_model=64, n_heads=4, gamma=0.0)


@pytest.mark.parametrize(
    ("train_positions", "expected"), [(None, 512.0), (10, 5.0), (34, 17.0), (258, 129.0)]
)
def test_xpos_default_scale_base_keeps_the_papers_ratio(train_positions, expected):
    # the paper: γ = 512 for 1,024-token training, i.e. train_positions / 2
    pe = XPos(d_model=64, n_heads=4, train_positions=train_positions)
    assert pe.scale_base == expected
    assert pe.describe()["scale_base"] == expected
    assert pe.describe()["scale_base_from"] != "given"
    given = XPos(d_model=64, n_heads=4, train_positions=train_positions, scale_base=512)
    assert given.scale_base == 512.0 and given.describe()["scale_base_from"] == "given"


def test_xpos_default_scale_base_decays_within_training():
    # over the training distances the fastest pair decays as in the paper (ζ_0^2 ≈ 0.08), not
    # hardly at all as γ = 512 would at 34 positions (ζ_0^(34/512) ≈ 0.92)
    pe = XPos(d_model=64, n_heads=4, train_positions=34)
    decay = xpos_scale(torch.tensor([34]), 16, scale_base=pe.scale_base)[0, 0].item()
    assert decay == pytest.approx((0.4 / 1.4) ** 2, rel=1e-5)


@pytest.mark.parametrize("value", ["0", "-1", "true", "far"])
def test_xpos_bad_scale_base_is_refused_in_one_line(value):
    from helpers import compose_train
    from lengen.build import build
    from lengen.config import ConfigError

    with pytest.raises(ConfigError, match=r"^pe\.scale_base must be") as caught:
        build(compose_train("pe=xpos", f"pe.scale_base={value}"))
    assert "\n" not in str(caught.value)


def test_xpos_run_sizes_scale_base_from_its_training_positions():
    from helpers import compose_train
    from lengen.build import build

    data, model, _ = build(compose_train("pe=xpos", "data.len=64"))
    assert model.stack.pe.scale_base == data.max_position(data.train_len) / 2


# -- sinusoidal layouts ----------------------------------------------------------------------
def ref_concatenated_table(length: int, dim: int, base: float) -> np.ndarray:
    """tensor2tensor order with the paper's frequencies: [sin(p ω_0) … sin(p ω_{d/2−1}),
    cos(p ω_0) … cos(p ω_{d/2−1})], ω_i = base^(−2i/d)."""
    table = np.zeros((length, dim))
    for row in range(length):
        for i in range(dim // 2):
            angle = row / base ** (2 * i / dim)
            table[row, i] = math.sin(angle)
            table[row, dim // 2 + i] = math.cos(angle)
    return table


@pytest.mark.parametrize(("dim", "base"), [(4, 100.0), (16, 10000.0), (2, 10.0)])
def test_concatenated_table_matches_closed_form(dim, base):
    expected = torch.from_numpy(ref_concatenated_table(40, dim, base)).float()
    got = sinusoidal_table(40, dim, base, layout="concatenated")
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dim", [2, 8, 64])
def test_concatenated_table_is_a_column_permutation_of_interleaved(dim):
    interleaved = sinusoidal_table(100, dim, 500.0)
    concatenated = sinusoidal_table(100, dim, 500.0, layout="concatenated")
    # interleaved column 2i = concatenated column i, 2i+1 = concatenated column d/2 + i
    order = [c for i in range(dim // 2) for c in (i, dim // 2 + i)]
    torch.testing.assert_close(concatenated[:, order], interleaved, rtol=0, atol=0)


def test_sinusoidal_default_layout_is_interleaved():
    assert torch.equal(sinusoidal_table(9, 8), sinusoidal_table(9, 8, layout="interleaved"))
    assert Sinusoidal(d_model=8, n_heads=2).describe() == {}


def test_sinusoidal_module_concatenated_embeds_the_permuted_table():
    pe = Sinusoidal(d_model=16, n_heads=2, layout="concatenated")
    x = torch.zeros(1, 12, 16)
    torch.testing.assert_close(
        pe.embed(x, torch.arange(12))[0], sinusoidal_table(12, 16, layout="concatenated")
    )
    assert pe.describe() == {"layout": "concatenated"}


def test_sinusoidal_unknown_layout_raises():
    with pytest.raises(ValueError, match=r"pe\.layout"):
        sinusoidal_table(4, 8, layout="half")
    with pytest.raises(ValueError, match=r"pe\.layout"):
        Sinusoidal(d_model=8, n_heads=2, layout="split")


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_compiled_rotation_formula_equals_the_eager_one(fraction, monkeypatch):
    # eager interleaved RoPE multiplies complex numbers; under torch.compile (no complex code
    # in inductor) the real formula runs instead: both must be the same rotation
    pe = RoPE(d_model=128, n_heads=4, fraction=fraction)
    generator = torch.Generator().manual_seed(12)
    q, k = torch.randn(2, 4, 25, 32, generator=generator), torch.randn(2, 4, 25, 32)
    positions = torch.arange(25) * 7
    eager = rotate_with(pe, q, k, positions)
    asked = []
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: asked.append(1) or True)
    real = rotate_with(pe, q, k, positions)
    assert asked  # the real formula ran
    for a, b in zip(eager, real, strict=True):
        torch.testing.assert_close(a, b)


def test_rotation_accepts_a_tensor_at_an_odd_storage_offset():
    # a contiguous slice starting at an odd float cannot be viewed as complex numbers in place
    storage = torch.randn(1 + 3 * 5 * 8)
    x = storage[1:].view(3, 5, 8)
    assert x.is_contiguous() and x.storage_offset() == 1
    angles = torch.randn(5, 4)
    expected = rotate_pairs(x.clone(), angles)
    torch.testing.assert_close(rotate_pairs(x, angles), expected, rtol=0, atol=0)
