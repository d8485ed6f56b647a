"""State for incremental (cached) decoding: keys and values of the tokens fed so far.

**What cached decoding computes.** A decoded sequence of N tokens (a task's prompt plus its
answer, whose length the task fixes) is scored as one full forward pass over all N tokens would
score it: the positions are the task's own when it supplies them (the batch's
``inputs["positions"]``), else ``pe.positions(N)`` (a fixed random subset under
``pe.randomized``), and everything an encoding derives from the whole pass uses all N
positions: dynamic-NTK RoPE's ℓ = largest position + 1, xPos's centre. The log-length
temperature is per query in causal attention (``pe.query_scale``: query t sees t + 1 keys,
cached ones included), so it needs no view of N. Causal attention makes the logits at position t
independent of the tokens after t, so feeding the tokens a few at a time, with the keys and values of the earlier
ones kept here, gives exactly the logits of that full pass (tested for every encoding). Teacher
forcing scores the same function, so at every length greedy decoding and teacher forcing see the
same positions and the same scales.

**Rotations.** A key rotated with only the step's positions in view is not always the key of
the full pass: xPos centres its scales on the pass's key positions, and dynamic NTK picks its
frequencies from the largest one. At the start of a sequence the cache asks the encoding
(``rotation_is_local``): if a probe key rotated alone comes out as it does among all N positions,
keys are rotated once, as they arrive, and stored rotated (RoPE and its static scalings). If not,
keys are stored unrotated and the whole buffer is rotated again at every step with all N
positions in view (exact for any encoding; linear work per step, like the attention itself,
measured ≈ 2.5× slower than storing rotated keys).
"""

from __future__ import annotations

import collections

import torch
from torch import Tensor

from lengen.model.canon import CanonState
from lengen.pe.base import PositionalEncoding


def rotates(pe: PositionalEncoding) -> bool:
    """Whether the encoding overrides the rotation hook (RoPE, xPos)."""
    return type(pe).rotate is not PositionalEncoding.rotate


def rotation_is_local(pe: PositionalEncoding, positions: Tensor) -> bool:
    """Whether ``pe`` rotates queries and keys at some of the positions (N,) exactly as it does
    with all of them in view, probed on the first, the last and a middle run of positions."""
    if not rotates(pe):
        return True
    generator = torch.Generator().manual_seed(0)
    probe = torch.randn(1, 1, len(positions), pe.head_dim, generator=generator)
    probe = probe.to(positions.device)  # (1, 1, N, hd), as queries and as keys
    q_full, k_full = pe.rotate(probe, probe, positions, positions)
    length = len(positions)
    for part in (slice(0, 1), slice(length - 1, length), slice(length // 4, length // 2 + 1)):
        q_part, k_part = pe.rotate(
            probe[:, :, part], probe[:, :, part], positions[part], positions[part]
        )
        if not (
            torch.equal(q_part, q_full[:, :, part]) and torch.equal(k_part, k_full[:, :, part])
        ):
            return False
    return True


class KVCache:
    """Keys and values of one self-attention layer, in buffers sized for the whole sequence.

    Beside them, the keys' per-token state (``pe.token_state``: FoX's log forget gates, PaTH's
    Householder vectors and strengths) when the encoding has one: tensors with the token axis
    at dim 2, (B, H, T) or (B, H, T, hd), in buffers of N tokens filled from the left alike.
    The encoding's ``attention`` then gets every key's state, as in the full pass.

    Args:
        positions: (N,) positions of the whole sequence; keys fill them from the left.
        store_rotated: keys are stored rotated (a local rotation) rather than as projected.
    """

    def __init__(self, positions: Tensor, store_rotated: bool = True) -> None:
        self.positions = positions
        self.store_rotated = store_rotated
        self.keys: Tensor | None = None  # (B, H, N, hd)
        self.values: Tensor | None = None  # (B, H, N, hd)
        self.length = 0  # keys stored so far
        #: the keys' states, one buffer per tensor of ``token_state`` (None: the encoding has none)
        self.states: tuple[Tensor, ...] | None = None
        self.state_is_tensor = True  # token_state gave one tensor, not a tuple
        #: Canon B's last inputs (model.canon; lengen.model.canon)
        self.canon = CanonState()

    def append(
        self, keys: Tensor, values: Tensor, state: Tensor | tuple[Tensor, ...] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Store keys, values (B, H, T, hd) and the tokens' state -> all keys and values
        stored so far, (B, H, length, hd) each (``key_state()``: all states)."""
        start, stop = self.length, self.length + keys.shape[2]
        if stop > len(self.positions):
            raise ValueError(
                f"cached decoding: {stop} tokens fed to a cache sized for {len(self.positions)}"
            )
        if self.keys is None:
            shape = (*keys.shape[:2], len(self.positions))  # (B, H, N)
            # keys may be wider than values (PoPE's rotated keys: 2·hd), so each has its own
            self.keys = keys.new_zeros(*shape, keys.shape[3])  # (B, H, N, hd_k)
            self.values = values.new_zeros(*shape, values.shape[3])  # (B, H, N, hd)
        self.keys[:, :, start:stop] = keys
        self.values[:, :, start:stop] = values
        if state is not None:
            self._append_state(state, start, stop)
        self.length = stop
        return self.keys[:, :, :stop], self.values[:, :, :stop]

    def _append_state(self, state: Tensor | tuple[Tensor, ...], start: int, stop: int) -> None:
        parts = (state,) if isinstance(state, Tensor) else tuple(state)
        if self.states is None:
            self.state_is_tensor = isinstance(state, Tensor)
            total = len(self.positions)
            self.states = tuple(
                part.new_zeros(*part.shape[:2], total, *part.shape[3:]) for part in parts
            )  # (B, H, N, …) each
        for buffer, part in zip(self.states, parts, strict=True):
            buffer[:, :, start:stop] = part

    def key_state(self) -> Tensor | tuple[Tensor, ...] | None:
        """The state of every key stored so far, shaped as ``token_state`` gives it (None when
        the encoding has none)."""
        if self.states is None:
            return None
        parts = tuple(buffer[:, :, : self.length] for buffer in self.states)
        return parts[0] if self.state_is_tensor else parts


class MemoryCache:
    """Cross-attention keys and values of the encoder's output, computed at the first step."""

    def __init__(self) -> None:
        self.keys: Tensor | None = None  # (B, H, S, hd)
        self.values: Tensor | None = None


class LayerCache:
    """What one block keeps: its self-attention cache and, in a decoder, its memory cache."""

    def __init__(self, positions: Tensor, store_rotated: bool) -> None:
        self.self_attention = KVCache(positions, store_rotated)
        self.cross_attention = MemoryCache()
        #: Canon A, C, D's last inputs, per point (model.canon; lengen.model.canon)
        self.canon: dict[str, CanonState] = collections.defaultdict(CanonState)


class DecodingCache:
    """The state of one causal stack while it decodes a sequence of ``total_length`` tokens.

    Args:
        pe: the stack's encoding (in eval mode, for evaluation positions).
        n_layers: blocks in the stack.
        total_length: N, the length of the whole sequence (prompt and answer).
        memory: (B, S, D) encoder output for a decoder with cross-attention, else None.
        positions: (N,) the task's positions of the whole sequence (position coupling, Abacus:
            known from the layout before generation), used as given (evaluation adds no start
            offset); None: ``pe.positions(N)``.
    """

    def __init__(
        self,
        pe: PositionalEncoding,
        n_layers: int,
        total_length: int,
        device: torch.device | None = None,
        memory: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> None:
        if positions is None:
            positions = pe.positions(total_length, device)  # (N,), decided once for all steps
        elif len(positions) != total_length:
            raise ValueError(
                f"cached decoding: {len(positions)} positions given for {total_length} tokens"
            )
        self.positions = positions if device is None else positions.to(device)  # (N,)
        #: what attention reads (keys fill them): the same but for Abacus (token indices)
        self.attention_positions = pe.attention_positions(self.positions)  # (N,)
        self.pe = pe
        # per layer: a schedule (lengen.pe.schedule) may rotate differently in each
        self.layers = [
            LayerCache(
                self.attention_positions,
                rotation_is_local(pe.for_layer(index), self.attention_positions),
            )
            for index in range(n_layers)
        ]
        self.memory = memory
        self.length = 0  # tokens fed so far

    @property
    def total_length(self) -> int:
        return len(self.positions)

    def next_positions(self, count: int, attention: bool = False) -> Tensor:
        """Positions of the next ``count`` tokens -> (count,): those the embedding reads, or
        with ``attention`` those the attention hooks read (``pe.attention_positions``)."""
        stop = self.length + count
        if stop > self.total_length:
            raise ValueError(
                f"cached decoding: {stop} tokens fed to a cache sized for {self.total_length}"
            )
        positions = self.attention_positions if attention else self.positions
        return positions[self.length : stop]
