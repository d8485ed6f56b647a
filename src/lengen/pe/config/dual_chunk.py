"""Dual chunk attention's options (``pe.extension=dual_chunk``; ``lengen.pe.dual_chunk``),
without torch: the chunk size s and the local window w, defaulted as the reference code does."""

from __future__ import annotations

from typing import NamedTuple

from lengen.pe.config.base import EncodingContext


class DualChunkParams(NamedTuple):
    """s (``pe.dca_chunk_size``) and w (``pe.dca_local_window``), defaults resolved; chunks hold
    C = s − w tokens (the reference's ``chunk_len``)."""

    chunk_size: int
    local_window: int

    @property
    def chunk_len(self) -> int:
        return self.chunk_size - self.local_window


def check_dual_chunk(cfg, context: EncodingContext) -> DualChunkParams:
    """null keys take the reference's defaults from the training length L (HKUNLP/ChunkLlama,
    ``chunkllama_attn_replace.py``, ``replace_with_chunkllama``): s = 3L // 4, w = L // 16
    (at least 1 here, where L is small); C = s − w must be >= 1."""
    train = context.train_positions
    if (cfg.dca_chunk_size is None or cfg.dca_local_window is None) and train is None:
        raise ValueError(
            "pe.dca_chunk_size and pe.dca_local_window must be set for pe.extension=dual_chunk "
            "here: the training length, their default's source, is unknown"
        )
    chunk_size = cfg.dca_chunk_size if cfg.dca_chunk_size is not None else 3 * train // 4
    local = cfg.dca_local_window if cfg.dca_local_window is not None else max(1, train // 16)
    if not chunk_size > local:
        raise ValueError(
            f"pe.dca_chunk_size must be > pe.dca_local_window (chunks hold their difference of "
            f"tokens), got {chunk_size} and {local}"
        )
    return DualChunkParams(chunk_size, local)
