"""pe=string (``lengen.pe.string``): Cayley-STRING (Schenck et al. 2025), RoPE-Mixed in a learned
orthogonal basis, against a float64 re-derivation R(p) = matrix_exp(Σ_a p_a Pᵀ D_a P), D_a
RoPE-Mixed's block-diagonal generators and P = (I − S)(I + S)⁻¹."""

from __future__ import annotations

import pytest
import torch

from helpers import grid_cells
from lengen.pe import RoPEMixed, apply_rope
from lengen.pe.string import STRING

pytestmark = pytest.mark.usefixtures("single_thread")

TURN = torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64)  # exp(θ·TURN): pair turned by θ


def string(**options):
    keywords = dict(d_model=24, n_heads=2, axes=2, causal=False)
    return STRING(**{**keywords, **options})


def with_random_basis(pe, seed=0):
    """S drawn away from 0, so P is not the identity."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        pe.basis_raw.copy_(0.3 * torch.randn(pe.basis_raw.shape, generator=generator))
    return pe


def reference_rotations(pe, head, coordinates):
    """R(p) = matrix_exp(Σ_a p_a Pᵀ D_a P), float64 -> (T, hd, hd)."""
    raw = pe.basis_raw.detach().view(pe.basis_shape)[0, head].double()
    upper = raw.triu(1)
    skew = upper - upper.T
    eye = torch.eye(len(skew), dtype=torch.float64)
    basis = (eye - skew) @ torch.linalg.inv(eye + skew)  # P
    frequencies = pe.frequency_sets()[0, head].detach().double()  # (hd/2, A)
    generators = [
        basis.T @ torch.block_diag(*(f * TURN for f in frequencies[:, axis])) @ basis
        for axis in range(pe.axes)
    ]  # A × (hd, hd), commuting
    summed = sum(coordinates[:, a, None, None].double() * generators[a] for a in range(pe.axes))
    return torch.linalg.matrix_exp(summed), basis


def test_string_scores_equal_the_matrix_exponential_formula():
    torch.manual_seed(0)
    pe = with_random_basis(string())
    x, y = grid_cells((3, 3)), grid_cells((3, 3)).flip(0)
    q, k = torch.randn(2, 1, 2, 9, 12).unbind(0)
    rotated_q, rotated_k = pe.rotate(q, k, x, y)
    for head in range(2):
        r_x, _ = reference_rotations(pe, head, x)
        r_y, _ = reference_rotations(pe, head, y)
        expected = torch.einsum(
            "ti,tji,tjk,tk->t", q[0, head].double(), r_x, r_y, k[0, head].double()
        )  # qᵀ R(x)ᵀ R(y) k
        actual = (rotated_q[0, head].double() * rotated_k[0, head].double()).sum(-1)
        torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-5)


def test_string_rotation_is_the_formula_without_its_leading_transpose():
    # q' = RoPE_mixed(p) P q = P R(p) q: the leading Pᵀ of R(p) cancels in every q'·k'
    torch.manual_seed(0)
    pe = with_random_basis(string())
    positions = grid_cells((3, 3))
    q = torch.randn(1, 2, 9, 12)
    rotated, _ = pe.rotate(q, q, positions, positions)
    rotation, basis = reference_rotations(pe, 1, positions)
    expected = torch.einsum("ij,tjk,tk->ti", basis, rotation, q[0, 1].double())
    torch.testing.assert_close(rotated[0, 1].double(), expected, atol=1e-4, rtol=1e-5)


def test_string_scores_depend_on_the_offset_only():
    torch.manual_seed(0)
    pe = with_random_basis(string())
    q, k = torch.randn(2, 1, 2, 3, 12).unbind(0)
    x, y = torch.tensor([[0, 1], [2, 2], [1, 3]]), torch.tensor([[3, 0], [0, 1], [2, 2]])
    shift = torch.tensor([5, 2])

    def scores(a, b):
        rotated_q, rotated_k = pe.rotate(q, k, a, b)
        return (rotated_q * rotated_k).sum(-1)

    torch.testing.assert_close(scores(x, y), scores(x + shift, y + shift), atol=1e-4, rtol=1e-4)


def test_string_starts_as_rope_mixed():
    positions = grid_cells((3, 3))
    q, k = torch.randn(2, 1, 2, 9, 12).unbind(0)
    torch.manual_seed(4)
    expected = RoPEMixed(d_model=24, n_heads=2, axes=2, n_layers=2).for_layer(1)
    torch.manual_seed(4)
    pe = string(n_layers=2).for_layer(1)
    actual = pe.rotate(q, k, positions, positions)
    wanted = expected.rotate(q, k, positions, positions)
    torch.testing.assert_close(actual, wanted, atol=1e-6, rtol=1e-6)


def test_string_on_a_sequence_starts_as_rope():
    pe = STRING(d_model=32, n_heads=2)
    q = torch.randn(1, 2, 6, 16)
    rotated, _ = pe.rotate(q, q, torch.arange(6), torch.arange(6))
    torch.testing.assert_close(rotated, apply_rope(q, torch.arange(6)), atol=1e-5, rtol=0)


def test_string_basis_is_orthogonal():
    pe = with_random_basis(string())
    basis = pe.basis().double()  # (H, hd, hd)
    eye = torch.eye(12, dtype=torch.float64).expand_as(basis)
    torch.testing.assert_close(basis @ basis.transpose(-1, -2), eye, atol=1e-5, rtol=0)


def test_string_gradients_reach_the_basis_and_the_frequencies_of_every_layer():
    pe = string(n_layers=2)
    positions = grid_cells((2, 2))
    q, k = torch.randn(2, 1, 2, 4, 12).unbind(0)
    total = 0
    for layer in range(2):
        rotated_q, rotated_k = pe.for_layer(layer).rotate(q, k, positions, positions)
        total = total + (rotated_q * rotated_k).sum()
    total.backward()
    basis = pe.basis_raw.grad.view(pe.basis_shape)
    frequencies = pe.frequencies.grad.view(pe.frequency_shape)
    assert all(basis[layer].abs().sum() > 0 for layer in range(2))
    assert all(frequencies[layer].abs().sum() > 0 for layer in range(2))


def test_string_refuses_a_head_dimension_without_an_even_share_per_axis():
    with pytest.raises(ValueError, match=r"^pe=string: the head dimension .* = 10 must be"):
        string(d_model=20)


def test_string_readout_scores_are_those_of_the_identity_rotation():
    # a −1 row has R = PᵀIP = I: its score with a cell p is q_rᵀ R(p) k (computed in P's basis)
    torch.manual_seed(0)
    pe = with_random_basis(string())
    positions = grid_cells((3, 3), readout=True)
    q, k = torch.randn(2, 1, 2, 10, 12).unbind(0)
    rotated_q, rotated_k = pe.rotate(q, k, positions, positions)
    actual = torch.einsum("bhi,bhti->bht", rotated_q[:, :, -1].double(), rotated_k.double())
    rotation, _ = reference_rotations(pe, 0, positions.clamp(min=0))  # the −1 row at 0: I
    expected = torch.einsum("i,tij,tj->t", q[0, 0, -1].double(), rotation, k[0, 0].double())
    torch.testing.assert_close(actual[0, 0], expected, atol=1e-4, rtol=1e-5)
