"""PaTH's configs (``lengen.pe.path``: PaTH and PaTH-FoX), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig, EncodingContext, added
from lengen.schema import flag, integer, option


@dataclasses.dataclass(frozen=True)
class PaTHConfig(EncodingConfig):
    attention_copies: ClassVar[int] = 12  # the transforms' products over the keys (measured 9)
    computes_attention: ClassVar[bool] = True
    causal_only: ClassVar[bool] = True
    #: rank of the low-rank projection to the Householder vectors (the reference's 32)
    w_rank: int = option(32, integer())
    #: a causal depthwise convolution (width 3, SiLU) over the vectors before their L2 norm
    short_conv: bool = option(True, flag())
    #: PaTH-FoX: FoX's data-dependent forget gates on top of the transforms
    forget_gate: bool = option(False, flag())

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # per layer: the low-rank projection (w_rank, D) and (D, w_rank), the convolution (D, 3),
        # β's (H, D) and bias (H) (``lengen.pe.path.HouseholderProjections``); the gates: D + 1
        d_model, heads = context.d_model, context.n_heads
        others = 3 * d_model + heads * d_model + heads + d_model + 1
        if self.forget_gate:  # PaTH-FoX: FoX's gates, (H, D) and (H) per layer
            others += heads * (d_model + 1)
        return {"pe.w_rank": context.n_layers * (2 * self.w_rank * d_model + others)}

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        base = super().activation_sizes(context, batch, tokens)
        return added(
            base, {"pe.w_rank": 2 * batch * tokens * self.w_rank}
        )  # x · down (B, T, w_rank), grad


@dataclasses.dataclass(frozen=True)
class PaTHFoXConfig(PaTHConfig):
    #: path_fox.yaml: PaTH with the forget gates on by default
    forget_gate: bool = option(True, flag())
