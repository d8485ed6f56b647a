"""Sandwich's config (``lengen.pe.sandwich``), without torch."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import BASE, DistanceBiasConfig, EncodingContext, added
from lengen.schema import number, option


def _even_dimension(key: str, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or value % 2:
        raise ValueError(f"{key} must be an even integer >= 2, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class SandwichConfig(DistanceBiasConfig):
    dim: int = option(128, _even_dimension)
    base: float = option(BASE, number(above=1, message="must be > 1, got {value}"))

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        # the profile sums dim/2 cosines over every distance in fp64 (``sandwich_profile``):
        # one pass at a time, but counted as the (T, dim/2) terms a vectorised form would
        # hold, so a dim whose sum cannot finish (pe.dim=1e9: 5e8 passes) is refused as
        # its memory would be; at the default 128 this is T × 128 floats
        base = super().activation_sizes(context, batch, tokens)
        return added(base, {"pe.dim": tokens * self.dim})
