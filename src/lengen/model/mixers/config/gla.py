"""Gated linear attention's config (``lengen.model.mixers.gla``)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.model.mixers.config.base import LinearMixerConfig
from lengen.model.mixers.config.state import RecurrentStateConfig


@dataclasses.dataclass(frozen=True)
class GatedLinearAttentionConfig(LinearMixerConfig, RecurrentStateConfig):
    display_name: ClassVar[str] = "GLA"
