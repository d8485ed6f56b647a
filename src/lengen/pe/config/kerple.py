"""KERPLE's config (``lengen.pe.kerple``), without torch."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import DistanceBiasConfig
from lengen.schema import one_of, option

#: ``pe.variant`` of KERPLE
KERPLE_VARIANTS = ("log", "power")


@dataclasses.dataclass(frozen=True)
class KERPLEConfig(DistanceBiasConfig):
    variant: str = option("log", one_of(*KERPLE_VARIANTS))
