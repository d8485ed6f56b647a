"""State for incremental (cached) decoding: keys and values of the tokens fed so far.

**What cached decoding computes.** A decoded sequence of N tokens (a task's prompt plus its
answer, whose length the task fixes) is scored as one full forward pass over all N tokens would
score it: the positions are ``pe.positions(N)`` (a fixed random subset under
``pe.randomized``), and everything an encoding derives from the whole pass uses all N
positions: the log-length temperature ``attention_scale(N)``, dynamic-NTK RoPE's ℓ = largest
position + 1, xPos's centre. Causal attention makes the logits at position t independent of the
tokens after t, so feeding the tokens a few at a time, with the keys and values of the earlier
ones kept here, gives exactly the logits of that full pass (tested for every encoding). Teacher
forcing scores the same function, so at every length greedy decoding and teacher forcing see the
same positions and the same scales.

Keys are kept **before** the rotation hook: xPos centres its scales on the pass's key positions
and dynamic NTK picks its frequencies from them, so a key rotated in a shorter pass would not be
the key of the full pass. Encodings that rotate are therefore re-applied to the stored keys at
every step, with all N positions as the context (linear work per step, like the attention
itself); encodings that do not rotate use the stored keys as they are.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from lengen.pe.base import PositionalEncoding


def rotates(pe: PositionalEncoding) -> bool:
    """Whether the encoding overrides the rotation hook (RoPE, xPos)."""
    return type(pe).rotate is not PositionalEncoding.rotate


def scaled_for_length(pe: PositionalEncoding, total_length: int) -> PositionalEncoding:
    """A shallow view of ``pe`` whose ``attention_scale`` is that of ``total_length`` keys.

    The attention layer scales logits by ``pe.attention_scale(number of keys given)``; while
    decoding, fewer keys than the full pass's are given, and the full pass's factor is wanted.
    The view shares every parameter and buffer with ``pe``.
    """
    scale = pe.attention_scale(total_length)
    if all(pe.attention_scale(length) == scale for length in range(1, total_length)):
        return pe  # the same factor at every key count (the common case): no view needed
    view = copy.copy(pe)
    object.__setattr__(view, "attention_scale", lambda _length: scale)
    return view


class KVCache:
    """Keys and values of one self-attention layer, in buffers sized for the whole sequence.

    Args:
        positions: (N,) positions of the whole sequence; keys fill them from the left.
    """

    def __init__(self, positions: Tensor) -> None:
        self.positions = positions
        self.keys: Tensor | None = None  # (B, H, N, hd), not rotated
        self.values: Tensor | None = None  # (B, H, N, hd)
        self.length = 0  # keys stored so far

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Store keys, values (B, H, T, hd) -> all stored so far, (B, H, length, hd) each."""
        start, stop = self.length, self.length + keys.shape[2]
        if stop > len(self.positions):
            raise ValueError(
                f"cached decoding: {stop} tokens fed to a cache sized for {len(self.positions)}"
            )
        if self.keys is None:
            shape = (*keys.shape[:2], len(self.positions), keys.shape[3])  # (B, H, N, hd)
            self.keys = keys.new_zeros(shape)
            self.values = values.new_zeros(shape)
        self.keys[:, :, start:stop] = keys
        self.values[:, :, start:stop] = values
        self.length = stop
        return self.keys[:, :, :stop], self.values[:, :, :stop]


class MemoryCache:
    """Cross-attention keys and values of the encoder's output, computed at the first step."""

    def __init__(self) -> None:
        self.keys: Tensor | None = None  # (B, H, S, hd)
        self.values: Tensor | None = None


class LayerCache:
    """What one block keeps: its self-attention cache and, in a decoder, its memory cache."""

    def __init__(self, positions: Tensor) -> None:
        self.self_attention = KVCache(positions)
        self.cross_attention = MemoryCache()


class DecodingCache:
    """The state of one causal stack while it decodes a sequence of ``total_length`` tokens.

    Args:
        pe: the stack's encoding (in eval mode, for evaluation positions).
        n_layers: blocks in the stack.
        total_length: N, the length of the whole sequence (prompt and answer).
        memory: (B, S, D) encoder output for a decoder with cross-attention, else None.
    """

    def __init__(
        self,
        pe: PositionalEncoding,
        n_layers: int,
        total_length: int,
        device: torch.device | None = None,
        memory: Tensor | None = None,
    ) -> None:
        self.positions = pe.positions(total_length, device)  # (N,), decided once for all steps
        self.pe = scaled_for_length(pe, total_length)
        self.layers = [LayerCache(self.positions) for _ in range(n_layers)]
        self.memory = memory
        self.length = 0  # tokens fed so far

    @property
    def total_length(self) -> int:
        return len(self.positions)

    def next_positions(self, count: int) -> Tensor:
        """Positions of the next ``count`` tokens -> (count,)."""
        stop = self.length + count
        if stop > self.total_length:
            raise ValueError(
                f"cached decoding: {stop} tokens fed to a cache sized for {self.total_length}"
            )
        return self.positions[self.length : stop]
