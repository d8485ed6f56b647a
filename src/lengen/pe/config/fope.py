"""FoPE's config (``lengen.pe.fope``: Fourier position embedding), without torch: its options,
and the frequency counts the encoding derives from them (pure Python, so a refusal costs no
``import torch``)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

from lengen.pe.config.base import BASE, EncodingConfig, EncodingContext, require_even_head_dim
from lengen.schema import flag, integer, number, one_of, option

#: ``pe.form``: the authors' code (``olmo/model.py``, ``FourierEmbedding``), or the paper's
#: formula (one Fourier series per pair, clipped pairs at frequency zero)
FOPE_FORMS = ("reference", "paper")


def fope_floor(floor_ratio: float, length: int | None) -> float:
    """The floor frequency ω_floor = floor_ratio · 2π / L (the reference's ``floor_freq``):
    a pair turning slower completes less than floor_ratio periods within training."""
    if floor_ratio == 0 or length is None:
        return 0.0
    return floor_ratio * 2 * math.pi / length


def kept_frequencies(head_dim: int, base: float, floor: float) -> int:
    """How many of RoPE's hd/2 frequencies θ_i = base^(−2i/hd) reach the floor (θ_i ≥ floor;
    they decrease with i, so these are the first ones)."""
    return sum(base ** (-2 * i / head_dim) >= floor for i in range(head_dim // 2))


class FopeSizes(NamedTuple):
    """What FoPE derives from its checked options."""

    floor: float  # ω_floor, 0 without clipping
    frequencies: int  # D: the frequencies of the Fourier basis (those that reach the floor)
    mixed_pairs: int  # P: pairs that carry a Fourier series; the other hd/2 − P are constant
    #: the floor clipped every frequency (L < 2π / θ_0 ≈ 6.3 positions), so θ_0 was kept
    kept_fastest: bool = False


@dataclasses.dataclass(frozen=True)
class FoPEConfig(EncodingConfig):
    #: θ_i = base^(−2i/hd), RoPE's frequencies, from which the Fourier basis is drawn
    base: float = option(BASE, number(above=1, message="must be > 1, got {value}"))
    form: str = option("reference", one_of(*FOPE_FORMS))
    #: the random part of the coefficients: Xavier-normal std times this gain (the reference's
    #: ``fourier_init_norm_gain``: 0.3 at 60M parameters, 0.4 at 180M, 0.6 at 1.2B)
    coefficient_gain: float = option(0.3, number(at_least=0))
    #: ω_floor = floor_ratio · 2π / L; frequencies below it are clipped to zero (0: no clipping)
    floor_ratio: float = option(1.0, number(at_least=0))
    #: L of the floor; null: the positions seen in training (pe.max_position if randomized)
    original_max_position: int | None = option(None, integer(nullable=True))
    #: train the coefficients (the reference's ``fourier_learnable``, false in its configs)
    learnable: bool = option(False, flag())

    def check_own(self, context: EncodingContext) -> FopeSizes:
        require_even_head_dim(context, "fope")
        length = self.original_max_position
        if length is None:
            length = self.max_position if self.randomized else context.train_positions
        # without a training length (a model built by hand, not by a run) there is no floor to
        # clip below: nothing is clipped, and ``describe`` says so (``lengen.pe.fope``)
        floor = fope_floor(self.floor_ratio, length)
        frequencies = kept_frequencies(context.head_dim, self.base, floor)
        # a floor above the fastest frequency (θ_0 = 1 rad per position: L < 6.3 at ratio 1)
        # would clip them all and leave NoPE under FoPE's name; the fastest is kept instead
        kept_fastest = frequencies == 0
        frequencies = max(frequencies, 1)
        # the reference mixes the kept frequencies into at most a quarter of the head's
        # dimensions (``output_dim = min(input_dim, head_dim // 4)``); the paper, every pair
        quarter = min(frequencies, context.head_dim // 4)
        mixed = quarter if self.form == "reference" else frequencies
        return FopeSizes(floor, frequencies, mixed, kept_fastest)

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # the coefficients (buffers, or parameters when learnable): per layer and head a
        # (D, P) block for the cosine and one for the sine, at most (hd/2, hd/2) each
        half = context.head_dim // 2
        return {"model.d_model": 2 * context.n_layers * context.n_heads * half * half}
