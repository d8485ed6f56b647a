"""pe=sandwich (``lengen.pe.sandwich``) against Chi et al. 2023.

References are written here independently of lengen, as plain Python ``math`` in float64: the
profile is the inner product of sinusoidal embeddings, Σ cos(d / base^(2i/dim)) − dim/2, scaled
per head by the inverse of ALiBi's exponents.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import reference_block
from lengen.pe import sinusoidal_table
from lengen.pe.sandwich import Sandwich, sandwich_head_scales, sandwich_profile

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent reference -------------------------------------------------------------------
def reference_cos_sum(distance: int, dim: int, base: float) -> float:
    """Σ_{i=0}^{dim/2−1} cos(distance / base^(2i/dim)), float64."""
    return sum(math.cos(distance / base ** (2 * i / dim)) for i in range(dim // 2))


# -- profile and bias ------------------------------------------------------------------------
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
