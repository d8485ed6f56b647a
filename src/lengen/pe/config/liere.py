"""LieRE's config (``lengen.pe.liere``), and the options every learned-generator rotation
shares (``GeneratorConfig``: ComRoPE's too), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig, EncodingContext, added
from lengen.schema import flag, integer, option


@dataclasses.dataclass(frozen=True)
class GeneratorConfig(EncodingConfig):
    """Rotations R(p) = exp(Σ_a p_a A_a) with learned skew-symmetric blocks A_a."""

    supports_axes: ClassVar[bool] = True
    #: the pe= name in messages
    label: ClassVar[str] = "liere"
    #: one generator set per layer (both references build one per attention layer)
    per_layer: bool = option(True, flag())
    #: coordinates divided by the training extent per axis (the references' normalised
    #: positions); false: integer coordinates
    normalize: bool = option(True, flag())

    def block(self, context: EncodingContext) -> int:
        """The block size b as used (``block_size``, null: the head dimension)."""
        return self.block_size or context.head_dim

    def check_own(self, context: EncodingContext) -> int:
        block = self.block(context)
        if context.head_dim % block:
            raise ValueError(
                f"pe.block_size={block} must divide the head dimension (model.d_model / "
                f"model.n_heads = {context.head_dim}); allowed: a divisor of {context.head_dim}"
                + (" or null (the whole head)" if self.label == "liere" else "")
            )
        return block

    def sets(self, context: EncodingContext) -> int:
        """Parameter sets: one per layer, or one for the stack."""
        return context.n_layers if self.per_layer else 1

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict:
        # the rotations (H, T, hd/b, b, b) and matrix_exp's intermediates (about 6 copies)
        # per layer, kept for backward; independent of the batch
        block = self.block(context)
        rotations = 6 * context.n_heads * tokens * context.head_dim * block
        return added(super().activation_sizes(context, batch, tokens), {"data.len": rotations})


@dataclasses.dataclass(frozen=True)
class LieREConfig(GeneratorConfig):
    #: size of each skew-symmetric generator block; null = the head dimension (LieRE's
    #: generator_dim 64 = its dim_head: one dense generator per axis and head)
    block_size: int | None = option(None, integer(minimum=2, nullable=True))

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # raw generators (sets, H, A, hd/b, b, b)
        size = self.sets(context) * context.n_heads * context.axes * context.head_dim
        return {"pe.block_size": size * self.block(context)}
