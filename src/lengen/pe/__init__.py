"""Positional encodings: one module per encoding, pure functions at each module's top.

Functional API (pure, documented shapes) for notebooks and plots:
``sinusoidal_table``, ``alibi_slopes``, ``apply_rope``.
"""

from lengen.pe.alibi import ALiBi, alibi_slopes
from lengen.pe.base import PositionalEncoding
from lengen.pe.learned import Learned
from lengen.pe.nope import NoPE
from lengen.pe.rope import RoPE, apply_rope
from lengen.pe.sinusoidal import Sinusoidal, sinusoidal_table

__all__ = [
    "ALiBi",
    "Learned",
    "NoPE",
    "PositionalEncoding",
    "RoPE",
    "Sinusoidal",
    "alibi_slopes",
    "apply_rope",
    "sinusoidal_table",
]
