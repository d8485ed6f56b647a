"""The LSTM mixer's config (``lengen.model.mixers.lstm``): no options (its width is
``model.d_model``)."""

from __future__ import annotations

import dataclasses

from lengen.model.mixers.config.base import MixerConfig


@dataclasses.dataclass(frozen=True)
class LSTMMixerConfig(MixerConfig):
    pass
