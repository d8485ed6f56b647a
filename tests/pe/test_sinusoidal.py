"""pe=sinusoidal (``lengen.pe.sinusoidal``) against Vaswani et al. 2017 §3.5.

References are written here independently of lengen (float64 numpy / math): the table and its
shift-as-rotation property, the column layouts (``interleaved``; tensor2tensor's
``concatenated``), the per-axis table on grids and volumes (``sinusoidal_grid``), fp32 under
bf16 autocast and the refused bases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers import grid_cells, ref_theta
from lengen.pe.sinusoidal import Sinusoidal, sinusoidal_grid, sinusoidal_table

pytestmark = pytest.mark.usefixtures("single_thread")


# -- independent references ------------------------------------------------------------------
def reference_sinusoidal_table(length: int, dim: int, base: float, start: int = 0) -> np.ndarray:
    """Vaswani et al. §3.5 with math loops in float64, positions start … start + length − 1:
    (length, dim)."""
    table = np.zeros((length, dim), dtype=np.float64)
    for row in range(length):
        for i in range(dim // 2):
            angle = (start + row) / base ** (2 * i / dim)
            table[row, 2 * i] = math.sin(angle)
            table[row, 2 * i + 1] = math.cos(angle)
    return table


def ref_concatenated_table(length: int, dim: int, base: float) -> np.ndarray:
    """tensor2tensor order with the paper's frequencies: [sin(p ω_0) … sin(p ω_{d/2−1}),
    cos(p ω_0) … cos(p ω_{d/2−1})], ω_i = base^(−2i/d)."""
    table = np.zeros((length, dim))
    for row in range(length):
        for i in range(dim // 2):
            angle = row / base ** (2 * i / dim)
            table[row, i] = math.sin(angle)
            table[row, dim // 2 + i] = math.cos(angle)
    return table


# -- the table -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("length", "dim", "base"), [(50, 16, 10000.0), (7, 6, 100.0), (33, 2, 10.0), (64, 32, 500.0)]
)
def test_sinusoidal_table_matches_closed_form(length, dim, base):
    expected = torch.from_numpy(reference_sinusoidal_table(length, dim, base)).float()
    torch.testing.assert_close(sinusoidal_table(length, dim, base), expected, rtol=0, atol=1e-5)


def test_sinusoidal_table_golden_rows_from_design():
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [0.84147, 0.54030, 0.09983, 0.99500],
            [0.90930, -0.41615, 0.19867, 0.98007],
        ]
    )
    torch.testing.assert_close(sinusoidal_table(3, 4, 100.0), expected, rtol=0, atol=1e-5)


def test_sinusoidal_table_shape_and_dtype():
    table = sinusoidal_table(13, 10)
    assert table.shape == (13, 10)
    assert table.dtype == torch.float32


@pytest.mark.parametrize("position", [0, 3, 17])
@pytest.mark.parametrize("shift", [1, 5, 40])
def test_sinusoidal_shift_is_block_rotation(position, shift):
    # PE(p + k) = T(k) PE(p); per frequency ω the (sin, cos) pair turns by
    # [[cos ωk, sin ωk], [−sin ωk, cos ωk]]
    dim, base = 12, 100.0
    table = sinusoidal_table(position + shift + 1, dim, base).double()
    transform = np.zeros((dim, dim))
    for i, omega in enumerate(ref_theta(dim, base)):
        c, s = math.cos(omega * shift), math.sin(omega * shift)
        transform[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]
    predicted = torch.from_numpy(transform) @ table[position]
    torch.testing.assert_close(table[position + shift], predicted, rtol=0, atol=2e-5)
    # and the shift is not trivially the identity
    assert not torch.allclose(table[position + shift], table[position], atol=1e-2)


@pytest.mark.parametrize("base", [1.0, 0.5, 0.0, -2.0])
def test_base_at_most_one_raises(base):
    with pytest.raises(ValueError, match=r"pe\.base"):
        Sinusoidal(d_model=32, n_heads=4, base=base)


# -- fp32 under bf16 autocast ----------------------------------------------------------------
def test_sinusoidal_table_fp32_under_autocast():
    expected = sinusoidal_table(2048, 64)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        table = sinusoidal_table(2048, 64)
    assert table.dtype == torch.float32
    torch.testing.assert_close(table, expected, rtol=0, atol=0)


def test_sinusoidal_embed_fp32_positions_under_autocast():
    pe = Sinusoidal(d_model=64, n_heads=4)
    x = torch.zeros(1, 16, 64)
    positions = torch.arange(20_000, 20_016)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        embedded = pe.embed(x, positions)
    table = torch.from_numpy(reference_sinusoidal_table(16, 64, 10000.0, start=20_000))
    assert embedded.dtype == torch.float32
    torch.testing.assert_close(embedded[0].double(), table, rtol=0, atol=5e-3)


# -- layouts ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("dim", "base"), [(4, 100.0), (16, 10000.0), (2, 10.0)])
def test_concatenated_table_matches_closed_form(dim, base):
    expected = torch.from_numpy(ref_concatenated_table(40, dim, base)).float()
    got = sinusoidal_table(40, dim, base, layout="concatenated")
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("dim", [2, 8, 64])
def test_concatenated_table_is_a_column_permutation_of_interleaved(dim):
    interleaved = sinusoidal_table(100, dim, 500.0)
    concatenated = sinusoidal_table(100, dim, 500.0, layout="concatenated")
    # interleaved column 2i = concatenated column i, 2i+1 = concatenated column d/2 + i
    order = [c for i in range(dim // 2) for c in (i, dim // 2 + i)]
    torch.testing.assert_close(concatenated[:, order], interleaved, rtol=0, atol=0)


def test_sinusoidal_default_layout_is_interleaved():
    assert torch.equal(sinusoidal_table(9, 8), sinusoidal_table(9, 8, layout="interleaved"))
    assert Sinusoidal(d_model=8, n_heads=2).describe() == {}


def test_sinusoidal_module_concatenated_embeds_the_permuted_table():
    pe = Sinusoidal(d_model=16, n_heads=2, layout="concatenated")
    x = torch.zeros(1, 12, 16)
    torch.testing.assert_close(
        pe.embed(x, torch.arange(12))[0], sinusoidal_table(12, 16, layout="concatenated")
    )
    assert pe.describe() == {"layout": "concatenated"}


def test_sinusoidal_unknown_layout_raises():
    with pytest.raises(ValueError, match=r"pe\.layout"):
        sinusoidal_table(4, 8, layout="half")
    with pytest.raises(ValueError, match=r"pe\.layout"):
        Sinusoidal(d_model=8, n_heads=2, layout="split")


# -- grids and volumes (sinusoidal_grid) -----------------------------------------------------
@pytest.mark.parametrize(("shape", "dim"), [((3, 5), 8), ((4, 2), 12), ((2, 3, 4), 12)])
def test_sinusoidal_grid_equals_per_axis_tables(shape, dim):
    share = dim // len(shape)
    tables = [reference_sinusoidal_table(size, share, 10000.0) for size in shape]
    expected = np.zeros((*shape, dim))
    for cell in np.ndindex(*shape):
        expected[cell] = np.concatenate([tables[a][c] for a, c in enumerate(cell)])
    actual = sinusoidal_grid(shape, dim)
    assert actual.shape == (*shape, dim) and actual.dtype == torch.float32
    torch.testing.assert_close(actual.double(), torch.from_numpy(expected), atol=1e-6, rtol=0)


def test_sinusoidal_grid_base_is_used():
    expected = reference_sinusoidal_table(6, 4, 100.0)  # axis 1 of a (1, 6) grid
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
        pe.embed(x, grid_cells((3, 4)))[0], sinusoidal_grid((3, 4), 8).flatten(0, 1)
    )
