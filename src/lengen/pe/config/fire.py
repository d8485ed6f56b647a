"""FIRE's config (``lengen.pe.fire``), without torch."""

from __future__ import annotations

import dataclasses

from lengen.pe.config.base import SIZED_FROM_TRAINING, DistanceBiasConfig, EncodingContext, added
from lengen.schema import integer, number, option


@dataclasses.dataclass(frozen=True)
class FIREConfig(DistanceBiasConfig):
    mlp_width: int = option(32, integer())
    init_c: float = option(0.1, number(above=0))
    #: L₀; null: train_positions / 4 (the paper's 512 for 2,048 tokens)
    init_threshold: float | None = option(None, SIZED_FROM_TRAINING)

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # f_θ: 1 -> mlp_width -> heads, with biases; c and the threshold's multiplier
        return {"pe.mlp_width": self.mlp_width * (2 + context.n_heads) + context.n_heads + 2}

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        # the MLP's hidden layer (T, T, mlp_width) before and after its ReLU: one per layer,
        # shared by the batch (its input is the distances alone)
        base = super().activation_sizes(context, batch, tokens)
        return added(base, {"pe.mlp_width": 2 * tokens * tokens * self.mlp_width})
