"""Gated DeltaNet's config (``lengen.model.mixers.gated_deltanet``)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.model.mixers.config.deltanet import DeltaNetConfig


@dataclasses.dataclass(frozen=True)
class GatedDeltaNetConfig(DeltaNetConfig):
    display_name: ClassVar[str] = "Gated DeltaNet"
