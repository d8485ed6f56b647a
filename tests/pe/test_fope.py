"""FoPE (lengen.pe.fope): the rotation against a float64 re-derivation from the reference
code's formula, the paper's form against RoPE where they must agree, what relativity holds,
the coefficients' storage and gradients, and the torch-free refusals."""

from __future__ import annotations

import math

import pytest
import torch

from lengen.pe.config.fope import FoPEConfig
from lengen.pe.fope import FoPE
from lengen.pe.rope import apply_rope

D_MODEL, HEADS = 32, 2  # head_dim 16: 8 pairs
HEAD_DIM = D_MODEL // HEADS


def build(**options) -> FoPE:
    torch.manual_seed(0)
    options.setdefault("train_positions", 1000)
    return FoPE(d_model=D_MODEL, n_heads=HEADS, **options)


def qk(length: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, HEADS, length, HEAD_DIM, generator=generator)
    k = torch.randn(2, HEADS, length, HEAD_DIM, generator=generator)
    return q, k


def rederived(pe: FoPE, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """The reference's ``FourierEmbedding`` in float64, written from its formula: the kept
    frequencies base^(−2i/hd) ≥ 2π/L, each pair a complex factor Σ_d C cos + i Σ_d S sin over
    them (ones for the unmixed pairs), pair m = dims (m, m + hd/2)."""
    half = HEAD_DIM // 2
    floor = 2 * math.pi / 1000
    kept = [10000.0 ** (-2 * i / HEAD_DIM) for i in range(half)]
    kept = torch.tensor([w for w in kept if w >= floor], dtype=torch.float64)  # (D,)
    cos_coef = pe.cos_coefficients[0].double()  # (H, D, P)
    sin_coef = pe.sin_coefficients[0].double()
    angles = positions.double()[:, None] * kept  # (T, D)
    cos = torch.einsum("td,hdp->htp", angles.cos(), cos_coef)
    sin = torch.einsum("td,hdp->htp", angles.sin(), sin_coef)
    pad = half - cos.shape[-1]
    factor = torch.complex(cos, sin)  # (H, T, P)
    factor = torch.cat((factor, torch.full((*factor.shape[:-1], pad), 1 + 1j)), dim=-1)
    xd = x.double()
    pairs = torch.complex(xd[..., :half], xd[..., half:]) * factor  # (B, H, T, hd/2)
    return torch.cat((pairs.real, pairs.imag), dim=-1)


def scores(pe: FoPE, q, k, q_positions, k_positions) -> torch.Tensor:
    q_rot, k_rot = pe.rotate(q, k, q_positions, k_positions)
    return q_rot @ k_rot.transpose(-1, -2)  # (B, H, Tq, Tk)


def test_reference_form_equals_a_float64_rederivation_of_the_reference_formula():
    pe = build()
    q, k = qk(7)
    positions = torch.arange(3, 10)
    q_rot, k_rot = pe.rotate(q, k, positions, positions)
    torch.testing.assert_close(q_rot.double(), rederived(pe, q, positions), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(k_rot.double(), rederived(pe, k, positions), rtol=1e-5, atol=1e-5)


def test_reference_form_mixes_at_most_a_quarter_of_the_head_as_the_reference_does():
    pe = build()  # L = 1000: 5 of 8 frequencies reach 2π/1000; min(5, 16 // 4) = 4 pairs
    assert (pe.derived.frequencies, pe.mixed_pairs) == (5, 4)
    assert pe.cos_coefficients.shape == (1, HEADS, 5, 4)


def test_reference_form_at_gain_zero_takes_every_step_th_frequency():
    pe = build(coefficient_gain=0.0)  # step ⌈5/4⌉ = 2: pairs 0, 1, 2 take θ_0, θ_2, θ_4
    expected = torch.zeros(5, 4)
    expected[0, 0] = expected[2, 1] = expected[4, 2] = 1.0
    torch.testing.assert_close(pe.cos_coefficients[0, 0], expected)
    torch.testing.assert_close(pe.sin_coefficients[0, 1], expected)


def test_paper_form_at_gain_zero_without_a_floor_is_rope_in_the_half_layout():
    pe = build(form="paper", coefficient_gain=0.0, floor_ratio=0.0)
    q, k = qk(6)
    positions = torch.arange(6) * 5
    q_rot, _ = pe.rotate(q, k, positions, positions)
    torch.testing.assert_close(q_rot, apply_rope(q, positions, layout="half"))


def test_paper_form_leaves_clipped_pairs_unrotated():
    pe = build(form="paper")  # pairs 5, 6, 7 turn slower than 2π/1000: frequency zero
    q, k = qk(6)
    q_rot, _ = pe.rotate(q, k, torch.arange(6) * 50, torch.arange(6))
    clipped = [5, 6, 7, 13, 14, 15]  # pairs (m, m + 8)
    torch.testing.assert_close(q_rot[..., clipped], q[..., clipped])


def test_noise_free_paper_form_is_relative_with_clipping():
    pe = build(form="paper", coefficient_gain=0.0)
    q, k = qk(5)
    positions = torch.arange(5)
    near = scores(pe, q, k, positions, positions)
    far = scores(pe, q, k, positions + 300, positions + 300)
    torch.testing.assert_close(near, far, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("form", ["reference", "paper"])
def test_random_coefficients_make_the_scores_depend_on_more_than_the_offset(form):
    pe = build(form=form)
    q, k = qk(5)
    positions = torch.arange(5)
    near = scores(pe, q, k, positions, positions)
    far = scores(pe, q, k, positions + 300, positions + 300)
    assert (near - far).abs().max() > 1e-2


def test_fixed_coefficients_are_buffers_in_the_state_dict():
    pe = build()
    assert list(pe.parameters()) == []
    assert {"cos_coefficients", "sin_coefficients"} <= set(pe.state_dict())


def test_learnable_coefficients_get_gradients():
    pe = build(learnable=True)
    q, k = qk(5)
    scores(pe, q, k, torch.arange(5), torch.arange(5)).square().sum().backward()
    for name, parameter in pe.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


def test_every_layer_has_its_own_coefficients():
    pe = build(n_layers=2)
    q, k = qk(5)
    positions = torch.arange(5)
    first = scores(pe.for_layer(0), q, k, positions, positions)
    second = scores(pe.for_layer(1), q, k, positions, positions)
    assert (first - second).abs().max() > 1e-3


def test_rotation_runs_in_fp32_under_bf16_inputs():
    pe = build()
    q, k = qk(5)
    q_rot, _ = pe.rotate(q.bfloat16(), k.bfloat16(), torch.arange(5), torch.arange(5))
    expected, _ = pe.rotate(q.bfloat16().float(), k, torch.arange(5), torch.arange(5))
    torch.testing.assert_close(q_rot, expected.bfloat16())


def test_without_a_training_length_nothing_is_clipped_and_pe_info_says_so():
    pe = FoPE(d_model=D_MODEL, n_heads=HEADS)
    assert pe.derived.frequencies == HEAD_DIM // 2
    assert pe.describe()["floor"].startswith("none: built without a training length")


@pytest.mark.parametrize(
    ("key", "value"), [("coefficient_gain", -0.1), ("floor_ratio", -1), ("form", "fourier")]
)
def test_bad_options_are_refused_by_the_torch_free_config(key, value):
    with pytest.raises(ValueError, match=rf"pe\.{key}"):
        FoPEConfig.from_keys({key: value}, owner="FoPE")


def test_the_size_estimate_bounds_the_coefficients():
    pe = build(n_layers=3, floor_ratio=0.0, form="paper")  # every pair mixed: the largest case
    estimate = pe.cfg.parameter_sizes(pe.context)["model.d_model"]
    assert estimate >= sum(buffer.numel() for buffer in pe.buffers())


def test_a_floor_above_every_frequency_keeps_the_fastest_and_pe_info_says_so():
    pe = build(train_positions=5)  # 2π/5 > θ_0 = 1: every frequency under the floor
    assert (pe.derived.frequencies, pe.mixed_pairs) == (1, 1)
    assert pe.describe()["floor"].startswith("above every frequency")
