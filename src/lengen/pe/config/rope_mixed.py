"""RoPE-Mixed's config (``lengen.pe.rope_mixed``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig, EncodingContext, axis_share, require_even_head_dim
from lengen.schema import flag, number, option


@dataclasses.dataclass(frozen=True)
class RoPEMixedConfig(EncodingConfig):
    supports_axes: ClassVar[bool] = True
    #: null: 10,000 on sequences, 100 on grids (the reference's rope_theta)
    base: float | None = option(
        None,
        number(
            above=1, nullable=True, message="must be > 1, or null for the default, got {value!r}"
        ),
    )
    per_layer: bool = option(True, flag())

    def check_own(self, context: EncodingContext) -> None:
        require_even_head_dim(context, "rope_mixed")
        axis_share(
            context.head_dim,
            context.axes,
            "pe=rope_mixed: the head dimension (model.d_model / model.n_heads)",
        )
