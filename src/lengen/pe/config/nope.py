"""NoPE's config (``lengen.pe.nope``): the options every encoding takes, on any axes."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig


@dataclasses.dataclass(frozen=True)
class NoPEConfig(EncodingConfig):
    supports_axes: ClassVar[bool] = True
    acts_in_attention: ClassVar[bool] = False  # nothing acts (its shared options are refused)
