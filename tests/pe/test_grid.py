"""``lengen.pe.grid``: what every encoding of positions on several axes (grids A = 2, volumes
A = 3) shares: a row of −1s gets no positional signal from any encoding (as rope-vit rotates the
patch tokens only), positions come with the data, the log-length scale counts the training
grid's cells, and the axis count and randomized positions are checked. Each encoding's own N-d
form is tested in its file (test_sinusoidal.py, test_learned.py, test_rope.py,
test_rope_mixed.py, test_alibi.py).
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

from helpers import grid_cells
from lengen.pe import ALiBi, Learned, NoPE, RoPE, RoPEMixed, Sinusoidal

pytestmark = pytest.mark.usefixtures("single_thread")


GRID_CLASSES = {
    "sinusoidal": Sinusoidal,
    "learned": Learned,
    "rope": RoPE,
    "rope_mixed": RoPEMixed,
    "alibi": ALiBi,
    "nope": NoPE,
}


# -- −1 rows: no positional signal -----------------------------------------------------------
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
    positions = grid_cells((3,) * axes, readout=True)  # the last row is [-1, …, -1]
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


# -- options on grids ------------------------------------------------------------------------
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
