"""Abacus's config (``lengen.pe.abacus``: a learned table at the task's digit offsets, a base
encoding in attention), without torch. The base is named as ``pe=`` names it and checked by its
own config."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import (
    EncodingConfig,
    EncodingContext,
    config_class,
    encoding_target,
    wrapped_keys,
    wrapped_options,
)
from lengen.schema import integer, number, one_of, option

#: ``pe.base``: the encodings Abacus's attention may use at token indices, each named as
#: ``pe=`` names it (its class is configs/pe/<name>.yaml's ``_target_``)
ABACUS_BASES = ("nope", "rope", "fire", "alibi", "t5", "kerple", "sandwich")

_base_options = wrapped_options("base", "mlp_width: 16")


@dataclasses.dataclass(frozen=True)
class AbacusConfig(EncodingConfig):
    embeds: ClassVar[bool] = True
    #: the encoding attention uses, at token indices (the paper pairs Abacus with NoPE or FIRE)
    base: str = option("nope", one_of(*ABACUS_BASES))
    #: the base encoding's own options; null: its defaults
    base_options: dict | None = option(None, _base_options)
    #: rows of the table; null: every position the run reaches (``position_range``)
    table_size: int | None = option(None, integer(nullable=True))
    #: the table's initial standard deviation; null: d_model^-1/2
    init_std: float | None = option(None, number(above=0, nullable=True))

    #: Abacus's options the base shares, so that its index positions are drawn as its own
    POSITION_KEYS: ClassVar[tuple[str, ...]] = ("randomized", "max_position", "randomized_eval")

    def base_keys(self) -> dict:
        """The base encoding's keywords: ``pe.base_options`` and ``POSITION_KEYS``."""
        return wrapped_keys(self, "base_options", EncodingConfig)

    def base_target(self) -> str:
        """The class of the base encoding: ``_target_`` of configs/pe/<pe.base>.yaml."""
        return encoding_target(self.base, "pe.base")

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # the table of digit positions, rows × d_model (the base encoding's are not counted)
        trained = context.train_positions or 0
        rows = self.table_size or max(trained, self.position_range(context) or 0, 1)
        return {self.table_rows_key(): rows * context.d_model}

    def check_own(self, context: EncodingContext) -> tuple[int, dict]:
        """-> (rows of the table, the base encoding's keywords, checked by its config class
        with keys named ``pe.base_options.<key>``)."""
        target = self.base_target()
        base = config_class(target)
        nested = type(base.__name__, (base,), {"prefix": "pe.base_options"})
        keys = self.base_keys()
        owner = target.rpartition(".")[2]
        nested.from_keys(keys, owner=owner).check(
            dataclasses.replace(context, task_positions=False), owner
        )
        needed = max(
            p for p in (context.train_positions, self.position_range(context), 1) if p is not None
        )
        rows = self.table_size if self.table_size is not None else needed
        if rows < needed:
            raise ValueError(
                f"pe.table_size={rows}: this run reaches position {needed - 1}; allowed: "
                f">= {needed}, or null"
            )
        return rows, keys
