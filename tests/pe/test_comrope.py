"""pe=comrope (``lengen.pe.comrope``): ComRoPE (Yu et al. 2025), commuting learned generators,
LD and AP, against a float64 re-derivation with ``torch.linalg.matrix_exp`` of the reference's
``get_exponent_matrix`` / ``get_rotation_matrix`` (Longin-Yu/ComRoPE, ``model.py``)."""

from __future__ import annotations

import pytest
import torch

from helpers import grid_cells
from lengen.pe.comrope import ComRoPE
from lengen.pe.rope import rotate_pairs

pytestmark = pytest.mark.usefixtures("single_thread")


def comrope(**options):
    keywords = dict(d_model=24, n_heads=2, axes=2, train_positions=4, causal=False)
    return ComRoPE(**{**keywords, **options})


def reference_exponent(pe, layer=0):
    """The reference's angle matrices, float64, written from ``model.py`` -> (H, A, n, b, b):
    LD: (F − Fᵀ) · multiplier; AP: (F − Fᵀ) expanded over the axes times mask[a, j] = (j % A
    == a)."""
    freqs = pe.bases.detach().view(pe.base_shape)[layer].double()[:, None]  # (H, 1, n, b, b)
    skew = freqs - freqs.transpose(-1, -2)
    blocks = freqs.shape[2]
    if pe.cfg.variant == "ld":
        multiplier = pe.scales.detach().view(pe.scale_shape)[layer].double()  # (A, n)
        return skew * multiplier[None, :, :, None, None]
    mask = torch.zeros(pe.axes, blocks, dtype=torch.float64)
    for axis in range(pe.axes):
        mask[axis, axis :: pe.axes] = 1.0
    return skew.expand(-1, pe.axes, -1, -1, -1) * mask[None, :, :, None, None]


def reference_rotate(pe, x, coordinates):
    """R = matrix_exp(Σ_a A_a p_a) per block, block-diagonal, applied as R x (float64)."""
    exponent = reference_exponent(pe)  # (H, A, n, b, b)
    log_r = torch.einsum("ta,hanij->htnij", coordinates.double(), exponent)
    rotation = torch.linalg.matrix_exp(log_r.contiguous())  # (H, T, n, b, b)
    dense = torch.stack([torch.stack([torch.block_diag(*t) for t in h]) for h in rotation])
    return torch.einsum("htij,bhtj->bhti", dense, x.double())


def scores(pe, q, k, q_positions, k_positions):
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    return (rotated_q.double() * rotated_k.double()).sum(-1)  # (B, H, T)


@pytest.mark.parametrize("variant", ["ld", "ap"])
def test_comrope_rotation_equals_the_matrix_exponential_of_the_reference(variant):
    torch.manual_seed(0)
    pe = comrope(variant=variant, block_size=3)
    positions = grid_cells((4, 4))
    q = torch.randn(1, 2, 16, 12)
    rotated, _ = pe.rotate(q, q, positions, positions)
    expected = reference_rotate(pe, q, positions / 4)  # coordinates p / side
    torch.testing.assert_close(rotated.double(), expected, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["ld", "ap"])
def test_comrope_scores_depend_on_the_offset_only(variant):
    torch.manual_seed(0)
    pe = comrope(variant=variant, block_size=6, normalize=False, init_std=0.5)
    q, k = torch.randn(2, 1, 2, 3, 12).unbind(0)
    x, y = torch.tensor([[0, 1], [2, 2], [1, 3]]), torch.tensor([[3, 0], [0, 1], [2, 2]])
    shift = torch.tensor([4, 7])
    torch.testing.assert_close(
        scores(pe, q, k, x, y), scores(pe, q, k, x + shift, y + shift), atol=1e-4, rtol=1e-4
    )


def test_comrope_generators_commute():
    torch.manual_seed(0)
    generators = comrope(block_size=4).generators().double()  # (H, A, n, b, b)
    first, second = generators[:, 0], generators[:, 1]
    torch.testing.assert_close(first @ second, second @ first, atol=1e-6, rtol=1e-6)


def test_comrope_ld_with_blocks_of_two_is_a_mixed_rotation():
    # (F − Fᵀ) of a 2×2 block is −f·J with f = F01 − F10: pair j turns by −Σ_a θ_{a,j} f_{h,j} p_a
    torch.manual_seed(0)
    pe = comrope(normalize=False)
    positions = grid_cells((3, 3))
    q = torch.randn(1, 2, 9, 12)
    bases = pe.bases.detach().view(pe.base_shape)[0]  # (H, 6, 2, 2)
    f = bases[..., 0, 1] - bases[..., 1, 0]  # (H, 6)
    theta = pe.scales.detach().view(pe.scale_shape)[0]  # (A, 6)
    frequencies = -f[:, :, None] * theta.T[None]  # (H, 6 pairs, A)
    angles = torch.einsum("ta,hpa->htp", positions.float(), frequencies)
    rotated, _ = pe.rotate(q, q, positions, positions)
    torch.testing.assert_close(rotated, rotate_pairs(q, angles), atol=2e-5, rtol=1e-5)


def test_comrope_ap_with_blocks_of_two_is_axial_with_the_axes_in_turn():
    # pair j turns by −f_{h,j} · p_{j mod A}: each pair reads one coordinate
    torch.manual_seed(0)
    pe = comrope(variant="ap", normalize=False)
    positions = grid_cells((3, 3))
    q = torch.randn(1, 2, 9, 12)
    bases = pe.bases.detach().view(pe.base_shape)[0]
    f = bases[..., 0, 1] - bases[..., 1, 0]  # (H, 6)
    coordinate = positions[:, torch.arange(6) % 2].float()  # (T, 6): p_{j mod 2}
    angles = -f[:, None, :] * coordinate[None]  # (H, T, 6)
    rotated, _ = pe.rotate(q, q, positions, positions)
    torch.testing.assert_close(rotated, rotate_pairs(q, angles), atol=2e-5, rtol=1e-5)


def test_comrope_on_a_sequence_is_rope_with_learned_frequencies():
    torch.manual_seed(0)
    pe = ComRoPE(d_model=24, n_heads=2, normalize=False)
    q = torch.randn(1, 2, 5, 12)
    bases = pe.bases.detach().view(pe.base_shape)[0]
    f = bases[..., 0, 1] - bases[..., 1, 0]  # (H, 6)
    frequencies = -f * pe.scales.detach().view(pe.scale_shape)[0, 0]  # (H, 6)
    angles = torch.arange(5.0)[None, :, None] * frequencies[:, None, :]  # (H, T, 6)
    rotated, _ = pe.rotate(q, q, torch.arange(5), torch.arange(5))
    torch.testing.assert_close(rotated, rotate_pairs(q, angles), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", ["ld", "ap"])
def test_comrope_gradients_reach_every_parameter(variant):
    pe = comrope(variant=variant, n_layers=2)
    positions = grid_cells((2, 2))
    q = torch.randn(1, 2, 4, 12)
    total = sum(pe.for_layer(i).rotate(q, q, positions, positions)[0].sum() for i in range(2))
    total.backward()
    for parameter in pe.parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0


def test_comrope_ap_needs_an_equal_share_of_blocks_per_axis():
    with pytest.raises(ValueError, match=r"^pe\.variant=ap gives each of the 2 axes"):
        comrope(variant="ap", block_size=4)  # 12 / 4 = 3 blocks for 2 axes


def test_comrope_variant_is_one_of_ld_ap():
    with pytest.raises(ValueError, match=r"^pe\.variant must be one of ld, ap; got 'xy'$"):
        comrope(variant="xy")


def test_comrope_readout_rows_are_not_rotated():
    pe = comrope()
    positions = grid_cells((3, 3), readout=True)  # the last row is [-1, -1]
    q = torch.randn(1, 2, 10, 12)
    rotated, _ = pe.rotate(q, q, positions, positions)
    torch.testing.assert_close(rotated[:, :, -1], q[:, :, -1])
