"""pe=alibi (``lengen.pe.alibi``) against Press et al. 2022 and its variants.

References are written here independently of lengen (plain Python ``math``, float64): the
slopes (powers of two and the interleaved rule for other head counts), the bias −m·|i − j|, the
bidirectional variants of the Chomsky-hierarchy code of Delétang et al. 2023 / Ruoss et al. 2023
(``asymmetric_offset``, ``separate``), learnable slopes, fp32 under bf16, and CROMA's 2-D ALiBi on
grids (Euclidean or Manhattan distance).
"""

from __future__ import annotations

import math

import pytest
import torch

from helpers import grid_cells, reference_block
from lengen.pe.alibi import ALiBi, alibi_slopes

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent references ------------------------------------------------------------------
def reference_alibi_slopes(n_heads: int) -> list[float]:
    """Press et al.: 2^k = the largest power of two <= n gets 2^(−8i/2^k), i = 1 … 2^k; the
    other n − 2^k heads take the odd-exponent slopes of 2^(k+1) heads, 2^(−8j/2^(k+1)) for
    j = 1, 3, 5, …"""
    k = 0
    while 2 ** (k + 1) <= n_heads:
        k += 1
    closest = 2**k
    slopes = [2.0 ** (-8 * i / closest) for i in range(1, closest + 1)]
    odd = [2.0 ** (-8 * j / (2 * closest)) for j in range(1, 2 * closest + 1, 2)]
    return slopes + odd[: n_heads - closest]


# -- slopes and bias -------------------------------------------------------------------------
# powers of two, one head, counts between powers (the interleaved rule) and a large count
@pytest.mark.parametrize("n_heads", [1, 2, 3, 5, 6, 8, 12, 16, 24, 31, 48, 64])
def test_alibi_slopes_follow_press_rule(n_heads):
    slopes = alibi_slopes(n_heads)
    expected = torch.tensor(reference_alibi_slopes(n_heads), dtype=torch.float64)
    assert slopes.dtype == torch.float32
    assert slopes.shape == (n_heads,)
    torch.testing.assert_close(slopes.double(), expected, rtol=1e-6, atol=0)


def test_alibi_slopes_eight_heads_are_halvings():
    expected = torch.tensor([1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256])
    torch.testing.assert_close(alibi_slopes(8), expected, rtol=0, atol=0)


@pytest.mark.parametrize("causal", [True, False])
def test_alibi_bias_golden_small(causal):
    # 2 heads: slopes 2^-4, 2^-8
    pe = ALiBi(d_model=4, n_heads=2, causal=causal)
    bias = pe.attention_bias(torch.arange(3), torch.arange(3))
    distance = torch.tensor([[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    expected = torch.stack([-distance / 16, -distance / 256])
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


def test_alibi_bias_equals_minus_slope_times_distance():
    n_heads = 6
    pe = ALiBi(d_model=12, n_heads=n_heads, causal=False)
    q_positions = torch.tensor([0, 4, 9, 30])
    k_positions = torch.arange(12)
    bias = pe.attention_bias(q_positions, k_positions)
    slopes = reference_alibi_slopes(n_heads)
    expected = torch.empty(n_heads, len(q_positions), len(k_positions), dtype=torch.float64)
    for h in range(n_heads):
        for a, i in enumerate(q_positions.tolist()):
            for b, j in enumerate(k_positions.tolist()):
                expected[h, a, b] = -slopes[h] * abs(i - j)
    assert bias.shape == (n_heads, 4, 12)
    torch.testing.assert_close(bias.double(), expected, rtol=1e-6, atol=1e-6)


def test_alibi_bidirectional_bias_is_symmetric():
    pe = ALiBi(d_model=32, n_heads=4, causal=False)
    positions = torch.arange(9)
    bias = pe.attention_bias(positions, positions)
    torch.testing.assert_close(bias, bias.transpose(1, 2), rtol=0, atol=0)
    assert (bias.diagonal(dim1=1, dim2=2) == 0).all()
    assert (bias[:, 0, 1:] < 0).all()


def test_alibi_unknown_bidirectional_raises():
    with pytest.raises(ValueError, match=r"pe\.bidirectional"):
        ALiBi(d_model=32, n_heads=4, causal=False, bidirectional="asymmetric")


def test_alibi_bias_fp32_under_autocast():
    pe = ALiBi(d_model=48, n_heads=12, causal=True)
    positions = torch.arange(3000, 3040)
    expected = pe.attention_bias(positions, torch.arange(3040))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bias = pe.attention_bias(positions, torch.arange(3040))
    assert expected.dtype == torch.float32
    assert bias.dtype == torch.float32
    torch.testing.assert_close(bias, expected, rtol=0, atol=0)


def test_alibi_slopes_stay_fp32_when_the_module_is_cast_to_bf16():
    pe = ALiBi(d_model=48, n_heads=12, causal=True).to(torch.bfloat16)
    positions = torch.tensor([0, 10_000])
    bias = pe.attention_bias(positions, positions)
    torch.testing.assert_close(
        bias[8, 1, 0], torch.tensor(-(2.0**-0.5) * 10_000), rtol=1e-6, atol=0
    )


# -- bidirectional variants and learnable slopes ---------------------------------------------
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


# -- grids -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["euclidean", "manhattan"])
def test_alibi_grid_bias_equals_a_slow_double_loop(kind):
    positions = grid_cells((3, 3), readout=True)
    pe = ALiBi(d_model=16, n_heads=4, causal=False, axes=2, grid_distance=kind)
    slopes = [2.0 ** (-8 * (h + 1) / 4) for h in range(4)]
    cells = positions.tolist()
    expected = torch.zeros(4, len(cells), len(cells), dtype=torch.float64)
    for h in range(4):
        for i, p in enumerate(cells):
            for j, q in enumerate(cells):
                if min(p) < 0 or min(q) < 0:
                    continue  # the readout slot: bias 0
                offsets = [a - b for a, b in zip(p, q, strict=True)]
                if kind == "euclidean":
                    distance = math.sqrt(sum(d * d for d in offsets))
                else:
                    distance = sum(abs(d) for d in offsets)
                expected[h, i, j] = -slopes[h] * distance
    bias = pe.attention_bias(positions, positions)
    assert bias.dtype == torch.float32
    torch.testing.assert_close(bias.double(), expected, atol=1e-6, rtol=0)


def test_alibi_grid_bias_is_not_read_per_offset():
    assert ALiBi(d_model=16, n_heads=4, axes=2).bias_is_relative is False
    assert ALiBi(d_model=16, n_heads=4).bias_is_relative is True


def test_alibi_grid_refuses_an_asymmetric_bidirectional_bias():
    with pytest.raises(ValueError, match=r"^pe\.bidirectional=separate .*allowed: symmetric$"):
        ALiBi(d_model=16, n_heads=4, causal=False, axes=2, bidirectional="separate")


def test_alibi_unknown_grid_distance_is_refused():
    with pytest.raises(ValueError, match=r"^pe\.grid_distance must be one of euclidean, manhattan"):
        ALiBi(d_model=16, n_heads=4, grid_distance="chebyshev")
