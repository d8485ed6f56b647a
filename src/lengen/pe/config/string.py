"""STRING's config (``lengen.pe.string``), without torch: RoPE-Mixed's options."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import EncodingContext, axis_share, require_even_head_dim
from lengen.pe.config.rope_mixed import RoPEMixedConfig


@dataclasses.dataclass(frozen=True)
class STRINGConfig(RoPEMixedConfig):
    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # the bases S (sets, H, hd, hd) and RoPE-Mixed's frequencies (sets, H, hd/2, A)
        sets = context.n_layers if self.per_layer else 1
        per_head = context.head_dim**2 + context.head_dim // 2 * context.axes
        return {"model.d_model": sets * context.n_heads * per_head}

    def check_own(self, context: EncodingContext) -> None:
        require_even_head_dim(context, "string")
        axis_share(
            context.head_dim,
            context.axes,
            "pe=string: the head dimension (model.d_model / model.n_heads)",
        )
