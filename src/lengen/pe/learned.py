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
* ``interpolate`` (the ViT practice: Dosovitskiy et al., 2021, §3.2 "Fine-tuning and higher
  resolution"; timm ``resample_abs_pos_embed``): the table holds the training positions; a pass
  that reaches past them resizes the trained table to the extent it needs with
  ``torch.nn.functional.interpolate`` (``align_corners=False`` as timm), so position p of a
  longer extent E reads the table at p · L / E. Modes: ``linear`` for a 1-D table (sequences,
  and each axis of an axial table: ``interpolate`` has no cubic mode in 1-D), ``bicubic`` for a
  full 2-D table (timm's default), ``trilinear`` for a full 3-D one (no tricubic mode). timm's
  ``antialias=True`` acts only when shrinking, which this policy never does: extents within
  training read the table as trained.

**Grids and volumes** (positions (T, A); ``pe.table``):

* ``axial`` (default): one table per axis with d/A columns, the cell's embedding the
  concatenation ``[table_0[p_0] | table_1[p_1] | …]`` (as ``sinusoidal_grid``); each table
  follows the policy along its axis (``table_size`` = rows per axis).
* ``full``: one row per cell of the grid (ViT's table), a grid of side ``table_size``; the
  policy acts on the grid (``extend``: cells past the trained side keep their initialisation).

A row of −1s (a readout slot) gets nothing added.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lengen.pe.base import PositionalEncoding
from lengen.pe.config.learned import POLICIES, TABLES, LearnedConfig
from lengen.pe.grid import axis_extents, check_grid_positions, has_position


def resize_table(table: Tensor, extents: list[int] | tuple[int, ...]) -> Tensor:
    """A trained table resized to new extents with ``F.interpolate`` (``align_corners=False``):
    table (*sizes, D) with 1, 2 or 3 leading axes -> (*extents, D), in the table's dtype.
    Modes: linear (1 axis), bicubic (2), trilinear (3) — the policy ``interpolate``."""
    axes = table.ndim - 1
    mode = {1: "linear", 2: "bicubic", 3: "trilinear"}[axes]
    if list(table.shape[:-1]) == list(extents):
        return table
    grid = table.float().movedim(-1, 0)[None]  # (1, D, *sizes)
    resized = F.interpolate(grid, size=tuple(extents), mode=mode, align_corners=False)
    return resized[0].movedim(0, -1).to(table.dtype)  # (*extents, D)


class Learned(PositionalEncoding):
    """A trainable (positions × d_model) table added to the token embeddings.

    Args:
        policy: ``extend``, ``error`` or ``interpolate`` (see module docstring).
        table_size: rows of the table; null derives it from the policy. On grids: rows per
            axis (``axial``) or the side of the grid (``full``).
        init_std: std of the initial rows before the √d_model scale the model also applies to
            token embeddings, so positions and tokens start at the same magnitude.
        table: on grids and volumes, ``axial`` (default) or ``full``; ignored on sequences.
    """

    Options = LearnedConfig

    def __init__(self, **keywords) -> None:
        super().__init__(**keywords)
        # the rows of the table (per axis on grids): pe.table_size or sized from the lengths
        rows = self.derived
        policy, init_std = self.cfg.policy, self.cfg.init_std
        self.scale = math.sqrt(self.d_model)
        if self.axes > 1:
            self._build_grid_tables(policy, rows, init_std)
            return
        # drawn as one table, as before the split, so the random stream (and every later
        # initialisation) is what it was: the same seed gives the same model
        full = nn.Embedding(rows, self.d_model)
        nn.init.normal_(full.weight, std=init_std or self.d_model**-0.5)
        # rows training reaches: all of [0, max_position) under randomized positions; task
        # positions shifted by up to pe.start_offset reach start_offset rows more
        reachable = self.cfg.max_position if self.cfg.randomized else self.train_positions
        if not self.cfg.randomized and reachable is not None:
            reachable += self.cfg.start_offset
        derived = policy == "extend" and self.cfg.table_size is None and reachable is not None
        kept = min(rows, reachable) if derived else rows
        self.table = nn.Embedding(kept, self.d_model, _weight=full.weight.detach()[:kept].clone())
        self.register_buffer("extension", full.weight.detach()[kept:].clone(), persistent=False)

    def _build_grid_tables(self, policy: str, table_size: int, init_std) -> None:
        """Tables for positions on A axes (``pe.table``) of ``table_size`` rows per axis (or
        side): per axis (``axial``, d/A columns) or per cell (``full``); trained rows are
        parameters, untrained ones a buffer, as in 1-D."""
        trained = self.train_positions
        kept = min(table_size, trained) if trained and policy == "extend" else table_size
        std = init_std or self.d_model**-0.5
        if self.cfg.table == "axial":
            width = self.d_model // self.axes  # an even share: LearnedConfig.check_own
            tables, extensions = [], []
            for _ in range(self.axes):
                rows = torch.randn(table_size, width) * std  # (rows, D/A), drawn whole
                tables.append(nn.Embedding(kept, width, _weight=rows[:kept].clone()))
                extensions.append(rows[kept:].clone())
            # ".table." in the parameter names: the optimiser's no-decay rule for tables
            self.table = nn.ModuleList(tables)
            self.register_buffer("extension", torch.stack(extensions), persistent=False)
            return
        grid = torch.randn(*(table_size,) * self.axes, self.d_model) * std  # (side, …, D)
        trained_cells = grid[(slice(0, kept),) * self.axes].reshape(-1, self.d_model)
        self.table = nn.Embedding(kept**self.axes, self.d_model, _weight=trained_cells.clone())
        # the whole grid; its trained corner is replaced by the parameters at every lookup
        self.register_buffer("extension", grid if kept < table_size else grid[:0], persistent=False)

    @property
    def rows(self) -> int:
        """Rows of the table (per axis, or the side of a full grid, on A axes)."""
        if self.axes == 1:
            return self.table.num_embeddings + self.extension.shape[0]
        if self.cfg.table == "axial":
            return self.trained_rows + self.extension.shape[1]
        return self.extension.shape[0] if len(self.extension) else self.trained_rows

    @property
    def trained_rows(self) -> int:
        """Rows that training reaches (per axis, or the trained side, on A axes)."""
        if self.axes == 1:
            return self.table.num_embeddings
        if self.cfg.table == "axial":
            return self.table[0].num_embeddings
        return round(self.table.num_embeddings ** (1 / self.axes))

    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        # x: (B, T, D); positions: (T,) or (B, T), or (T, A) on A axes
        if self.axes > 1:
            return x + self.scale * self._grid_embedding(positions).to(x.dtype)
        if self.cfg.policy == "interpolate" and int(positions.max()) >= self.rows:
            extent = int(positions.max()) + 1  # positions 0 … extent − 1 share the table
            table = resize_table(self.table.weight, [extent])  # (extent, D)
            return x + self.scale * F.embedding(positions, table).to(x.dtype)
        if int(positions.max()) >= self.rows:
            raise ValueError(
                f"pe=learned: position {int(positions.max())} is past the table "
                f"({self.rows} rows); allowed: pe.policy=extend or shorter lengths"
            )
        table = self.table.weight
        if len(self.extension):  # (rows, D): trained rows, then the untrained ones
            table = torch.cat([table, self.extension])
        return x + self.scale * F.embedding(positions, table).to(x.dtype)

    def _grid_table(self, extents: list[int]) -> Tensor:
        """The table covering ``extents`` cells per axis: (*extents, D) for ``full``; for
        ``axial`` a list of A tables (extent_a, D/A). Past the table: resized (``interpolate``)
        or refused."""
        rows = self.rows
        if self.cfg.policy != "interpolate" and max(extents) > rows:
            raise ValueError(
                f"pe=learned: grid coordinate {max(extents) - 1} is past the table ({rows} rows "
                f"per axis); allowed: pe.policy=extend or interpolate, or smaller grids"
            )
        side = self.trained_rows
        if self.cfg.table == "axial":
            tables = []
            for axis, (embedding, extension) in enumerate(
                zip(self.table, self.extension, strict=True)
            ):
                table = torch.cat([embedding.weight, extension])  # (rows, D/A)
                if self.cfg.policy == "interpolate" and extents[axis] > side:
                    table = resize_table(table, [extents[axis]])
                tables.append(table)
            return tables
        trained = self.table.weight.view(*(side,) * self.axes, self.d_model)  # (L, …, D)
        if len(self.extension):  # the whole grid, its trained corner from the parameters
            grid = self.extension.clone()
            grid[(slice(0, side),) * self.axes] = trained
            return grid
        if self.cfg.policy == "interpolate" and max(extents) > side:
            # square tables stay square: every axis resized to the largest extent needed
            return resize_table(trained, [max(max(extents), side)] * self.axes)
        return trained

    def _grid_embedding(self, positions: Tensor) -> Tensor:
        """The embedding of each cell, positions (..., T, A) -> (..., T, D), fp32-or-table dtype;
        zero for −1 rows."""
        check_grid_positions(positions, self.axes)
        present = has_position(positions)  # (..., T)
        coordinates = positions.clamp(min=0)  # −1 rows read cell 0, then get zeroed
        tables = self._grid_table(axis_extents(coordinates))
        if self.cfg.table == "axial":
            parts = [F.embedding(coordinates[..., a], t) for a, t in enumerate(tables)]
            embedding = torch.cat(parts, dim=-1)  # (..., T, D)
        else:
            embedding = tables[tuple(coordinates.unbind(-1))]  # (..., T, D)
        return embedding * present[..., None]

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # Checkpoints of runs from before the split hold one table of every row: its first
        # rows are the parameters, the rest fill the untrained extension. A checkpoint shorter
        # than this run needs fills the start (eval.py at longer lengths); the other rows keep
        # their initialisation, as the untrained rows of policy=extend do.
        key = prefix + "table.weight"
        saved = state_dict.get(key) if self.axes == 1 else None  # grid tables: fixed sizes
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
        info = {
            "policy": self.cfg.policy,
            "table_size": self.rows,
            "trained_rows": self.trained_rows,
            "trained_positions": self.train_positions,
        }
        if self.axes > 1:
            info.update(axes=self.axes, table=self.cfg.table)
        return info


__all__ = ["POLICIES", "TABLES", "Learned", "resize_table"]
