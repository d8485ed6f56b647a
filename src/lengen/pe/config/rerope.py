"""ReRoPE's options (``pe.extension=rerope``; ``lengen.pe.rerope``), without torch: the window
w and, for Leaky ReRoPE, the leak k."""

from __future__ import annotations

from typing import NamedTuple

from lengen.pe.config.base import EncodingContext


class ReRoPEParams(NamedTuple):
    """w (``pe.rerope_window``) and k (``pe.rerope_leak``; None: plain ReRoPE), as checked."""

    window: int
    leak: float | None


def check_rerope(cfg, context: EncodingContext) -> ReRoPEParams:
    """The window is required (the reference's 512 of 4,096 would cover every lengen
    evaluation); the leak is optional."""
    if cfg.rerope_window is None:
        raise ValueError(
            "pe.rerope_window must be set for pe.extension=rerope; allowed: an integer >= 1 "
            "(e.g. pe.rerope_window=8: relative positions >= 8 all read as 8)"
        )
    return ReRoPEParams(cfg.rerope_window, cfg.rerope_leak)
