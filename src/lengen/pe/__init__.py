"""Positional encodings: one module per encoding, pure functions at each module's top.

Functional API (pure, documented shapes) for notebooks and plots:
``sinusoidal_table``, ``alibi_slopes``, ``apply_rope`` (plus ``rope_inverse_frequencies``,
``apply_xpos``, ``t5_relative_bucket``, ``kerple_bias``, ``sandwich_profile``).
"""

from lengen.pe.alibi import ALiBi, alibi_slopes
from lengen.pe.base import PositionalEncoding
from lengen.pe.cope import CoPE
from lengen.pe.fire import FIRE
from lengen.pe.kerple import KERPLE, kerple_bias
from lengen.pe.learned import Learned
from lengen.pe.nope import NoPE
from lengen.pe.rope import RoPE, apply_rope, rope_inverse_frequencies
from lengen.pe.sandwich import Sandwich, sandwich_profile
from lengen.pe.sinusoidal import Sinusoidal, sinusoidal_table
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
    "Sandwich",
    "Sinusoidal",
    "T5RelativeBias",
    "XPos",
    "alibi_slopes",
    "apply_rope",
    "apply_xpos",
    "kerple_bias",
    "rope_inverse_frequencies",
    "sandwich_profile",
    "sinusoidal_table",
    "t5_relative_bucket",
]
