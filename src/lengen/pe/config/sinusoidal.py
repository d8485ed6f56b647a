"""The sinusoidal encoding's config (``lengen.pe.sinusoidal``), without torch."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from lengen.pe.config.base import BASE, EncodingConfig, EncodingContext, axis_share
from lengen.schema import number, one_of, option

SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated")


def check_sinusoidal_layout(layout: str) -> None:
    one_of(*SINUSOIDAL_LAYOUTS)("pe.layout", layout)


@dataclasses.dataclass(frozen=True)
class SinusoidalConfig(EncodingConfig):
    supports_axes: ClassVar[bool] = True
    embeds: ClassVar[bool] = True
    base: float = option(BASE, number(above=1, message="must be > 1, got {value}"))
    layout: str = option("interleaved", one_of(*SINUSOIDAL_LAYOUTS))

    def check_own(self, context: EncodingContext) -> None:
        if context.d_model % 2:
            raise ValueError(f"pe=sinusoidal needs an even model.d_model, got {context.d_model}")
        if context.axes > 1:
            axis_share(context.d_model, context.axes, "pe=sinusoidal: model.d_model")
