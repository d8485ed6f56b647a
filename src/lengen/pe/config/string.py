"""STRING's config (``lengen.pe.string``), without torch: RoPE-Mixed's options."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import EncodingContext, axis_share, require_even_head_dim
from lengen.pe.config.rope_mixed import RoPEMixedConfig


@dataclasses.dataclass(frozen=True)
class STRINGConfig(RoPEMixedConfig):
    def check_own(self, context: EncodingContext) -> None:
        require_even_head_dim(context, "string")
        axis_share(
            context.head_dim,
            context.axes,
            "pe=string: the head dimension (model.d_model / model.n_heads)",
        )
