"""The config of Randomized YaRN on RoPE (``lengen.pe.randomized_yarn``), without torch: RoPE's
options with YaRN on by default, and the range training positions are drawn from."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from lengen.pe.config.base import EncodingContext
from lengen.pe.config.random_float import refuse_other_draws
from lengen.pe.config.rope import RoPEConfig, RopeSizes
from lengen.schema import integer, number, one_of, option


def yarn_range(configured: int | None, factor: float, original: int | None) -> int | None:
    """R, the range training positions are drawn from: the option, else ⌈s · L⌉, the context
    YaRN's factor s extends the training positions L to; None when L is unknown."""
    if configured is not None:
        return configured
    return None if original is None else math.ceil(factor * original)


@dataclasses.dataclass(frozen=True)
class RandomizedYaRNConfig(RoPEConfig):
    #: positions come from the encoding's own draw on sequences; grids bring theirs
    supports_axes: ClassVar[bool] = False
    #: draws random positions in every training step (lengen.packable refuses it in packs,
    #: as it refuses pe.randomized: one generator cannot draw each member's alike)
    draws_training_positions: ClassVar[bool] = True
    #: YaRN is the method's frequencies (RoPE's other scalings belong to pe=rope)
    scaling: str = option("yarn", one_of("yarn"))
    #: s: YaRN's factor, and (with draw_range null) how far past the training positions
    #: training's positions reach
    scaling_factor: float = option(4.0, number(at_least=1))
    #: R: training positions are a sorted random subset of the integers 0 … R−1; null = ⌈s·L⌉
    draw_range: int | None = option(None, integer(nullable=True))

    def check_own(self, context: EncodingContext) -> RopeSizes:
        refuse_other_draws(self, context, "rope_randomized_yarn")
        original = self.original_max_position or context.train_positions
        span = yarn_range(self.draw_range, self.scaling_factor, original)
        if span is not None and context.train_positions and span < context.train_positions:
            raise ValueError(
                f"pe.draw_range={span} is shorter than the {context.train_positions} "
                f"positions of a training sequence; allowed: an integer >= "
                f"{context.train_positions}, or null (scaling_factor x the training positions)"
            )
        if original is None:
            # a model built without a training length (not by a run): no L for YaRN to scale
            # from, so RoPE's frequencies unscaled (lengen.pe.randomized_yarn says so)
            return RoPEConfig.check_own(dataclasses.replace(self, scaling="none"), context)
        return super().check_own(context)
