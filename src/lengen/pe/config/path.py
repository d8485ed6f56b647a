"""PaTH's configs (``lengen.pe.path``: PaTH and PaTH-FoX), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import EncodingConfig
from lengen.schema import flag, integer, option


@dataclasses.dataclass(frozen=True)
class PaTHConfig(EncodingConfig):
    computes_attention: ClassVar[bool] = True
    causal_only: ClassVar[bool] = True
    #: rank of the low-rank projection to the Householder vectors (the reference's 32)
    w_rank: int = option(32, integer())
    #: a causal depthwise convolution (width 3, SiLU) over the vectors before their L2 norm
    short_conv: bool = option(True, flag())
    #: PaTH-FoX: FoX's data-dependent forget gates on top of the transforms
    forget_gate: bool = option(False, flag())


@dataclasses.dataclass(frozen=True)
class PaTHFoXConfig(PaTHConfig):
    #: path_fox.yaml: PaTH with the forget gates on by default
    forget_gate: bool = option(True, flag())
