"""pe=rope (``lengen.pe.rope``) against Su et al. 2021 eq. 34 and its variants.

References are written here from the papers in float64 numpy, never from lengen's own helpers:
the rotation as complex multiplication in both layouts (``interleaved``; GPT-NeoX's ``half``),
fp32 rotation under bf16, partial rotary (GPT-NeoX ``rotary_pct``), p-RoPE (Barbero et al. 2025
``apply_p_rope``), scores that depend on the offset only under every option, and axial RoPE on
grids and volumes (Heo et al. 2024; per-axis scaling). The frequencies of the context extensions
(``pe.scaling``) are tested in test_rope_frequencies.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import Tensor

from helpers import (
    grid_cells,
    qk_scores,
    ref_rotate,
    ref_theta,
    rope_pe,
    rotate_with,
    toeplitz_scores,
)
from lengen.pe.rope import (
    RoPE,
    apply_rope,
    rope_angles,
    rope_inverse_frequencies,
    rotary_dimension,
    rotate_pairs,
)

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent references ------------------------------------------------------------------
def reference_rope(x: Tensor, positions: Tensor, base: float, layout: str) -> Tensor:
    """RoFormer eq. 34 as complex multiplication in float64 numpy.

    Each pair (a, b) is the complex number a + ib turned by e^(i·p·θ_j); ``interleaved`` pairs
    (2j, 2j+1), ``half`` pairs (j, j + d/2).
    """
    values = x.detach().double().numpy()
    dim = values.shape[-1]
    half = dim // 2
    theta = ref_theta(dim, base)  # (d/2,)
    angles = positions.double().numpy()[..., None] * theta  # (..., seq, d/2)
    if layout == "interleaved":
        pairs = values[..., 0::2] + 1j * values[..., 1::2]
    else:
        pairs = values[..., :half] + 1j * values[..., half:]
    turned = pairs * np.exp(1j * angles)
    out = np.empty(turned.shape[:-1] + (dim,))
    if layout == "interleaved":
        out[..., 0::2], out[..., 1::2] = turned.real, turned.imag
    else:
        out[..., :half], out[..., half:] = turned.real, turned.imag
    return torch.from_numpy(out)


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


def _bf16_rotation(x: Tensor, positions: Tensor, base: float = 10000.0) -> Tensor:
    """What a careless implementation does: angles, cos/sin and products all in bf16."""
    dim = x.shape[-1]
    inv_freq = (base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)).bfloat16()
    angles = positions.bfloat16()[..., None] * inv_freq
    cos, sin = angles.cos(), angles.sin()
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


# -- apply_rope ------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dim", [2, 8, 16])
def test_apply_rope_matches_complex_reference(layout, dim):
    generator = torch.Generator().manual_seed(dim)
    x = torch.randn(2, 3, 20, dim, generator=generator)
    positions = torch.randint(0, 60, (20,), generator=generator)
    expected = reference_rope(x, positions, 10000.0, layout).float()
    torch.testing.assert_close(apply_rope(x, positions, layout=layout), expected)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_other_base_matches_reference(layout):
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(4, 12, 8, generator=generator)
    positions = torch.arange(12) * 3
    expected = reference_rope(x, positions, 50.0, layout).float()
    torch.testing.assert_close(apply_rope(x, positions, 50.0, layout=layout), expected)


def test_apply_rope_layouts_differ():
    # the two layouts pair different dimensions, so they are different functions of x
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(2))
    positions = torch.arange(5)
    interleaved = apply_rope(x, positions, layout="interleaved")
    half = apply_rope(x, positions, layout="half")
    assert not torch.allclose(interleaved, half, atol=1e-3)


def test_apply_rope_default_layout_is_interleaved():
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(3))
    positions = torch.arange(5)
    torch.testing.assert_close(
        apply_rope(x, positions), apply_rope(x, positions, layout="interleaved")
    )


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_preserves_norms(layout):
    x = torch.randn(2, 4, 30, 16, generator=torch.Generator().manual_seed(4))
    rotated = apply_rope(x, torch.arange(30) * 7, layout=layout)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    # per pair, too
    if layout == "interleaved":
        pair_norm = lambda t: t[..., 0::2] ** 2 + t[..., 1::2] ** 2  # noqa: E731
    else:
        pair_norm = lambda t: t[..., :8] ** 2 + t[..., 8:] ** 2  # noqa: E731
    torch.testing.assert_close(pair_norm(rotated), pair_norm(x))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_position_zero_is_identity(layout):
    x = torch.randn(3, 6, 8, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(apply_rope(x, torch.zeros(6, dtype=torch.long), layout=layout), x)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("shift", [1, 7, 100, 1000])
def test_apply_rope_scores_depend_only_on_offset(layout, shift):
    # the same query and key vectors placed at (m, n) and (m + s, n + s) score the same
    generator = torch.Generator().manual_seed(6)
    q = torch.randn(2, 10, 16, generator=generator)
    k = torch.randn(2, 10, 16, generator=generator)
    positions = torch.arange(10)

    def scores(offset: int) -> Tensor:
        rotated_q = apply_rope(q, positions + offset, layout=layout)
        rotated_k = apply_rope(k, positions + offset, layout=layout)
        return rotated_q @ rotated_k.transpose(-1, -2)  # (2, m, n)

    torch.testing.assert_close(scores(shift), scores(0), rtol=1e-4, atol=1e-4)
    # non-trivial: off the diagonal, rotation changed the scores
    assert not torch.allclose(scores(0), q @ k.transpose(-1, -2), atol=1e-2)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_broadcasts_positions(layout):
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 5, 8, generator=generator)  # (B, H, seq, d)
    positions = torch.tensor([3, 1, 4, 1, 5])  # (seq,)
    full = apply_rope(x, positions.expand(2, 3, 5), layout=layout)
    torch.testing.assert_close(apply_rope(x, positions, layout=layout), full)
    for b in range(2):
        for h in range(3):
            torch.testing.assert_close(full[b, h], apply_rope(x[b, h], positions, layout=layout))
    # per-batch positions (B, 1, seq)
    per_batch = torch.stack([positions, positions + 10])[:, None, :]
    rotated = apply_rope(x, per_batch, layout=layout)
    torch.testing.assert_close(rotated[1], apply_rope(x[1], positions + 10, layout=layout))


def test_apply_rope_odd_dim_raises():
    with pytest.raises(ValueError):
        apply_rope(torch.randn(2, 4, 3), torch.arange(4))


def test_apply_rope_unknown_layout_raises():
    with pytest.raises(ValueError, match=r"pe\.layout"):
        apply_rope(torch.randn(2, 4, 8), torch.arange(4), layout="neox")


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_compiled_rotation_formula_equals_the_eager_one(fraction, monkeypatch):
    # eager interleaved RoPE multiplies complex numbers; under torch.compile (no complex code
    # in inductor) the real formula runs instead: both must be the same rotation
    pe = RoPE(d_model=128, n_heads=4, fraction=fraction)
    generator = torch.Generator().manual_seed(12)
    q, k = torch.randn(2, 4, 25, 32, generator=generator), torch.randn(2, 4, 25, 32)
    positions = torch.arange(25) * 7
    eager = rotate_with(pe, q, k, positions)
    asked = []
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: asked.append(1) or True)
    real = rotate_with(pe, q, k, positions)
    assert asked  # the real formula ran
    for a, b in zip(eager, real, strict=True):
        torch.testing.assert_close(a, b)


def test_rotation_accepts_a_tensor_at_an_odd_storage_offset():
    # a contiguous slice starting at an odd float cannot be viewed as complex numbers in place
    storage = torch.randn(1 + 3 * 5 * 8)
    x = storage[1:].view(3, 5, 8)
    assert x.is_contiguous() and x.storage_offset() == 1
    angles = torch.randn(5, 4)
    expected = rotate_pairs(x.clone(), angles)
    torch.testing.assert_close(rotate_pairs(x, angles), expected, rtol=0, atol=0)


# -- fp32 rotation under bf16 ----------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_fp32_input_unchanged_by_autocast(layout):
    x = torch.randn(2, 4, 16, 32, generator=torch.Generator().manual_seed(9))
    positions = torch.arange(10_000, 10_016)
    expected = apply_rope(x, positions, layout=layout)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        rotated = apply_rope(x, positions, layout=layout)
    assert rotated.dtype == torch.float32
    torch.testing.assert_close(rotated, expected, rtol=0, atol=0)


@pytest.mark.parametrize("autocast", [False, True])
def test_apply_rope_bf16_input_rotates_in_fp32(autocast):
    x = torch.randn(2, 4, 8, 16, generator=torch.Generator().manual_seed(10)).bfloat16()
    positions = torch.arange(10_000, 10_008)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        rotated = apply_rope(x, positions)
    assert rotated.dtype == torch.bfloat16
    # equals the fp32 rotation of the same (bf16) values, rounded once to bf16
    expected = apply_rope(x.float(), positions).bfloat16()
    torch.testing.assert_close(rotated, expected)  # bf16 tolerance
    # and is close to the float64 truth, unlike a rotation computed in bf16
    truth = reference_rope(x, positions, 10000.0, "interleaved")
    error = (rotated.double() - truth).abs().max().item()
    bf16_error = (_bf16_rotation(x, positions).double() - truth).abs().max().item()
    assert error < 0.05
    assert bf16_error > 20 * error


# -- the module ------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_module_rotates_queries_and_keys(layout):
    pe = RoPE(d_model=32, n_heads=4, base=500.0, layout=layout)
    generator = torch.Generator().manual_seed(8)
    q = torch.randn(2, 4, 5, 8, generator=generator)
    k = torch.randn(2, 4, 7, 8, generator=generator)
    q_positions, k_positions = torch.arange(2, 7), torch.arange(7)
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    torch.testing.assert_close(rotated_q, reference_rope(q, q_positions, 500.0, layout).float())
    torch.testing.assert_close(rotated_k, reference_rope(k, k_positions, 500.0, layout).float())


def test_default_rope_module_equals_plain_apply_rope_bitwise():
    pe = RoPE(d_model=64, n_heads=4, train_positions=32)
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 9, 16, generator=generator)
    k = torch.randn(2, 4, 20, 16, generator=generator)
    q_positions, k_positions = torch.arange(11, 20) * 37, torch.arange(20) * 37
    rotated_q, rotated_k = pe.rotate(q, k, q_positions, k_positions)
    torch.testing.assert_close(rotated_q, apply_rope(q, q_positions), rtol=0, atol=0)
    torch.testing.assert_close(rotated_k, apply_rope(k, k_positions), rtol=0, atol=0)
    assert pe.attention_scale(1000) == 1.0
    assert pe.describe() == {}


def test_rope_module_unknown_layout_raises():
    with pytest.raises(ValueError, match=r"pe\.layout"):
        RoPE(d_model=32, n_heads=4, layout="neox")


def test_rope_odd_head_dim_names_model_keys():
    with pytest.raises(ValueError, match=r"model\.d_model") as error:
        RoPE(d_model=12, n_heads=4)
    assert "model.n_heads" in str(error.value)


@pytest.mark.parametrize("base", [1.0, 0.5, 0.0, -2.0])
def test_base_at_most_one_raises(base):
    with pytest.raises(ValueError, match=r"pe\.base"):
        RoPE(d_model=32, n_heads=4, base=base)


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"fraction": 0.0}, r"pe\.fraction"),
        ({"fraction": 1.5}, r"pe\.fraction"),
        ({"p": -0.1}, r"pe\.p\b"),
        ({"p": 1.01}, r"pe\.p\b"),
        ({"original_max_position": 0}, r"pe\.original_max_position"),
        ({"yarn_alpha": 4.0, "yarn_beta": 2.0}, r"pe\.yarn_beta"),
    ],
)
def test_bad_options_name_their_key(options, key):
    with pytest.raises(ValueError, match=key):
        rope_pe(**options)


def test_describe_lists_the_non_default_options():
    pe = rope_pe(fraction=0.5, p=0.5, scaling="yarn", scaling_factor=4.0)
    assert pe.describe() == {
        "fraction": 0.5,
        "rotary_dim": 8,
        "p": 0.5,
        "rotated_pairs": 2,
        "scaling": "yarn",
        "scaling_factor": 4.0,
        "original_max_position": 32,
        "yarn_alpha": 1.0,
        "yarn_beta": 32.0,
        "yarn_ramp": "dimension",
        "yarn_truncate": True,
        "yarn_logit_scale": pytest.approx((0.1 * math.log(4) + 1) ** 2),
    }
    assert rope_pe(scaling="pi", scaling_factor=2.0).describe() == {
        "scaling": "pi",
        "scaling_factor": 2.0,
    }


# -- partial rotary --------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.3])
def test_partial_rotary_leaves_the_tail_untouched(fraction, layout):
    pe = RoPE(d_model=128, n_heads=4, fraction=fraction, layout=layout)  # head_dim 32
    rotated_dim = rotary_dimension(32, fraction)
    generator = torch.Generator().manual_seed(9)
    q, k = torch.randn(2, 4, 25, 32, generator=generator), torch.randn(2, 4, 25, 32)
    rotated_q, rotated_k = rotate_with(pe, q, k, torch.arange(25) * 11)
    torch.testing.assert_close(rotated_q[..., rotated_dim:], q[..., rotated_dim:], rtol=0, atol=0)
    torch.testing.assert_close(rotated_k[..., rotated_dim:], k[..., rotated_dim:], rtol=0, atol=0)
    assert not torch.allclose(rotated_q[..., :rotated_dim], q[..., :rotated_dim], atol=1e-2)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("fraction", [0.25, 0.5])
def test_partial_rotary_head_is_a_smaller_rope(fraction, layout):
    # GPT-NeoX: the first r dims are a RoPE of dimension r, θ_i = base^(−2i/r)
    pe = RoPE(d_model=128, n_heads=4, fraction=fraction, layout=layout)
    rotated_dim = rotary_dimension(32, fraction)
    generator = torch.Generator().manual_seed(10)
    q, k = torch.randn(2, 4, 25, 32, generator=generator), torch.randn(2, 4, 25, 32)
    positions = torch.arange(25) * 3
    rotated_q, _ = rotate_with(pe, q, k, positions)
    smaller = apply_rope(q[..., :rotated_dim].contiguous(), positions, layout=layout)
    torch.testing.assert_close(rotated_q[..., :rotated_dim], smaller, rtol=0, atol=0)
    expected = ref_rotate(q, positions.numpy(), ref_theta(rotated_dim, 10000.0), layout)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=2e-5)


def test_apply_rope_fraction_argument_matches_module():
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(3, 10, 32, generator=generator)
    positions = torch.arange(10)
    expected = ref_rotate(x, positions.numpy(), ref_theta(8, 10000.0))
    torch.testing.assert_close(
        apply_rope(x, positions, fraction=0.25).double(),
        torch.from_numpy(expected),
        rtol=0,
        atol=1e-5,
    )


# -- p-RoPE ----------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("p", [0.25, 0.5, 0.75])
def test_p_rope_leaves_the_lowest_frequencies_unrotated(p, layout):
    pe = rope_pe(p=p, layout=layout)  # head_dim 16, 8 pairs
    kept = int(p * 16 // 2)
    generator = torch.Generator().manual_seed(12)
    q, k = torch.randn(2, 4, 20, 16, generator=generator), torch.randn(2, 4, 20, 16)
    positions = torch.arange(20) * 5
    rotated_q, _ = rotate_with(pe, q, k, positions)
    theta = ref_theta(16, 10000.0)
    theta[kept:] = 0.0  # the lowest frequencies: θ = 0, the highest keep their RoPE values
    expected = ref_rotate(q, positions.numpy(), theta, layout)
    torch.testing.assert_close(rotated_q.double(), torch.from_numpy(expected), rtol=0, atol=1e-5)
    # the unrotated pairs come back bit for bit
    if layout == "interleaved":
        untouched = slice(2 * kept, 16)
        torch.testing.assert_close(rotated_q[..., untouched], q[..., untouched], rtol=0, atol=0)
    else:
        for part in (slice(kept, 8), slice(8 + kept, 16)):
            torch.testing.assert_close(rotated_q[..., part], q[..., part], rtol=0, atol=0)


def test_p_zero_is_nope():
    pe = rope_pe(p=0.0)
    generator = torch.Generator().manual_seed(13)
    q, k = torch.randn(1, 4, 9, 16, generator=generator), torch.randn(1, 4, 9, 16)
    rotated_q, rotated_k = rotate_with(pe, q, k, torch.arange(9) * 100)
    assert torch.equal(rotated_q, q) and torch.equal(rotated_k, k)


# -- relative positions for every option -----------------------------------------------------
OPTION_SETS = {
    "plain": {},
    "half": {"layout": "half"},
    "fraction": {"fraction": 0.5},
    "p": {"p": 0.5},
    "pi": {"scaling": "pi", "scaling_factor": 4.0},
    "ntk": {"scaling": "ntk", "scaling_factor": 4.0},
    "dynamic_ntk": {"scaling": "dynamic_ntk", "scaling_factor": 4.0},
    "yarn": {"scaling": "yarn", "scaling_factor": 4.0},
    "all": {"fraction": 0.5, "p": 0.5, "layout": "half", "scaling": "yarn", "scaling_factor": 2.0},
}


@pytest.mark.parametrize("name", list(OPTION_SETS))
@pytest.mark.parametrize("shift", [1, 5, 30])
def test_scores_depend_only_on_offset_within_a_sequence(name, shift):
    # qk_scores(m, n) = qk_scores(m + s, n + s) for fixed vectors: a Toeplitz score matrix (this form
    # also covers dynamic NTK, whose frequencies depend on the sequence's length)
    matrix = toeplitz_scores(rope_pe(**OPTION_SETS[name]), 64)
    torch.testing.assert_close(
        matrix[shift:, shift:], matrix[:-shift, :-shift], rtol=1e-4, atol=1e-4
    )
    assert not torch.allclose(matrix[0, 1:], matrix[0, 0].expand(63), atol=1e-3)


@pytest.mark.parametrize("name", [n for n in OPTION_SETS if n != "dynamic_ntk"])
@pytest.mark.parametrize("shift", [7, 1000])
def test_scores_unchanged_when_all_positions_shift(name, shift):
    pe = rope_pe(**OPTION_SETS[name])
    generator = torch.Generator().manual_seed(15)
    q, k = torch.randn(2, 4, 10, 16, generator=generator), torch.randn(2, 4, 10, 16)
    positions = torch.arange(10)
    before = qk_scores(*rotate_with(pe, q, k, positions))
    after = qk_scores(*rotate_with(pe, q, k, positions + shift))
    # fp32 angles near 1000 rad carry ~1e-4 rad of rounding
    torch.testing.assert_close(after, before, rtol=1e-4, atol=5e-4)


# -- grids and volumes: axial RoPE -----------------------------------------------------------
@pytest.mark.parametrize(("shape", "dim"), [((3, 4), 8), ((2, 3, 2), 12)])
def test_apply_rope_grid_matches_axial_reference(shape, dim):
    generator = torch.Generator().manual_seed(0)
    positions = grid_cells(shape, readout=True)
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


def axial_scores(rotate, query, key, q_cells, k_cells) -> Tensor:
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
        axial_scores(rotate, query, key, p + shift.clamp(min=0), q + shift.clamp(min=0)),
        axial_scores(rotate, query, key, p, q),
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

    difference = axial_scores(rotate, query, key, origin, moved) - axial_scores(
        rotate, query, key, origin, origin
    )
    assert difference.abs().item() > 1e-3


@pytest.mark.parametrize(("scaling", "factor"), [("pi", 2.0), ("ntk", 4.0), ("yarn", 2.0)])
def test_rope_grid_scaling_is_the_1d_scaling_of_each_axis(scaling, factor):
    pe = RoPE(
        d_model=64, n_heads=2, axes=2, scaling=scaling, scaling_factor=factor, train_positions=8
    )
    frequencies = pe.inverse_frequencies(grid_cells((8, 8)))  # (A, head_dim/(2A))
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
    frequencies = pe.inverse_frequencies(grid_cells((8, 16)))
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
