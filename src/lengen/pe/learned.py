"""Learned absolute position embeddings (Gehring et al., 2017; GPT, BERT).

A learned table cannot represent positions past the rows it trained. What happens there is an
explicit, recorded policy (``pe.policy``):

* ``extend`` (default): the table is sized to the longest position evaluation needs; rows past
  the training positions keep their random initialisation. This measures what such a model
  actually does when fed longer inputs. Only the rows training can reach are parameters
  (``table``); the rows past them are a buffer (``extension``, not in checkpoints), so the
  trained part never depends on evaluation settings: a run resumed or re-evaluated at other
  lengths finds the same parameters and optimiser state.
* ``error``: the table holds the training positions only and any longer evaluation is refused
  before training starts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding

POLICIES = ("extend", "error")


class Learned(PositionalEncoding):
    """A trainable (positions × d_model) table added to the token embeddings.

    Args:
        policy: ``extend`` or ``error`` (see module docstring).
        table_size: rows of the table; null derives it from the policy.
        init_std: std of the initial rows before the √d_model scale the model also applies to
            token embeddings, so positions and tokens start at the same magnitude.
    """

    def __init__(
        self,
        *,
        policy: str = "extend",
        table_size: int | None = None,
        init_std: float | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if policy not in POLICIES:
            raise ValueError(f"pe.policy must be one of {', '.join(POLICIES)}; got {policy!r}")
        trained = self.train_positions
        needed = max(p for p in (self.train_positions, self.position_range, 1) if p is not None)
        explicit = table_size
        if table_size is None:
            table_size = needed if policy == "extend" else (trained or needed)
        if table_size < 1:
            raise ValueError(f"pe.table_size must be a positive integer, got {table_size}")
        if policy == "error" and needed > table_size:
            raise ValueError(
                f"pe.policy=error: evaluation needs {needed} positions but the learned table "
                f"holds {table_size}; allowed: pe.policy=extend (untrained rows past training) "
                f"or eval lengths within the table"
            )
        self.policy = policy
        # drawn as one table, as before the split, so the random stream (and every later
        # initialisation) is what it was: the same seed gives the same model
        full = nn.Embedding(table_size, self.d_model)
        nn.init.normal_(full.weight, std=init_std or self.d_model**-0.5)
        # rows training reaches: all of [0, max_position) under randomized positions
        reachable = self.max_position if self.randomized else trained
        derived = policy == "extend" and explicit is None and reachable is not None
        kept = min(table_size, reachable) if derived else table_size
        self.table = nn.Embedding(kept, self.d_model, _weight=full.weight.detach()[:kept].clone())
        self.register_buffer("extension", full.weight.detach()[kept:].clone(), persistent=False)
        self.scale = math.sqrt(self.d_model)

    @property
    def rows(self) -> int:
        return self.table.num_embeddings + self.extension.shape[0]

    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        # x: (B, T, D); positions: (T,) or (B, T)
        if int(positions.max()) >= self.rows:
            raise ValueError(
                f"pe=learned: position {int(positions.max())} is past the table "
                f"({self.rows} rows); allowed: pe.policy=extend or shorter lengths"
            )
        table = self.table.weight
        if len(self.extension):  # (rows, D): trained rows, then the untrained ones
            table = torch.cat([table, self.extension])
        return x + self.scale * F.embedding(positions, table).to(x.dtype)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints of runs from before the split hold one table of every row: its first
        # rows are the parameters, the rest fill the untrained extension. A checkpoint shorter
        # than this run needs fills the start (eval.py at longer lengths); the other rows keep
        # their initialisation, as the untrained rows of policy=extend do.
        key = prefix + "table.weight"
        saved = state_dict.get(key)
        kept = self.table.num_embeddings
        if saved is not None and saved.shape[0] > kept:
            extra = saved[kept : kept + len(self.extension)]
            self.extension[: len(extra)] = extra.to(self.extension)
            state_dict[key] = saved[:kept]
        elif saved is not None and saved.shape[0] < kept:
            merged = self.table.weight.detach().clone()
            merged[: saved.shape[0]] = saved
            state_dict[key] = merged
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def describe(self) -> dict:
        return {
            "policy": self.policy,
            "table_size": self.rows,
            "trained_rows": self.table.num_embeddings,
            "trained_positions": self.train_positions,
        }


__all__ = ["Learned", "POLICIES"]
