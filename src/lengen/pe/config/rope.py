"""RoPE's config (``lengen.pe.rope``, ``lengen.pe.rope_frequencies``), without torch: its
options, and the dimension rules its functional API shares with them."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

from lengen.pe.config.base import (
    BASE,
    EncodingConfig,
    EncodingContext,
    axis_share,
    require_even_head_dim,
)
from lengen.pe.config.extension import EXTENSIONS, check_extension
from lengen.schema import flag, integer, number, one_of, option

ROPE_LAYOUTS = ("interleaved", "half")
SCALINGS = ("none", "pi", "ntk", "dynamic_ntk", "yarn")
#: ``pe.yarn_ramp``: the authors' code and Hugging Face (dimension), or the paper (rotations)
YARN_RAMPS = ("dimension", "rotations")
#: scalings that need the original (training) context length
NEEDS_ORIGINAL_LENGTH = ("dynamic_ntk", "yarn")
#: ``pe.base: null`` on sequences (Su et al.) and on grids (rope-vit ``rope_theta`` of its
#: axial models)
DEFAULT_BASE, DEFAULT_GRID_BASE = BASE, 100.0

#: ``pe.fraction`` and ``pe.p`` (rules of lengen.schema), shared with the functional API
FRACTION = number(above=0, at_most=1, message="must be a number in (0, 1], got {value!r}")
PROPORTION = number(at_least=0, at_most=1, message="must be a number in [0, 1], got {value!r}")


# -- small checks shared by the encoding and its functional API --------------------------------
def check_rope_layout(layout: str) -> None:
    one_of(*ROPE_LAYOUTS)("pe.layout", layout)


def check_yarn_ramp(ramp: str) -> None:
    one_of(*YARN_RAMPS)("pe.yarn_ramp", ramp)


def check_scaling(scaling: str, factor: float) -> None:
    one_of(*SCALINGS)("pe.scaling", scaling)
    number(at_least=1)("pe.scaling_factor", factor)


def rotary_dimension(head_dim: int, fraction: float = 1.0) -> int:
    """Dimensions rotated under partial rotary: int(fraction · head_dim) rounded down to an even
    number, at least 2 (GPT-NeoX ``rotary_ndims = int(head_dim * rotary_pct)``)."""
    FRACTION("pe.fraction", fraction)
    return max(2, int(fraction * head_dim) // 2 * 2)


def p_rope_pairs(dim: int, p: float = 1.0) -> int:
    """Pairs p-RoPE keeps rotating out of dim/2: int(p · dim // 2), Barbero et al.'s
    ``rope_angles``; the others (the lowest frequencies) get θ = 0."""
    PROPORTION("pe.p", p)
    return int(p * dim // 2)


class RopeSizes(NamedTuple):
    """What RoPE derives from its checked options."""

    rotary_dim: int  # r: the rotated dimensions of a head
    axis_dim: int  # r / A: the rotated dimensions of one axis
    rotated_pairs: int  # pairs p-RoPE keeps rotating, all axes
    original_max_position: int | None  # L, the default resolved
    extension: tuple | None = None  # pe.extension's parameters (its arm's NamedTuple), or None


@dataclasses.dataclass(frozen=True)
class RoPEConfig(EncodingConfig):
    supports_axes: ClassVar[bool] = True
    #: null: 10,000 on sequences (Su et al.), 100 on grids (rope-vit's axial theta)
    base: float | None = option(
        None, number(above=1, nullable=True, message="must be > 1, got {value}")
    )
    layout: str = option("interleaved", one_of(*ROPE_LAYOUTS))
    fraction: float = option(1.0, FRACTION)
    p: float = option(1.0, PROPORTION)
    scaling: str = option("none", one_of(*SCALINGS))
    scaling_factor: float = option(1.0, number(at_least=1))
    original_max_position: int | None = option(None, integer(nullable=True))
    yarn_alpha: float = option(1.0, number(at_least=0))
    yarn_beta: float = option(32.0, number(at_least=0))
    yarn_ramp: str = option("dimension", one_of(*YARN_RAMPS))
    yarn_truncate: bool = option(True, flag())
    #: training-free arms that re-map the relative positions attention reads (RoPE then
    #: computes attention itself): lengen.pe.config.extension, one module per arm
    extension: str = option("none", one_of(*EXTENSIONS))
    self_extend_group: int | None = option(None, integer(nullable=True))
    self_extend_window: int | None = option(None, integer(nullable=True))
    rerope_window: int | None = option(None, integer(nullable=True))
    rerope_leak: float | None = option(None, number(at_least=1, nullable=True))
    dca_chunk_size: int | None = option(None, integer(nullable=True))
    dca_local_window: int | None = option(None, integer(nullable=True))

    def attends_itself(self) -> str | None:
        if self.extension == "none":
            return None
        return f"computes attention itself under pe.extension={self.extension}"

    def check_own(self, context: EncodingContext) -> RopeSizes:
        require_even_head_dim(context, "rope")
        rotary_dim = rotary_dimension(context.head_dim, self.fraction)
        axis_dim = axis_share(
            rotary_dim,
            context.axes,
            "pe=rope: the rotated head dimension (model.d_model / model.n_heads × pe.fraction)",
        )
        rotated_pairs = p_rope_pairs(axis_dim, self.p) * context.axes
        if not self.yarn_beta > self.yarn_alpha:
            raise ValueError(
                f"pe.yarn_beta must be > pe.yarn_alpha, got {self.yarn_beta} and {self.yarn_alpha}"
            )
        if self.scaling == "yarn" and self.yarn_ramp == "dimension" and not self.yarn_alpha > 0:
            raise ValueError(
                f"pe.yarn_alpha must be > 0 with pe.yarn_ramp=dimension (the pair index where a "
                f"pair makes 0 rotations is infinite), got {self.yarn_alpha}"
            )
        original = self.original_max_position
        if original is None:
            # the positions training saw: 0 … train_positions − 1, or under randomized
            # positions the whole range they are drawn from
            original = self.max_position if self.randomized else context.train_positions
        if self.scaling in NEEDS_ORIGINAL_LENGTH and original is None:
            raise ValueError(
                f"pe.original_max_position must be set for pe.scaling={self.scaling}: the "
                f"training length is unknown here"
            )
        extension = check_extension(self, context)
        return RopeSizes(rotary_dim, axis_dim, rotated_pairs, original, extension)
