"""DeltaNet's config (``lengen.model.mixers.deltanet``)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.model.mixers.config.base import LinearMixerConfig
from lengen.model.mixers.config.state import RecurrentStateConfig
from lengen.schema import flag, option


@dataclasses.dataclass(frozen=True)
class DeltaNetConfig(LinearMixerConfig, RecurrentStateConfig):
    display_name: ClassVar[str] = "DeltaNet"
    display_flags: ClassVar[dict[str, str]] = {"negative_eigenvalues": "neg. eig."}
    #: Grazzi et al. 2025: β in (0, 2), so the state transition I − β k kᵀ has eigenvalues in
    #: (−1, 1) (parity and modular counting need negative ones); false: β in (0, 1)
    negative_eigenvalues: bool = option(False, flag())
    #: fla's DeltaNet and Gated DeltaNet layers: a short convolution of width 4
    conv_size: int = LinearMixerConfig.with_default("conv_size", 4)
