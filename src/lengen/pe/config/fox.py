"""Forgetting Attention's config (``lengen.pe.fox``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig, EncodingContext
from lengen.schema import number, option


@dataclasses.dataclass(frozen=True)
class ForgettingAttentionConfig(EncodingConfig):
    attention_copies: ClassVar[int] = 3  # the gates' cumulative log-decay bias (measured 2.5)
    computes_attention: ClassVar[bool] = True
    #: the forget gates' bias at initialisation: 0.0 (the FoX reference, f = σ(0) = 0.5);
    #: x-transformers' DataDependentAlibi starts at 5.0 (f ≈ 0.993)
    gate_bias_init: float = option(0.0, number())

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # per layer, the gates' projection (H, D) and bias (H)
        gates = context.n_layers * context.n_heads * (context.d_model + 1)
        return {"model.d_model": gates}
