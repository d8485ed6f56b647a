"""PoPE's config (``lengen.pe.pope``: polar coordinates), without torch."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import BASE, EncodingConfig
from lengen.schema import number, one_of, option

#: how PoPE's learnable key phase bias δ starts: zero (both reference codes' default) or
#: uniform in [−2π, 0] (their ``bias_uniform_init``)
POPE_BIAS_INITS = ("zero", "uniform")


@dataclasses.dataclass(frozen=True)
class PoPEConfig(EncodingConfig):
    base: float = option(BASE, number(above=1, message="must be > 1, got {value}"))
    bias_init: str = option("zero", one_of(*POPE_BIAS_INITS))
