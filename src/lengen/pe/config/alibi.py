"""ALiBi's config (``lengen.pe.alibi``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import DistanceBiasConfig, EncodingContext
from lengen.schema import flag, one_of, option

#: ``pe.bidirectional`` of ALiBi in a non-causal stack
BIDIRECTIONAL = ("symmetric", "asymmetric_offset", "separate")
#: ``pe.grid_distance``: how far apart two cells of a grid are
GRID_DISTANCES = ("euclidean", "manhattan")


@dataclasses.dataclass(frozen=True)
class ALiBiConfig(DistanceBiasConfig):
    supports_axes: ClassVar[bool] = True
    bidirectional: str = option("symmetric", one_of(*BIDIRECTIONAL))
    grid_distance: str = option("euclidean", one_of(*GRID_DISTANCES))
    learnable_slopes: bool = option(False, flag())

    def check_own(self, context: EncodingContext) -> None:
        if context.axes > 1 and self.bidirectional != "symmetric" and not context.causal:
            # a distance between cells: no cell is before another (lengen.pe.alibi's docstring)
            raise ValueError(
                f"pe.bidirectional={self.bidirectional} has no form on a grid (no cell is "
                f"before another); allowed: symmetric"
            )
