"""Positional encodings: one module per encoding, pure functions at each module's top.

Functional API (pure, documented shapes) for notebooks and plots:
``sinusoidal_table``, ``alibi_slopes``, ``apply_rope`` (plus ``rope_inverse_frequencies``,
``apply_xpos``, ``t5_relative_bucket``, ``kerple_bias``, ``sandwich_profile``).

Positions on A axes (grids A = 2, volumes A = 3; ``lengen.pe.grid``):

* ``sinusoidal_grid(shape, dim, base=10000.0) -> Tensor[*shape, dim]``: channels
  ``[sinusoidal_table(shape[0], dim/A)[c_0] | sinusoidal_table(shape[1], dim/A)[c_1] | …]``
  for the cell (c_0, c_1, …); dim divisible by 2A.
* ``apply_rope(x, positions, base)`` with integer positions (T, A): axial RoPE, the rotated
  pairs split into A blocks, block a a 1-D RoPE of dimension head_dim/A of coordinate a; q·k
  depends on the offset vector only. (T,) positions behave exactly as before.
* ``grid_positions(shape) -> (prod(shape), A)``: the cells' coordinates, row-major; a row of −1s
  marks a token without a grid position (no positional signal from any encoding).
* ``grid_distance(offsets, kind)``: the distance 2-D ALiBi uses; ``mixed_frequencies``: the
  initial frequencies of RoPE-Mixed.
"""

from lengen.pe.alibi import ALiBi, alibi_slopes, grid_distance
from lengen.pe.base import PositionalEncoding
from lengen.pe.cope import CoPE
from lengen.pe.fire import FIRE
from lengen.pe.grid import grid_positions
from lengen.pe.kerple import KERPLE, kerple_bias
from lengen.pe.learned import Learned
from lengen.pe.nope import NoPE
from lengen.pe.rope import RoPE, apply_rope, rope_inverse_frequencies
from lengen.pe.rope_mixed import RoPEMixed, mixed_frequencies
from lengen.pe.sandwich import Sandwich, sandwich_profile
from lengen.pe.sinusoidal import Sinusoidal, sinusoidal_grid, sinusoidal_table
from lengen.pe.t5 import T5RelativeBias, t5_relative_bucket
from lengen.pe.xpos import XPos, apply_xpos

__all__ = [
    "FIRE",
    "KERPLE",
    "ALiBi",
    "CoPE",
    "Learned",
    "NoPE",
    "PositionalEncoding",
    "RoPE",
    "RoPEMixed",
    "Sandwich",
    "Sinusoidal",
    "T5RelativeBias",
    "XPos",
    "alibi_slopes",
    "apply_rope",
    "apply_xpos",
    "grid_distance",
    "grid_positions",
    "kerple_bias",
    "mixed_frequencies",
    "rope_inverse_frequencies",
    "sandwich_profile",
    "sinusoidal_grid",
    "sinusoidal_table",
    "t5_relative_bucket",
]
