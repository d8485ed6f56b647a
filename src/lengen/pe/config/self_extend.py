"""Self-Extend's options (``pe.extension=self_extend``; ``lengen.pe.self_extend``), without
torch: the group size G and the neighbour window W, checked against the run."""

from __future__ import annotations

from typing import NamedTuple

from lengen.pe.config.base import EncodingContext


class SelfExtendParams(NamedTuple):
    """G (``pe.self_extend_group``) and W (``pe.self_extend_window``), as checked."""

    group: int
    window: int


def check_self_extend(cfg, context: EncodingContext) -> SelfExtendParams:
    """Both keys are required: the reference code's defaults (G = 8, W = 1024) are sized for
    4k-token models and would leave every lengen evaluation inside the window."""
    for key in ("self_extend_group", "self_extend_window"):
        if getattr(cfg, key) is None:
            raise ValueError(
                f"pe.{key} must be set for pe.extension=self_extend; allowed: an integer >= 1 "
                f"(e.g. pe.self_extend_group=4 pe.self_extend_window=8)"
            )
    return SelfExtendParams(cfg.self_extend_group, cfg.self_extend_window)
