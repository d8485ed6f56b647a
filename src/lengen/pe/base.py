"""The positional-encoding interface every encoding implements.

Three families of positional schemes, one hook each (the x-transformers taxonomy):

* ``embed(x, positions)``: added to the token embeddings (sinusoidal, learned);
* ``rotate(q, k, q_positions, k_positions)``: applied to queries and keys per head (RoPE);
* ``score_bias(heads, q_positions, k_positions)``: an additive attention-logit bias given
  per (head, query position, key position). Written elementwise on broadcastable tensors, it
  serves both to build a dense bias block (``attention_bias``) and, later, as a FlexAttention
  ``score_mod``.

Every hook defaults to a no-op, so NoPE is this base class itself. The model calls all three
hooks unconditionally; the attention layer asks ``has_bias`` to pick its kernel.

Positional math runs in fp32 whatever the model's precision: bf16 angles at long positions
would fake extrapolation failures.
"""

from __future__ import annotations

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
    """

    def __init__(
        self,
        *,
        d_model: int,
        n_heads: int,
        causal: bool = True,
        train_positions: int | None = None,
        max_positions: int | None = None,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(
                f"model.d_model must be divisible by model.n_heads, got {d_model} and {n_heads}"
            )
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.causal = causal
        self.train_positions = train_positions
        self.max_positions = max_positions

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

    # -- derived ---------------------------------------------------------------------------
    @property
    def has_bias(self) -> bool:
        return type(self).score_bias is not PositionalEncoding.score_bias

    @property
    def provides_positions(self) -> bool:
        """Whether any hook carries position information."""
        base = PositionalEncoding
        cls = type(self)
        return self.has_bias or cls.embed is not base.embed or cls.rotate is not base.rotate

    def attention_bias(self, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        """Dense bias block: q_positions (Tq,), k_positions (Tk,) -> (H, Tq, Tk), fp32."""
        heads = torch.arange(self.n_heads, device=q_positions.device)
        return self.score_bias(
            heads[:, None, None], q_positions[None, :, None], k_positions[None, None, :]
        )

    def describe(self) -> dict:
        """Extra facts for results.json (e.g. a table's policy); empty by default."""
        return {}
