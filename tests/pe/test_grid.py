"""Encodings on grids and volumes (positions (T, A)) against independent references.

References are written here from the papers and the reference code (float64 numpy, plain
loops), never from lengen's helpers: Vaswani et al. 2017 §3.5 per axis (sinusoidal_grid),
RoFormer eq. 34 per axis (axial RoPE, Heo et al. 2024), rope-vit's ``init_random_2d_freqs``
(RoPE-Mixed), CROMA's 2-D ALiBi (Euclidean distance) and timm's ``resample_abs_pos_embed``
(learned tables interpolated with ``F.interpolate``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from lengen.pe import (
    ALiBi,
    Learned,
    NoPE,
    RoPE,
    RoPEMixed,
    Sinusoidal,
    apply_rope,
    grid_positions,
    rope_inverse_frequencies,
    sinusoidal_grid,
)
from lengen.pe.rope import rope_angles, rotate_pairs

pytestmark = pytest.mark.usefixtures("single_thread")

GRID_CLASSES = {
    "sinusoidal": Sinusoidal,
    "learned": Learned,
    "rope": RoPE,
    "rope_mixed": RoPEMixed,
    "alibi": ALiBi,
    "nope": NoPE,
}


def reference_table(length: int, dim: int, base: float) -> np.ndarray:
    """Vaswani et al. §3.5, interleaved, float64: row p = sin, cos of p / base^(2i/dim)."""
    table = np.zeros((length, dim))
    for p in range(length):
        for i in range(dim // 2):
            table[p, 2 * i] = math.sin(p / base ** (2 * i / dim))
            table[p, 2 * i + 1] = math.cos(p / base ** (2 * i / dim))
    return table


def reference_axial_rope(x: Tensor, positions: Tensor, base: float) -> Tensor:
    """Axial RoPE in float64 numpy: interleaved pairs, pair block a (head_dim/(2A) pairs) turned
    by coordinate a with θ_j = base^(−2j/(head_dim/A)); −1 rows unturned."""
    values = x.detach().double().numpy()
    axes = positions.shape[-1]
    dim = values.shape[-1]
    share = dim // axes
    pairs = values[..., 0::2] + 1j * values[..., 1::2]  # (..., T, dim/2)
    out = pairs.copy()
    for t, row in enumerate(positions.tolist()):
        if all(c < 0 for c in row):
            continue
        for axis, coordinate in enumerate(row):
            for j in range(share // 2):
                theta = base ** (-2 * j / share)
                out[..., t, axis * share // 2 + j] *= np.exp(1j * coordinate * theta)
    result = np.empty(values.shape)
    result[..., 0::2], result[..., 1::2] = out.real, out.imag
    return torch.from_numpy(result)


def grid(shape, readout: bool = False) -> Tensor:
    """Row-major cell coordinates, plus a −1 row at the end when ``readout``."""
    positions = grid_positions(shape)
    if readout:
        positions = torch.cat([positions, torch.full((1, len(shape)), -1)])
    return positions


# -- sinusoidal_grid ---------------------------------------------------------------------------
@pytest.mark.parametrize(("shape", "dim"), [((3, 5), 8), ((4, 2), 12), ((2, 3, 4), 12)])
def test_sinusoidal_grid_equals_per_axis_tables(shape, dim):
    share = dim // len(shape)
    tables = [reference_table(size, share, 10000.0) for size in shape]
    expected = np.zeros((*shape, dim))
    for cell in np.ndindex(*shape):
        expected[cell] = np.concatenate([tables[a][c] for a, c in enumerate(cell)])
    actual = sinusoidal_grid(shape, dim)
    assert actual.shape == (*shape, dim) and actual.dtype == torch.float32
    torch.testing.assert_close(actual.double(), torch.from_numpy(expected), atol=1e-6, rtol=0)


def test_sinusoidal_grid_base_is_used():
    expected = reference_table(6, 4, 100.0)  # axis 1 of a (1, 6) grid
    torch.testing.assert_close(
        sinusoidal_grid((1, 6), 8, base=100.0)[0, :, 4:].double(),
        torch.from_numpy(expected),
        atol=1e-6,
        rtol=0,
    )


@pytest.mark.parametrize(("shape", "dim"), [((3, 3), 6), ((3, 3), 10), ((2, 2, 2), 8)])
def test_sinusoidal_grid_refuses_dim_not_divisible_by_twice_the_axes(shape, dim):
    with pytest.raises(ValueError, match=r"dim = \d+ must be divisible by 2 × \d"):
        sinusoidal_grid(shape, dim)


def test_sinusoidal_module_embeds_the_grid_table():
    pe = Sinusoidal(d_model=8, n_heads=2, axes=2)
    x = torch.zeros(1, 12, 8)
    torch.testing.assert_close(
        pe.embed(x, grid((3, 4)))[0], sinusoidal_grid((3, 4), 8).flatten(0, 1)
    )


# -- apply_rope on (T, A) positions --------------------------------------------------------------
@pytest.mark.parametrize(("shape", "dim"), [((3, 4), 8), ((2, 3, 2), 12)])
def test_apply_rope_grid_matches_axial_reference(shape, dim):
    generator = torch.Generator().manual_seed(0)
    positions = grid(shape, readout=True)
    x = torch.randn(2, len(positions), dim, generator=generator)
    expected = reference_axial_rope(x, positions, 100.0)
    torch.testing.assert_close(
        apply_rope(x, positions, 100.0).double(), expected, atol=1e-5, rtol=0
    )


def test_apply_rope_sequence_positions_unchanged_byte_for_byte():
    # the 1-D path is the rotation by p·θ_i it always was (positions (T,) and (B, T))
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 7, 16, generator=generator)
    for positions in (torch.arange(7), torch.arange(14).view(2, 1, 7)):
        expected = rotate_pairs(x, rope_angles(positions, 16, 10000.0))
        assert torch.equal(apply_rope(x, positions), expected)


def test_rope_module_on_sequences_keeps_base_10000():
    pe = RoPE(d_model=32, n_heads=2)
    q, k = torch.randn(2, 1, 2, 5, 16).unbind(0)
    rotated_q, _ = pe.rotate(q, k, torch.arange(5), torch.arange(5))
    assert pe.base == 10000.0
    assert torch.equal(rotated_q, apply_rope(q, torch.arange(5), 10000.0))


def test_rope_grid_default_base_is_rope_vit_axial_theta():
    assert RoPE(d_model=32, n_heads=2, axes=2).base == 100.0


def _scores(rotate, query, key, q_cells, k_cells) -> Tensor:
    """q·k per pair of cells for one fixed (q, k), float64."""
    q = rotate(query.expand(len(q_cells), -1), q_cells).double()
    k = rotate(key.expand(len(k_cells), -1), k_cells).double()
    return (q * k).sum(-1)


@pytest.mark.parametrize("axes", [2, 3])
def test_axial_rope_scores_depend_only_on_the_offset_vector(axes):
    generator = torch.Generator().manual_seed(2)
    query, key = torch.randn(2, 1, 24, generator=generator)
    p = torch.randint(0, 6, (50, axes), generator=generator)
    q = torch.randint(0, 6, (50, axes), generator=generator)
    shift = torch.randint(-5, 9, (1, axes), generator=generator)

    def rotate(x, positions):
        return apply_rope(x, positions, 100.0, axes=axes)

    torch.testing.assert_close(
        _scores(rotate, query, key, p + shift.clamp(min=0), q + shift.clamp(min=0)),
        _scores(rotate, query, key, p, q),
        atol=1e-4,
        rtol=0,
    )


@pytest.mark.parametrize("axis", [0, 1])
def test_axial_rope_scores_depend_on_each_axis_of_the_offset(axis):
    generator = torch.Generator().manual_seed(3)
    query, key = torch.randn(2, 1, 16, generator=generator)
    origin = torch.zeros(1, 2, dtype=torch.long)
    moved = origin.clone()
    moved[0, axis] = 1

    def rotate(x, positions):
        return apply_rope(x, positions, 100.0, axes=2)

    difference = _scores(rotate, query, key, origin, moved) - _scores(
        rotate, query, key, origin, origin
    )
    assert difference.abs().item() > 1e-3


# -- RoPE module: per-axis scaling -----------------------------------------------------------
@pytest.mark.parametrize(("scaling", "factor"), [("pi", 2.0), ("ntk", 4.0), ("yarn", 2.0)])
def test_rope_grid_scaling_is_the_1d_scaling_of_each_axis(scaling, factor):
    pe = RoPE(
        d_model=64, n_heads=2, axes=2, scaling=scaling, scaling_factor=factor, train_positions=8
    )
    frequencies = pe.inverse_frequencies(grid((8, 8)))  # (A, head_dim/(2A))
    expected = rope_inverse_frequencies(
        16, 100.0, scaling=scaling, factor=factor, original_max_position=8
    )
    assert frequencies.shape == (2, 8)
    for axis in range(2):
        torch.testing.assert_close(frequencies[axis], expected)


def test_rope_grid_dynamic_ntk_uses_each_axis_extent():
    pe = RoPE(
        d_model=64, n_heads=2, axes=2, scaling="dynamic_ntk", scaling_factor=2.0, train_positions=8
    )
    frequencies = pe.inverse_frequencies(grid((8, 16)))
    for axis, extent in enumerate((8, 16)):
        expected = rope_inverse_frequencies(
            16,
            100.0,
            scaling="dynamic_ntk",
            factor=2.0,
            original_max_position=8,
            sequence_length=extent,
        )
        torch.testing.assert_close(frequencies[axis], expected)


def test_rope_grid_refuses_a_head_dim_not_divisible_by_twice_the_axes():
    with pytest.raises(ValueError, match=r"^pe=rope: the rotated head dimension .* = 10 must"):
        RoPE(d_model=20, n_heads=2, axes=2)  # head_dim 10: 5 pairs cannot split between 2 axes


# -- ALiBi -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["euclidean", "manhattan"])
def test_alibi_grid_bias_equals_a_slow_double_loop(kind):
    positions = grid((3, 3), readout=True)
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


# -- learned: axial, full, interpolate -----------------------------------------------------------
def test_learned_interpolate_at_the_trained_length_is_the_table():
    pe = Learned(d_model=8, n_heads=2, policy="interpolate", train_positions=6, max_positions=12)
    x = torch.zeros(1, 6, 8)
    expected = pe.scale * pe.table.weight
    torch.testing.assert_close(pe.embed(x, torch.arange(6))[0], expected)


def test_learned_interpolate_at_twice_the_length_is_linear_interpolation():
    pe = Learned(d_model=8, n_heads=2, policy="interpolate", train_positions=6, max_positions=12)
    table = pe.table.weight.detach()  # (6, 8)
    resized = F.interpolate(table.T[None], size=12, mode="linear", align_corners=False)[0].T
    actual = pe.embed(torch.zeros(1, 12, 8), torch.arange(12))[0].detach()
    torch.testing.assert_close(actual, pe.scale * resized)


def test_learned_axial_grid_interpolate_identity_and_twice():
    pe = Learned(d_model=8, n_heads=2, axes=2, policy="interpolate", train_positions=4)
    rows, columns = (embedding.weight.detach() for embedding in pe.table)  # (4, 4) each
    at_trained = pe.embed(torch.zeros(1, 16, 8), grid((4, 4)))[0].detach()
    expected = torch.cat([rows.repeat_interleave(4, 0), columns.repeat(4, 1)], dim=-1)
    torch.testing.assert_close(at_trained, pe.scale * expected)

    def resize(table):
        return F.interpolate(table.T[None], size=8, mode="linear", align_corners=False)[0].T

    twice = pe.embed(torch.zeros(1, 64, 8), grid((8, 8)))[0].detach()
    big_rows, big_columns = resize(rows), resize(columns)
    expected = torch.cat([big_rows.repeat_interleave(8, 0), big_columns.repeat(8, 1)], dim=-1)
    torch.testing.assert_close(twice, pe.scale * expected)


def test_learned_full_grid_interpolate_is_bicubic_at_twice_and_identity_at_trained():
    pe = Learned(
        d_model=8, n_heads=2, axes=2, table="full", policy="interpolate", train_positions=4
    )
    table = pe.table.weight.detach().view(4, 4, 8)  # row-major cells
    at_trained = pe.embed(torch.zeros(1, 16, 8), grid((4, 4)))[0].detach()
    torch.testing.assert_close(at_trained, pe.scale * table.reshape(16, 8))
    image = table.permute(2, 0, 1)[None]  # (1, D, 4, 4), timm's layout
    resized = F.interpolate(image, size=(8, 8), mode="bicubic", align_corners=False)
    expected = resized[0].permute(1, 2, 0).reshape(64, 8)
    twice = pe.embed(torch.zeros(1, 64, 8), grid((8, 8)))[0].detach()
    torch.testing.assert_close(twice, pe.scale * expected)


def test_learned_grid_extend_keeps_untrained_rows_and_error_refuses():
    pe = Learned(d_model=8, n_heads=2, axes=2, train_positions=4, max_positions=8)
    assert (pe.trained_rows, pe.rows) == (4, 8)
    assert sum(p.numel() for p in pe.parameters()) == 2 * 4 * 4  # 2 axes × 4 rows × 4 columns
    with pytest.raises(ValueError, match=r"^pe\.policy=error: .* per axis"):
        Learned(d_model=8, n_heads=2, axes=2, policy="error", train_positions=4, max_positions=8)


def test_learned_grid_past_the_table_is_refused():
    pe = Learned(d_model=8, n_heads=2, axes=2, train_positions=4, max_positions=4)
    with pytest.raises(ValueError, match=r"^pe=learned: grid coordinate 5 is past the table"):
        pe.embed(torch.zeros(1, 36, 8), grid((6, 6)))


def test_learned_interpolate_refuses_randomized_positions():
    with pytest.raises(ValueError, match=r"^pe\.policy=interpolate .*allowed: extend, error$"):
        Learned(d_model=8, n_heads=2, policy="interpolate", randomized=True, max_position=20)


# -- RoPE-Mixed ----------------------------------------------------------------------------------
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
    positions = grid((3, 3))
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
    positions = grid((2, 2))
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


# -- −1 rows: no positional signal ---------------------------------------------------------------
def _grid_factory(name: str, axes: int, **options):
    return functools.partial(
        GRID_CLASSES[name], axes=axes, train_positions=3, max_positions=3, **options
    )


@pytest.mark.parametrize("axes", [2, 3])
@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("sinusoidal", {}),
        ("learned", {}),
        ("learned", {"table": "full"}),
        ("learned", {"policy": "interpolate"}),
        ("rope", {}),
        ("rope_mixed", {}),
        ("alibi", {}),
        ("nope", {}),
    ],
)
def test_minus_one_rows_get_no_positional_signal(name, options, axes):
    pe = _grid_factory(name, axes, **options)(d_model=24, n_heads=2, causal=False)
    positions = grid((3,) * axes, readout=True)  # the last row is [-1, …, -1]
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, len(positions), 24, generator=generator)
    assert torch.equal(pe.embed(x, positions)[:, -1], x[:, -1])
    q = torch.randn(2, 2, len(positions), 12, generator=generator)
    rotated_q, rotated_k = pe.rotate(q, q, positions, positions)
    torch.testing.assert_close(rotated_q[:, :, -1], q[:, :, -1], atol=0, rtol=0)
    torch.testing.assert_close(rotated_k[:, :, -1], q[:, :, -1], atol=0, rtol=0)
    if pe.has_bias:
        bias = pe.attention_bias(positions, positions)  # (H, T, T)
        assert not bias[:, -1].any() and not bias[:, :, -1].any()


# -- options on grids ----------------------------------------------------------------------------
def test_grid_encodings_take_positions_from_the_data():
    with pytest.raises(ValueError, match=r"^pe: positions on 2 axes come with the batch"):
        RoPE(d_model=16, n_heads=2, axes=2).positions(9)


def test_log_length_scale_on_grids_counts_the_cells_of_the_training_grid():
    pe = RoPE(d_model=16, n_heads=2, axes=2, train_positions=4, log_length_scale=True)
    assert pe.length_factor(16) == 1.0
    assert pe.length_factor(64) == pytest.approx(math.log(64) / math.log(16))


@pytest.mark.parametrize("axes", [0, 4, 1.5, True, "2"])
def test_axes_must_be_one_to_three(axes):
    with pytest.raises(ValueError, match=r"^pe\.axes must be an integer 1, 2 or 3"):
        NoPE(d_model=8, n_heads=2, axes=axes)


def test_randomized_positions_are_refused_on_grids():
    with pytest.raises(
        ValueError, match=r"^pe\.randomized=true has no form .* allowed: pe\.randomized=false$"
    ) as error:
        RoPE(d_model=16, n_heads=2, axes=2, randomized=True, max_position=64)
    assert "\n" not in str(error.value)
