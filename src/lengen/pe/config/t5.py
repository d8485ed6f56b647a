"""T5's relative bias's config (``lengen.pe.t5``), without torch."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from lengen.pe.config.base import DistanceBiasConfig, EncodingContext
from lengen.schema import integer, option

#: T5's max_distance and the training length it was chosen for (Raffel et al.: 512 tokens)
T5_PAPER_MAX_DISTANCE, T5_PAPER_TRAIN_LENGTH = 128, 512


class T5Sizes(NamedTuple):
    """``pe.max_distance`` as T5 uses it, and where it came from."""

    max_distance: int
    source: str


@dataclasses.dataclass(frozen=True)
class T5RelativeBiasConfig(DistanceBiasConfig):
    num_buckets: int = option(32, integer(minimum=4))
    #: null: train_positions // 4 (T5's 128 for 512 tokens), at least num_buckets // 2 + 1
    max_distance: int | None = option(None)

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        return {"pe.num_buckets": self.num_buckets * context.n_heads}  # the table (buckets, H)

    def check_own(self, context: EncodingContext) -> T5Sizes:
        max_distance, source = self.max_distance, "given"
        train = context.train_positions
        if max_distance is None and not train:
            max_distance, source = T5_PAPER_MAX_DISTANCE, "T5's 128 (training positions unknown)"
        elif max_distance is None:
            ratio = T5_PAPER_TRAIN_LENGTH // T5_PAPER_MAX_DISTANCE  # 4
            max_distance = max(train // ratio, self.num_buckets // 2 + 1)
            source = f"max(train_positions {train} // {ratio}, num_buckets // 2 + 1)"
        if (
            isinstance(max_distance, bool)
            or not isinstance(max_distance, int)
            or max_distance <= self.num_buckets // 2
        ):
            raise ValueError(
                f"pe.max_distance must be an integer > pe.num_buckets // 2 = "
                f"{self.num_buckets // 2} (the exactly represented distances), or null "
                f"(train_positions // 4), got {max_distance!r}"
            )
        return T5Sizes(max_distance, source)
