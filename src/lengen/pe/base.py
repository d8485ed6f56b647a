"""The positional-encoding interface every encoding implements.

Three families of positional schemes, one hook each (the x-transformers taxonomy):

* ``embed(x, positions)``: added to the token embeddings (sinusoidal, learned);
* ``rotate(q, k, q_positions, k_positions)``: applied to queries and keys per head (RoPE);
* ``score_bias(heads, q_positions, k_positions)``: an additive attention-logit bias given
  per (head, query position, key position). Written elementwise on broadcastable tensors, it
  serves both to build a dense bias block (``attention_bias``) and, for biases of q − k only,
  the per-offset table (``relative_bias_table``) that the relative SDPA path and
  FlexAttention's ``score_mod`` read (``model.attention=flex``).

A fourth hook, ``contextual_logits(q, logits)``, serves encodings whose positions are computed
from the attention logits themselves (CoPE); the attention layer then computes its softmax
explicitly, one block of queries at a time.

Every hook defaults to a no-op, so NoPE is this base class itself. The model calls all three
hooks unconditionally; the attention layer asks ``has_bias`` to pick its kernel.

Two options every encoding takes, implemented here once:

* **Randomized positions** (Ruoss et al., 2023, "Randomized Positional Encodings Boost Length
  Generalization of Transformers"): with ``randomized=True`` a sequence of length T gets, instead
  of 0 … T−1, a sorted random subset of T distinct positions from [0, ``max_position``), drawn
  afresh for every training batch (shared by the batch's rows). ``randomized_eval`` (default
  true, as in the paper) applies it at evaluation too, with one fixed subset per length so that
  evaluation stays reproducible and paired; false evaluates on 0 … T−1.
* **Log-length attention temperature** (``log_length_scale=True``; Chiang & Cholak, 2022,
  "Overcoming a Theoretical Limitation of Self-Attention"): content logits q·k are multiplied by
  max(1, log n / log n_train) for a sequence of n keys, so attention does not flatten as
  sequences outgrow training. Encodings may refine ``attention_scale`` (YaRN does).

Positional math runs in fp32 whatever the model's precision: bf16 angles at long positions
would fake extrapolation failures.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class PositionalEncoding(nn.Module):
    """No positional information (NoPE); the base class of every encoding.

    Args:
        d_model: model width.
        n_heads: attention heads (``head_dim = d_model // n_heads``).
        causal: whether the attention this encoding serves is causal.
        train_positions: positions used in training (0 … train_positions − 1), if known.
        max_positions: the largest number of positions the model will ever see (training and
            evaluation), if known. Only table-based encodings need the last two.
        randomized: draw positions as a sorted random subset of [0, max_position).
        max_position: the range of randomized positions (must cover every sequence length).
        randomized_eval: also randomize at evaluation (fixed subset per length).
        log_length_scale: multiply q·k logits by max(1, log n / log train_positions).
    """

    #: Encodings defined for causal attention only set this; a bidirectional stack is refused.
    causal_only = False
    #: True when ``score_bias`` depends on q_position − k_position only (ALiBi, T5, KERPLE,
    #: Sandwich; not FIRE): attention then reads one bias per offset (``relative_bias_table``).
    bias_is_relative = False

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        causal: bool = True,
        train_positions: int | None = None,
        max_positions: int | None = None,
        randomized: bool = False,
        max_position: int | None = None,
        randomized_eval: bool = True,
        log_length_scale: bool = False,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(
                f"model.d_model must be divisible by model.n_heads, got {d_model} and {n_heads}"
            )
        if self.causal_only and not causal:
            raise ValueError(
                f"pe: {type(self).__name__} is defined for causal attention only; allowed: "
                f"model=decoder (a bidirectional stack was requested)"
            )
        for key, value in (
            ("pe.randomized", randomized),
            ("pe.randomized_eval", randomized_eval),
            ("pe.log_length_scale", log_length_scale),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"{key} must be true or false, got {value!r}")
        if randomized:
            needed = max_positions or train_positions or 1
            if (
                isinstance(max_position, bool)
                or not isinstance(max_position, int)
                or (max_position < needed)
            ):
                raise ValueError(
                    f"pe.max_position must be an integer >= {needed} (the longest sequence this "
                    f"run sees) when pe.randomized=true, got {max_position!r}"
                )
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.causal = causal
        self.train_positions = train_positions
        self.max_positions = max_positions
        self.randomized = randomized
        self.max_position = max_position
        self.randomized_eval = randomized_eval
        self.log_length_scale = log_length_scale

    def require_even_head_dim(self, name: str) -> None:
        """Rotations pair a head's dimensions: refuse an odd head dimension, naming the keys."""
        if self.head_dim % 2:
            raise ValueError(
                f"pe={name} needs an even head dimension; model.d_model / model.n_heads = "
                f"{self.d_model} / {self.n_heads} = {self.head_dim}"
            )

    # -- positions -------------------------------------------------------------------------
    @property
    def position_range(self) -> int | None:
        """How many distinct positions this encoding can be asked about."""
        return self.max_position if self.randomized else self.max_positions

    def positions(self, length: int, device: torch.device | None = None) -> Tensor:
        """The positions of a length-T sequence -> (T,) int64: 0 … T−1 or a random subset."""
        if not self.randomized or not (self.training or self.randomized_eval):
            return torch.arange(length, device=device)
        if length > self.max_position:
            raise ValueError(
                f"pe.max_position={self.max_position} is shorter than a sequence of {length}"
            )
        # training: a fresh draw from the global (seeded) RNG; evaluation: fixed per length
        generator = None if self.training else torch.Generator().manual_seed(length)
        chosen = torch.randperm(self.max_position, generator=generator)[:length]
        return chosen.sort().values.to(device)

    def attention_scale(self, length: int) -> float:
        """Multiplier of the q·k logits for a sequence of ``length`` keys (1.0 by default)."""
        if not self.log_length_scale or not self.train_positions or length <= self.train_positions:
            return 1.0
        return math.log(length) / math.log(max(self.train_positions, 2))

    # -- hooks -----------------------------------------------------------------------------
    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        """x: (B, T, D), positions: (T,) or (B, T) -> (B, T, D)."""
        return x

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        """q: (B, H, Tq, hd), k: (B, H, Tk, hd); positions (Tq,), (Tk,) -> (q, k)."""
        return q, k

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Additive logit bias, elementwise over broadcastable integer tensors (fp32 out)."""
        raise NotImplementedError  # only called when has_bias is True

    def contextual_logits(self, q: Tensor, logits: Tensor) -> Tensor:
        """Logits added from the content itself (CoPE): q (B, H, c, hd), logits (B, H, c, Tk)
        scaled and masked (−inf where a key is hidden) -> (B, H, c, Tk), fp32."""
        raise NotImplementedError  # only called when has_contextual is True

    # -- derived ---------------------------------------------------------------------------
    @property
    def has_bias(self) -> bool:
        return type(self).score_bias is not PositionalEncoding.score_bias

    @property
    def has_contextual(self) -> bool:
        return type(self).contextual_logits is not PositionalEncoding.contextual_logits

    @property
    def provides_positions(self) -> bool:
        """Whether any hook carries position information."""
        base = PositionalEncoding
        cls = type(self)
        return (
            self.has_bias
            or self.has_contextual
            or cls.embed is not base.embed
            or cls.rotate is not base.rotate
        )

    def attention_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Dense bias block: q_positions (Tq,), k_positions (Tk,) -> (H, Tq, Tk), fp32."""
        heads = torch.arange(self.n_heads, device=q_positions.device)
        return self.score_bias(
            heads[:, None, None], q_positions[None, :, None], k_positions[None, None, :]
        )

    def relative_bias_table(self, offsets: Tensor) -> Tensor:
        """Bias per offset δ = q_position − k_position, for encodings with ``bias_is_relative``:
        offsets (L,) int64 -> (H, L), fp32. ``score_bias`` at query δ and key 0."""
        heads = torch.arange(self.n_heads, device=offsets.device)
        return self.score_bias(heads[:, None], offsets[None, :], torch.zeros_like(offsets)[None, :])

    def describe(self) -> dict:
        """Extra facts for results.json (e.g. a table's policy); empty by default."""
        return {}

    def describe_options(self) -> dict:
        """The shared options, when any is switched on (for results.json)."""
        options = {}
        if self.randomized:
            options.update(
                randomized=True,
                max_position=self.max_position,
                randomized_eval=self.randomized_eval,
            )
        if self.log_length_scale:
            options["log_length_scale"] = True
        return options
