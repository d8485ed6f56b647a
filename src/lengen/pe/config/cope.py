"""CoPE's config (``lengen.pe.cope``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig, EncodingContext, added
from lengen.schema import integer, option


@dataclasses.dataclass(frozen=True)
class CoPEConfig(EncodingConfig):
    attention_copies: ClassVar[int] = 20  # gates, their cumulative sums, interpolation (18)
    causal_only: ClassVar[bool] = True
    contextual_logits: ClassVar[bool] = True  # gates from q·k (lengen.pe.cope)
    npos_max: int = option(64, integer(minimum=2))

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        return {"pe.npos_max": context.head_dim * self.npos_max}  # embeddings (hd, npos_max)

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        # q · embeddings (B, H, T, npos_max), its interpolation at the counts, their gradients
        base = super().activation_sizes(context, batch, tokens)
        return added(base, {"pe.npos_max": 3 * batch * context.n_heads * tokens * self.npos_max})
