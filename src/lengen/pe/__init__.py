"""Positional encodings: one module per encoding, pure functions at each module's top.

Functional API (pure, documented shapes) for notebooks and plots:
``sinusoidal_table``, ``alibi_slopes``, ``apply_rope`` (plus ``rope_inverse_frequencies``,
``apply_xpos``, ``t5_relative_bucket``, ``kerple_bias``, ``sandwich_profile``).

Positions on A axes (grids A = 2, volumes A = 3; ``lengen.pe.grid``):

* ``sinusoidal_grid(shape, dim, base=BASE) -> Tensor[*shape, dim]`` (BASE: 10,000,
  ``lengen.pe.config.base``): channels
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

from __future__ import annotations

import importlib

#: module -> the public names it gives this package. Resolved on first access (PEP 562), so
#: that ``import lengen.pe.config`` (the encodings' checks, for a refusal before torch is
#: imported) does not import every encoding, and torch with them.
_MODULES = {
    "lengen.pe.alibi": ("ALiBi", "alibi_slopes", "grid_distance"),
    "lengen.pe.base": ("PositionalEncoding",),
    "lengen.pe.cope": ("CoPE",),
    "lengen.pe.fire": ("FIRE",),
    "lengen.pe.grid": ("grid_positions",),
    "lengen.pe.kerple": ("KERPLE", "kerple_bias"),
    "lengen.pe.learned": ("Learned",),
    "lengen.pe.nope": ("NoPE",),
    "lengen.pe.rope": ("RoPE", "apply_rope", "rope_inverse_frequencies"),
    "lengen.pe.rope_mixed": ("RoPEMixed", "mixed_frequencies"),
    "lengen.pe.sandwich": ("Sandwich", "sandwich_profile"),
    "lengen.pe.sinusoidal": ("Sinusoidal", "sinusoidal_grid", "sinusoidal_table"),
    "lengen.pe.t5": ("T5RelativeBias", "t5_relative_bucket"),
    "lengen.pe.xpos": ("XPos", "apply_xpos"),
}
_SOURCE = {name: module for module, names in _MODULES.items() for name in names}

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


def module_of(name: str) -> str | None:
    """The module a public name of this package comes from (``RoPE`` -> ``lengen.pe.rope``),
    without importing it; None for another name."""
    return _SOURCE.get(name)


def __getattr__(name: str):
    """A public name, imported from its module on first access (then cached here)."""
    module = _SOURCE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
