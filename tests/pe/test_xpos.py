"""pe=xpos (``lengen.pe.xpos``) against Sun et al. 2023 / torchscale ``XPOS``.

References are written here in float64 numpy: RoPE's rotation times the decay ζ_i^(n/γ) on
queries and ζ_i^(−m/γ) on keys, so that scores depend on the offset only and decay with it; the
module's centring keeps long positions finite. γ (``scale_base``) defaults to the paper's ratio
to the training length.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers import qk_scores, ref_rotate, ref_theta, rope_pe, rotate_with, toeplitz_scores
from lengen.pe.xpos import XPos, apply_xpos, xpos_decay_rates, xpos_scale

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent reference -------------------------------------------------------------------
def ref_zeta(dim: int, gamma: float = 0.4) -> np.ndarray:
    """xPos: ζ_i = (i/(d/2) + γ')/(1 + γ'), i = 0 … d/2 − 1 (torchscale: (2i + 0.4d)/(1.4d))."""
    return np.array([(i / (dim / 2) + gamma) / (1 + gamma) for i in range(dim // 2)])


# -- decay and rotation ----------------------------------------------------------------------
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
        qk_scores(rotated_q, rotated_k).double(), expected, rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("shift", [1, 37, 1000])
def test_xpos_scores_depend_only_on_offset(shift):
    pe = XPos(d_model=64, n_heads=4, causal=True)
    generator = torch.Generator().manual_seed(18)
    q, k = torch.randn(2, 4, 12, 16, generator=generator), torch.randn(2, 4, 12, 16)
    positions = torch.arange(12)
    before = qk_scores(*rotate_with(pe, q, k, positions))
    after = qk_scores(*rotate_with(pe, q, k, positions + shift))
    # fp32 angles near 1000 rad carry ~1e-4 rad of rounding
    torch.testing.assert_close(after, before, rtol=1e-4, atol=5e-4)


@pytest.mark.parametrize("shift", [1, 5, 30])
def test_xpos_scores_are_toeplitz_within_a_sequence(shift):
    matrix = toeplitz_scores(XPos(d_model=64, n_heads=4, causal=True), 64)
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
    xpos_row = qk_scores(*rotate_with(xpos, q, k, positions))[0, 0, -1].double()  # query n = 399
    rope_row = qk_scores(*rotate_with(rope, q, k, positions))[0, 0, -1].double()
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
    far = qk_scores(*rotate_with(pe, q, k, positions))
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


# -- options; scale_base sized from the run's training positions -----------------------------
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
