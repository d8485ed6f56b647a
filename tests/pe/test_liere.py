"""pe=liere (``lengen.pe.liere``): LieRE (Ostmeier et al. 2024), rotations exp(Σ_a p_a A_a)
with general learned skew-symmetric generators, against a float64 re-derivation with
``torch.linalg.matrix_exp`` of the reference's formula (StanfordMIMI/LieRE,
``models/rope_vit.py``: ``LierePositionEncoder``)."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import grid_cells
from lengen.pe.liere import LieRE
from lengen.pe.rope import rotate_pairs

pytestmark = pytest.mark.usefixtures("single_thread")


def reference_rotation(raw, coordinates):
    """The reference's R(p), float64: raw (A, n, b, b) of one head; upper = triu(raw, 1) − 0.5,
    bases = upper − upperᵀ, generator Σ_a p_a bases_a, matrix_exp per block -> (T, n, b, b)."""
    upper = torch.triu(raw.double(), diagonal=1) - 0.5
    bases = upper - upper.transpose(-1, -2)  # (A, n, b, b)
    generator = (coordinates.double()[:, :, None, None, None] * bases).sum(1)  # (T, n, b, b)
    return torch.linalg.matrix_exp(generator)


def block_diagonal(blocks):
    """(n, b, b) -> (n·b, n·b)."""
    return torch.block_diag(*blocks)


def liere(**options):
    keywords = dict(d_model=24, n_heads=2, axes=2, train_positions=4, causal=False)
    return LieRE(**{**keywords, **options})


def test_liere_rotation_equals_the_matrix_exponential_of_the_reference_formula():
    torch.manual_seed(0)
    pe = liere(block_size=4)
    positions = grid_cells((4, 4))
    q = torch.randn(1, 2, 16, 12)
    rotated, _ = pe.rotate(q, q, positions, positions)
    raw = pe.raw_generators.detach().view(pe.generator_shape)[0]  # (H, A, n, b, b)
    for head in range(2):
        rotations = reference_rotation(raw[head], positions / 4)  # coordinates p / side
        dense = torch.stack([block_diagonal(r) for r in rotations])  # (T, hd, hd)
        expected = torch.einsum("tij,tj->ti", dense, q[0, head].double())
        torch.testing.assert_close(rotated[0, head].double(), expected, atol=2e-5, rtol=1e-5)


def test_liere_starts_uniform_in_zero_to_two_pi():
    torch.manual_seed(3)
    pe = liere(block_size=4)
    torch.manual_seed(3)
    expected = torch.rand(pe.generator_shape) * 2 * math.pi
    torch.testing.assert_close(pe.raw_generators.detach().view(pe.generator_shape), expected)


def test_liere_on_a_grid_is_not_relative():
    # non-commuting generators: shifting both cells by the same offset changes q·k
    torch.manual_seed(0)
    pe = liere(normalize=False)  # one 12×12 block per head
    q, k = torch.randn(2, 1, 2, 1, 12).unbind(0)
    here = pe.rotate(q, k, torch.tensor([[0, 1]]), torch.tensor([[2, 0]]))
    there = pe.rotate(q, k, torch.tensor([[3, 4]]), torch.tensor([[5, 3]]))
    score_here = (here[0] * here[1]).sum(-1)
    score_there = (there[0] * there[1]).sum(-1)
    assert (score_here - score_there).abs().max() > 1e-2


def test_liere_on_a_sequence_is_relative():
    # one axis: one generator, which commutes with itself
    torch.manual_seed(0)
    pe = LieRE(d_model=24, n_heads=2, train_positions=8)
    q, k = torch.randn(2, 1, 2, 1, 12).unbind(0)
    here = pe.rotate(q, k, torch.tensor([1]), torch.tensor([5]))
    there = pe.rotate(q, k, torch.tensor([7]), torch.tensor([11]))
    torch.testing.assert_close((here[0] * here[1]).sum(-1), (there[0] * there[1]).sum(-1))


def test_liere_with_blocks_of_two_is_a_mixed_rotation():
    # a 2×2 block U − Uᵀ = −u·J turns its pair by −u · p: RoPE-Mixed's form, relative
    torch.manual_seed(0)
    pe = liere(block_size=2, normalize=False)
    positions = grid_cells((3, 3))
    q = torch.randn(1, 2, 9, 12)
    raw = pe.raw_generators.detach().view(pe.generator_shape)[0]  # (H, A, 6, 2, 2)
    frequencies = -raw[..., 0, 1].transpose(1, 2)  # (H, 6 pairs, A)
    angles = torch.einsum("ta,hpa->htp", positions.float(), frequencies)  # (H, T, 6)
    rotated, _ = pe.rotate(q, q, positions, positions)
    torch.testing.assert_close(rotated, rotate_pairs(q, angles), atol=2e-5, rtol=1e-5)


def test_liere_readout_rows_are_not_rotated():
    pe = liere()
    q = torch.randn(1, 2, 10, 12)
    rotated, _ = pe.rotate(q, q, grid_cells((3, 3), readout=True), grid_cells((3, 3), True))
    torch.testing.assert_close(rotated[:, :, -1], q[:, :, -1])


def test_liere_gradients_reach_every_layers_generators():
    pe = liere(n_layers=2)
    positions = grid_cells((2, 2))
    q = torch.randn(1, 2, 4, 12)
    total = sum(pe.for_layer(i).rotate(q, q, positions, positions)[0].sum() for i in range(2))
    total.backward()
    gradient = pe.raw_generators.grad.view(pe.generator_shape)
    assert all(gradient[layer].abs().sum() > 0 for layer in range(2))


def test_liere_block_size_must_divide_the_head_dimension():
    with pytest.raises(ValueError, match=r"^pe\.block_size=5 must divide the head dimension"):
        liere(block_size=5)
