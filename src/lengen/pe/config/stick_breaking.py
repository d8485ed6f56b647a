"""Stick-breaking attention's config (``lengen.pe.stick_breaking``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig
from lengen.schema import flag, one_of, option

#: what stick-breaking attention does with the weight its sticks leave over, 1 − Σ_j A_ij
STICK_REMAINDERS = ("current_value", "none")


@dataclasses.dataclass(frozen=True)
class StickBreakingConfig(EncodingConfig):
    attention_copies: ClassVar[int] = 12  # log-sigmoids, their cumulative sums (measured 10)
    computes_attention: ClassVar[bool] = True
    causal_only: ClassVar[bool] = True
    #: ``current_value``: the leftover weight goes to the query's own value (the reference's
    #: tests/test_attn.py); ``none``: dropped (the bare formula, weights summing to < 1)
    remainder: str = option("current_value", one_of(*STICK_REMAINDERS))
    #: the query's own key breaks the stick first (the reference's ``attend_current``)
    attend_current: bool = option(False, flag())
