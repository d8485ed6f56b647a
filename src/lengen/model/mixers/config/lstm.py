"""The LSTM mixer's config (``lengen.model.mixers.lstm``): only the state's training options
(``lengen.model.mixers.config.state``; its width is ``model.d_model``)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.model.mixers.config.state import RecurrentStateConfig


@dataclasses.dataclass(frozen=True)
class LSTMMixerConfig(RecurrentStateConfig):
    display_name: ClassVar[str] = "LSTM"
