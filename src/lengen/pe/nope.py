"""NoPE: no positional encoding (Kazemnejad et al., 2023, "The Impact of Positional Encoding on
Length Generalization in Transformers").

A causal decoder still infers positions from the causal mask. A bidirectional encoder without
positions is permutation-invariant: it cannot tell positions apart, so lengen warns and labels
such runs ``position_blind`` in results.json.
"""

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.nope import NoPEConfig


class NoPE(PositionalEncoding):
    """Every hook is the base class's no-op."""

    #: nothing to do on any number of axes (NoPEConfig.supports_axes)
    Options = NoPEConfig
