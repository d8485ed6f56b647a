"""pe=kerple (``lengen.pe.kerple``) against Chi et al. 2022's closed forms.

References are written here independently of lengen, as plain Python ``math`` in float64: the
logarithmic bias −r1·log(1 + r2·|i − j|) and the power bias −r1·|i − j|^r2, the authors'
projection of r1, r2 and their initialisation.
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import reference_block
from lengen.pe.kerple import KERPLE, kerple_bias

pytestmark = pytest.mark.usefixtures("single_thread")


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
