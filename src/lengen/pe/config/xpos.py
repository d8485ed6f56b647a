"""xPos's config (``lengen.pe.xpos``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import (
    BASE,
    SIZED_FROM_TRAINING,
    EncodingConfig,
    EncodingContext,
    require_even_head_dim,
)
from lengen.pe.config.rope import ROPE_LAYOUTS
from lengen.schema import number, one_of, option


@dataclasses.dataclass(frozen=True)
class XPosConfig(EncodingConfig):
    attention_copies: ClassVar[int] = 2  # the decay's scaled copies of q, k (measured 1.5)
    causal_only: ClassVar[bool] = True
    base: float = option(BASE, number(above=1))
    layout: str = option("interleaved", one_of(*ROPE_LAYOUTS))
    #: γ of the decay; null: train_positions / 2 (the paper's 512 for 1,024 tokens)
    scale_base: float | None = option(None, SIZED_FROM_TRAINING)
    gamma: float = option(0.4, number(above=0))

    def check_own(self, context: EncodingContext) -> None:
        require_even_head_dim(context, "xpos")
