"""Sandwich's config (``lengen.pe.sandwich``), without torch."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import BASE, DistanceBiasConfig
from lengen.schema import number, option


def _even_dimension(key: str, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or value % 2:
        raise ValueError(f"{key} must be an even integer >= 2, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class SandwichConfig(DistanceBiasConfig):
    dim: int = option(128, _even_dimension)
    base: float = option(BASE, number(above=1, message="must be > 1, got {value}"))
