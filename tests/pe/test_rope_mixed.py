"""pe=rope_mixed (``lengen.pe.rope_mixed``): RoPE-Mixed (Heo et al. 2024), learned frequencies
that mix the axes, against rope-vit's ``init_random_2d_freqs`` written out with loops."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from helpers import grid_cells
from lengen.pe import RoPEMixed, apply_rope

pytestmark = pytest.mark.usefixtures("single_thread")


def reference_mixed_init(head_dim: int, n_heads: int, n_layers: int, theta: float) -> Tensor:
    """rope-vit's ``init_random_2d_freqs`` per layer, written out with loops: per head an angle
    φ = 2π·rand(1); pair j < hd/4 gets mag_j·(cos φ, sin φ) in (x, y), pair hd/4 + j gets
    mag_j·(cos(φ + π/2), sin(φ + π/2)); mag_j = 1/θ^(4j/hd). Returned in (row, column) = (y, x)
    order -> (layers, H, hd/2, 2)."""
    quarter = head_dim // 4
    out = torch.zeros(n_layers, n_heads, head_dim // 2, 2, dtype=torch.float64)
    for layer in range(n_layers):
        for head in range(n_heads):
            phi = (torch.rand(1) * 2 * torch.pi).item()
            for j in range(quarter):
                magnitude = 1 / theta ** (4 * j / head_dim)
                for group, angle in enumerate((phi, phi + math.pi / 2)):
                    out[layer, head, group * quarter + j, 0] = magnitude * math.sin(angle)  # y
                    out[layer, head, group * quarter + j, 1] = magnitude * math.cos(angle)  # x
    return out


def test_rope_mixed_init_equals_the_reference_formula():
    torch.manual_seed(7)
    pe = RoPEMixed(d_model=48, n_heads=3, axes=2, n_layers=2)
    torch.manual_seed(7)
    expected = reference_mixed_init(16, 3, 2, 10.0)
    torch.testing.assert_close(pe.frequency_sets().double(), expected, atol=1e-6, rtol=1e-6)


def test_rope_mixed_angles_mix_both_coordinates():
    # angle of pair i = Σ_a θ_{h,i,a} p_a: the rotation equals one by the summed angle
    torch.manual_seed(0)
    pe = RoPEMixed(d_model=16, n_heads=2, axes=2)
    positions = grid_cells((3, 3))
    q = torch.randn(1, 2, 9, 8)
    frequencies = pe.frequency_sets()[0].detach().double()  # (H, 4, 2)
    angles = torch.einsum("ta,hpa->htp", positions.double(), frequencies)  # (H, T, 4)
    pairs = torch.complex(q[..., 0::2].double(), q[..., 1::2].double()) * torch.polar(
        torch.ones_like(angles), angles
    )
    expected = torch.stack((pairs.real, pairs.imag), dim=-1).flatten(-2)
    rotated, _ = pe.rotate(q, q, positions, positions)
    torch.testing.assert_close(rotated.double(), expected, atol=1e-5, rtol=0)


def test_rope_mixed_on_sequences_starts_as_rope():
    pe = RoPEMixed(d_model=32, n_heads=2)
    q, k = torch.randn(2, 1, 2, 6, 16).unbind(0)
    rotated_q, _ = pe.rotate(q, k, torch.arange(6), torch.arange(6))
    torch.testing.assert_close(rotated_q, apply_rope(q, torch.arange(6)), atol=1e-5, rtol=0)


def test_rope_mixed_has_one_learned_set_per_layer():
    torch.manual_seed(0)
    pe = RoPEMixed(d_model=16, n_heads=2, axes=2, n_layers=3)
    sets = pe.frequency_sets()
    assert sets.shape == (3, 2, 4, 2)
    assert not torch.allclose(sets[0], sets[1])
    view = pe.for_layer(2)
    positions = grid_cells((2, 2))
    q = torch.randn(1, 2, 4, 8)
    rotated, _ = view.rotate(q, q, positions, positions)
    rotated.sum().backward()
    gradient = pe.frequencies.grad.view(sets.shape)
    assert gradient[2].abs().sum() > 0 and gradient[:2].abs().sum() == 0


def test_rope_mixed_shared_set_with_per_layer_false():
    pe = RoPEMixed(d_model=16, n_heads=2, axes=2, n_layers=3, per_layer=False)
    assert pe.frequency_sets().shape[0] == 1 and pe.for_layer(2) is pe


def test_rope_mixed_frequencies_are_a_flat_parameter():
    # 1-D: the optimiser's rule leaves them without weight decay, as rope-vit's no_weight_decay
    pe = RoPEMixed(d_model=16, n_heads=2, axes=2, n_layers=2)
    assert [p.ndim for p in pe.parameters()] == [1]
