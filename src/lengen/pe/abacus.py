"""Abacus embeddings (McLeish, Bansal, Stein, Jain, Kirchenbauer, Bartoldson, Kailkhura,
Bhatele, Geiping, Schwarzschild & Goldstein, 2024, "Transformers Can Do Arithmetic with the
Right Embeddings", NeurIPS 2024, arXiv 2405.17399; reference code ``mcleish7/arithmetic``,
``abacus.py``).

A learned table is read at each digit's offset inside its number and added to the token
embeddings; attention meanwhile keeps the token index through a **base** encoding
(``pe.base``: ``nope``, the default, or ``fire``, ``rope``, ``alibi``, ``t5``, ``kerple``,
``sandwich``). The paper adds the Abacus embedding on top of an encoding of the sequence
(its comparisons pair it with NoPE, FIRE and RoPE; "combining Abacus Embeddings with FIRE"
extrapolates furthest in its figures); the reference's ``Abacus`` module is exactly the table:
``torch.nn.Embedding(max_seq_length, embedding_dim)`` read at the positions below.

**Positions.** The digit offsets are the task's (``data.task.positions=abacus``,
``lengen.data.tasks.arithmetic.Addition``): 1 + the digit's significance, 0 for non-digits
(``Abacus.helper`` counts 1, 2, … along each run of digits, on numbers written least
significant first). Training shifts every offset >= 1 by one random k per batch
(``pe.start_offset``; the reference draws ``k = random.randint(0, max_k)`` per forward pass,
``max_k = 99``: ``pe.start_offset=99``); evaluation uses k = 0, as the reference
(``if self.training``). Without task positions the table is read at the token's index (or the
shared randomized draw), and Abacus is a learned absolute table over its base.

**Two position streams.** ``embed`` reads the task's positions; ``attention_positions`` gives
the base encoding's own, 0 … T−1 (or its randomized draw), which ``rotate`` and ``score_bias``
read, in full passes and in cached decoding alike (``lengen.model.cache``).

Our choices: the table's rows cover every position the run reaches (``pe.table_size``: null;
the reference's 1,024 rows when set); its rows start at std d^-1/2 and are scaled by √d_model
like lengen's learned table (``lengen.pe.learned``), so digits and positions start at one
magnitude; the shared options (windows, temperatures) act in Abacus's attention, and the
randomized-position keys are passed to the base, which draws its positions.
"""

from __future__ import annotations

import dataclasses
import importlib
import math

import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.abacus import AbacusConfig


class Abacus(PositionalEncoding):
    """A learned table at the task's digit offsets, plus a base encoding in attention.

    Args:
        base: the encoding attention uses at token indices (``nope``, ``fire``, ``rope``, …).
        base_options: that encoding's own options (null: its defaults).
        table_size: rows of the table (null: every position the run reaches).
        init_std: std of the initial rows (null: d_model^-1/2).
    """

    Options = AbacusConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        rows, base_keys = self.derived
        module, _, name = self.cfg.base_target().rpartition(".")
        base_class = getattr(importlib.import_module(module), name)
        context = dataclasses.replace(self.context, task_positions=False)  # it reads indices
        self.base_encoding = base_class(**dataclasses.asdict(context), **base_keys)
        self.scale = math.sqrt(self.d_model)
        self.table = nn.Embedding(rows, self.d_model)
        nn.init.normal_(self.table.weight, std=self.cfg.init_std or self.d_model**-0.5)
        # the per-offset table serves the base's bias only where Abacus masks by q − k too
        self.bias_is_relative = self.base_encoding.bias_is_relative and self.cfg.chunk is None

    # -- positions ---------------------------------------------------------------------------
    def attention_positions(self, positions: Tensor) -> Tensor:
        """The base encoding's positions of a (T,)-token pass: 0 … T−1 or its draw."""
        self.base_encoding.draw_seed = self.draw_seed
        return self.base_encoding.positions(len(positions), positions.device)

    # -- hooks -------------------------------------------------------------------------------
    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        # x: (B, T, D); positions: (T,) the digits' offsets (0: not a digit)
        largest = int(positions.max()) if positions.numel() else 0
        if largest >= self.table.num_embeddings:
            raise ValueError(
                f"pe=abacus: position {largest} is past the table "
                f"({self.table.num_embeddings} rows); allowed: a larger pe.table_size"
            )
        return x + self.scale * F.embedding(positions, self.table.weight).to(x.dtype)

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor, k_positions: Tensor
    ) -> tuple[Tensor, Tensor]:
        return self.base_encoding.rotate(q, k, q_positions, k_positions)

    def score_bias(self, heads: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor:
        return self.base_encoding.score_bias(heads, q_positions, k_positions)  # fp32

    @property
    def has_bias(self) -> bool:
        return self.base_encoding.has_bias

    def logit_temperature(self) -> float:
        return self.base_encoding.logit_temperature()

    def length_global(self) -> str | None:
        return self.base_encoding.length_global() or super().length_global()

    def describe(self) -> dict:
        return {
            "base": self.cfg.base,
            "base_encoding": self.base_encoding.describe(),
            "table_rows": self.table.num_embeddings,
        }
