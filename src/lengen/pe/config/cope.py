"""CoPE's config (``lengen.pe.cope``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig
from lengen.schema import integer, option


@dataclasses.dataclass(frozen=True)
class CoPEConfig(EncodingConfig):
    causal_only: ClassVar[bool] = True
    npos_max: int = option(64, integer(minimum=2))
