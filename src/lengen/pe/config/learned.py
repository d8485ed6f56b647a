"""The learned absolute table's config (``lengen.pe.learned``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig, EncodingContext, axis_share
from lengen.schema import integer, number, one_of, option

#: ``pe.policy`` of the learned table
POLICIES = ("extend", "error", "interpolate")
#: ``pe.table`` on grids: one table per axis, or one row per cell
TABLES = ("axial", "full")


@dataclasses.dataclass(frozen=True)
class LearnedConfig(EncodingConfig):
    supports_axes: ClassVar[bool] = True
    embeds: ClassVar[bool] = True
    policy: str = option("extend", one_of(*POLICIES))
    #: rows of the table (per axis on grids); null: derived from the policy and the lengths
    table_size: int | None = option(None, integer(nullable=True))
    #: the table's initial standard deviation; null: d_model^-1/2
    init_std: float | None = option(None, number(above=0, nullable=True))
    table: str = option("axial", one_of(*TABLES))

    def check_own(self, context: EncodingContext) -> int:
        """-> the rows of the table (per axis, or the side of a full grid, on A axes)."""
        if self.policy == "interpolate" and self.randomized:
            raise ValueError(
                "pe.policy=interpolate resizes the trained table past training; with "
                "pe.randomized=true the table already covers pe.max_position; allowed: extend, "
                "error"
            )
        trained = context.train_positions
        if context.axes > 1:
            needed = max(p for p in (trained, context.max_positions, 1) if p is not None)
            rows = self.table_rows(trained, needed, "positions per axis")
            if self.table == "axial":
                axis_share(context.d_model, context.axes, "pe=learned: model.d_model")
            return rows
        needed = max(p for p in (trained, self.position_range(context), 1) if p is not None)
        return self.table_rows(trained, needed, "positions")

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # the table (trained rows and the untrained extension beside them): rows × d_model, per
        # axis on grids (axial: A tables of d_model / A columns), or one row per cell (full)
        trained = context.train_positions or 0
        rows = self.table_size or max(trained, self.position_range(context) or 0, 1)
        cells = rows**context.axes if context.axes > 1 and self.table == "full" else rows
        return {self.table_rows_key(): cells * context.d_model}

    def table_rows(self, trained: int | None, needed: int, unit: str) -> int:
        """``pe.table_size``, or derived from the policy (``extend``: every position
        evaluation needs; otherwise the trained ones); ``pe.policy=error`` refuses evaluation
        that needs more rows than the table holds."""
        table_size = self.table_size
        if table_size is None:
            table_size = needed if self.policy == "extend" else (trained or needed)
        # a table given too small fails at the first step past it (M05: a traceback at step 1
        # after the run folder was written): training needs its positions under every policy,
        # and extend evaluates on the table's own rows
        least = needed if self.policy == "extend" else (trained or 0)
        if self.table_size is not None and self.table_size < least:
            what = "evaluation" if self.policy == "extend" and least != trained else "training"
            raise ValueError(
                f"pe.table_size={self.table_size}: {what} needs {least} {unit} but the table "
                f"holds {self.table_size}; allowed: pe.table_size >= {least}, or null (sized "
                f"from the run)"
            )
        if self.policy == "error" and needed > table_size:
            raise ValueError(
                f"pe.policy=error: evaluation needs {needed} {unit} but the learned table "
                f"holds {table_size}; allowed: pe.policy=extend (untrained rows past training) "
                f"or interpolate, or evaluation within the table"
            )
        return table_size
