"""The config of RoPE under Random Float Sampling (``lengen.pe.random_float``), without torch:
its options beside RoPE's, and the range it draws from."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingContext
from lengen.pe.config.rope import RoPEConfig, RopeSizes
from lengen.schema import flag, integer, option


def refuse_other_draws(config, context: EncodingContext, name: str) -> None:
    """An encoding that draws its own training positions takes no second source of them:
    Ruoss et al.'s integer draw (``pe.randomized``) or the task's positions."""
    if config.randomized:
        raise ValueError(
            f"pe.randomized=true draws integer positions of its own, but pe={name} draws its "
            f"training positions itself; allowed: pe.randomized=false"
        )
    if context.task_positions:
        raise ValueError(
            f"pe={name} draws its training positions, but the task supplies them "
            f"(data.task.positions); allowed: data.task.positions=index, or pe=rope"
        )


def drawn_range(configured: int | None, context: EncodingContext) -> int | None:
    """R, the range a draw covers: the option, else the longest evaluation sequence's positions
    (so that evaluation's positions 0 … T−1 all lie inside what training saw), else the
    training positions; None for a model built without either (the draw then covers the
    sequence's own length, ``lengen.pe.random_float``)."""
    return configured or context.max_positions or context.train_positions


@dataclasses.dataclass(frozen=True)
class RandomFloatRoPEConfig(RoPEConfig):
    #: positions come from the encoding's own draw on sequences; grids bring theirs
    supports_axes: ClassVar[bool] = False
    #: draws random positions in every training step (lengen.packable refuses it in packs,
    #: as it refuses pe.randomized: one generator cannot draw each member's alike)
    draws_training_positions: ClassVar[bool] = True
    #: R: training positions are T sorted draws from the uniform distribution on [0, R); null =
    #: the longest evaluation sequence's positions (else the training positions)
    float_range: int | None = option(None, integer(nullable=True))
    #: evaluate on one fixed draw per length too (seeded by the length); false: 0 … T−1
    float_eval: bool = option(False, flag())

    def check_own(self, context: EncodingContext) -> RopeSizes:
        refuse_other_draws(self, context, "rope_rfs")
        if self.extension != "none":
            # the training-free arms re-map the integer positions 0 … T−1 (lengen.pe.extension)
            raise ValueError(
                f"pe.extension={self.extension} re-maps the positions 0 … T−1, but pe=rope_rfs "
                f"trains on real positions it draws; allowed: pe.extension=none (or pe=rope)"
            )
        span = drawn_range(self.float_range, context)
        if span is not None and context.train_positions and span < context.train_positions:
            raise ValueError(
                f"pe.float_range={span} is shorter than the {context.train_positions} positions "
                f"of a training sequence; allowed: an integer >= {context.train_positions}, or "
                f"null (the longest evaluation sequence)"
            )
        return super().check_own(context)
