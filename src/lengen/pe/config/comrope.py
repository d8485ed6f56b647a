"""ComRoPE's config (``lengen.pe.comrope``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingContext
from lengen.pe.config.liere import GeneratorConfig
from lengen.schema import integer, number, one_of, option

#: ``pe.variant``: ComRoPE-LD (linearly dependent) or ComRoPE-AP (axis-partitioned)
VARIANTS = ("ld", "ap")


@dataclasses.dataclass(frozen=True)
class ComRoPEConfig(GeneratorConfig):
    label: ClassVar[str] = "comrope"
    #: ``ld``: A_a = θ_{a,j} (P_j − P_jᵀ) per block j; ``ap``: block j turns with axis j mod A
    variant: str = option("ld", one_of(*VARIANTS))
    #: b of the b×b blocks (the reference code's ``block_size`` default, 2)
    block_size: int = option(2, integer(minimum=2))
    #: standard deviation of the initial P (the reference's ``init_std``)
    init_std: float = option(1.0, number(above=0))

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # P (sets, H, hd/b, b, b) and, for LD, θ (sets, A, hd/b)
        block, sets = self.block(context), self.sets(context)
        size = sets * context.n_heads * context.head_dim * block
        if self.variant == "ld":
            size += sets * context.axes * (context.head_dim // block)
        return {"pe.block_size": size}

    def check_own(self, context: EncodingContext) -> int:
        block = super().check_own(context)
        if self.variant == "ap" and (context.head_dim // block) % context.axes:
            raise ValueError(
                f"pe.variant=ap gives each of the {context.axes} axes an equal share of the "
                f"{context.head_dim // block} blocks of pe.block_size={block}: the head "
                f"dimension (model.d_model / model.n_heads = {context.head_dim}) must be a "
                f"multiple of {block * context.axes}; allowed: another pe.block_size, or "
                f"pe.variant=ld"
            )
        return block
