"""Softmax attention's config as a mixer: no options of its own (the kernel is
``model.attention``; positions are ``pe``'s)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.model.mixers.config.base import MixerConfig


@dataclasses.dataclass(frozen=True)
class AttentionConfig(MixerConfig):
    recurrent: ClassVar[bool] = False  # keys and values, in either direction
    display_name: ClassVar[str] = "attention"  # a hybrid's legend: "3× GLA + attention"
