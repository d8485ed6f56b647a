"""FIRE's config (``lengen.pe.fire``), without torch."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import SIZED_FROM_TRAINING, DistanceBiasConfig
from lengen.schema import integer, number, option


@dataclasses.dataclass(frozen=True)
class FIREConfig(DistanceBiasConfig):
    mlp_width: int = option(32, integer())
    init_c: float = option(0.1, number(above=0))
    #: L₀; null: train_positions / 4 (the paper's 512 for 2,048 tokens)
    init_threshold: float | None = option(None, SIZED_FROM_TRAINING)
