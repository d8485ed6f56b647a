"""What a recurrent mixer shares: the block's call signature, and its decoding state.

A recurrent mixer stands where ``MultiHeadAttention`` stands in a block and is called the same
way, ``mixer(x, pe, positions, cache=…)``; it reads no positions (an encoding's rotation, bias
and token-state hooks belong to attention layers: docs/models.md), so ``pe`` and ``positions``
are ignored. While decoding, its layer's cache is a ``RecurrentState`` (``new_state``) instead
of keys and values: the state after the tokens fed so far, of a size independent of their
number.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from lengen.model.mixers.state import TrainingState


class RecurrentState:
    """One recurrent layer's decoding state: None before the first token, then whatever its
    mixer carries (a (B, H, dk, dv) matrix memory, an LSTM's (h, c))."""

    def __init__(self) -> None:
        self.state: Any = None
        self.length = 0  # tokens fed so far


class RecurrentMixer(nn.Module):
    """Base of the mixers that carry a state left to right (causal stacks only)."""

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        state_init: str = "zero",
        state_noise_std: float | None = None,
        tbptt: int | None = None,
        **ignored,
    ) -> None:
        # ignored: the keywords every mixer is built with that a recurrent one does not use
        # (causal: always, by the config's check; kernel: model.attention, attention's only)
        super().__init__()
        self.d_model, self.n_heads = d_model, n_heads
        # Buitrago Ruiz & Gu 2025's training interventions on the state (off by default)
        self.interventions = TrainingState(state_init, state_noise_std, tbptt)

    def new_state(self) -> RecurrentState:
        return RecurrentState()

    def forward(self, x: Tensor, pe=None, positions=None, memory=None, cache=None) -> Tensor:
        # x: (B, T, D) -> (B, T, D); cache: this layer's RecurrentState while decoding
        if cache is None and self.training and self.interventions.active:
            return self.interventions.run(self, x)  # initial state, truncation (state.py)
        state = None if cache is None else cache.state
        y, state = self.mix(x, state, decoding=cache is not None)
        if cache is not None:
            cache.state, cache.length = state, cache.length + x.shape[1]
        return y

    def mix(self, x: Tensor, state, decoding: bool) -> tuple[Tensor, Any]:
        """(B, T, D) and the state before them -> (B, T, D) and the state after them."""
        raise NotImplementedError

    # what the state is, for the training interventions (lengen.model.mixers.state): its
    # tensors, each (B, H, …), the head on dim 1 (one "head" where the state has none)
    def memory_shapes(self, batch: int) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def memory_dtype(self, x: Tensor) -> torch.dtype:
        return x.dtype

    def memory_of(self, state) -> tuple[Tensor, ...]:
        raise NotImplementedError

    def with_memory(self, memory: tuple[Tensor, ...]):
        """The state ``mix`` starts from, holding ``memory`` (the rest at its zero start)."""
        raise NotImplementedError
