"""The allowed values of the encodings' options and the small checks their functional API
shares with their configs (``lengen.pe.options``), without torch. The messages come from the
rules of ``lengen.schema``, so a function argument and a yaml key are refused alike.
"""

from __future__ import annotations

from lengen.schema import number, one_of

#: ``pe.randomized_relative``: how randomized positions reach a bias of distances
RANDOMIZED_RELATIVE = ("distances", "positions")
ROPE_LAYOUTS = ("interleaved", "half")
SINUSOIDAL_LAYOUTS = ("interleaved", "concatenated")
SCALINGS = ("none", "pi", "ntk", "dynamic_ntk", "yarn")
#: ``pe.yarn_ramp``: the authors' code and Hugging Face (dimension), or the paper (rotations)
YARN_RAMPS = ("dimension", "rotations")
#: scalings that need the original (training) context length
NEEDS_ORIGINAL_LENGTH = ("dynamic_ntk", "yarn")
#: ``pe.policy`` of the learned table
POLICIES = ("extend", "error", "interpolate")
#: ``pe.table`` on grids: one table per axis, or one row per cell
TABLES = ("axial", "full")
#: ``pe.bidirectional`` of ALiBi in a non-causal stack
BIDIRECTIONAL = ("symmetric", "asymmetric_offset", "separate")
#: ``pe.grid_distance``: how far apart two cells of a grid are
GRID_DISTANCES = ("euclidean", "manhattan")
#: ``pe.variant`` of KERPLE
KERPLE_VARIANTS = ("log", "power")
#: T5's max_distance and the training length it was chosen for (Raffel et al.: 512 tokens)
T5_PAPER_MAX_DISTANCE, T5_PAPER_TRAIN_LENGTH = 128, 512


#: ``pe.fraction`` and ``pe.p`` (rules of lengen.schema), shared with the functional API
FRACTION = number(above=0, at_most=1, message="must be a number in (0, 1], got {value!r}")
PROPORTION = number(at_least=0, at_most=1, message="must be a number in [0, 1], got {value!r}")


# -- small checks shared by the encodings and their functional API -----------------------------
def check_rope_layout(layout: str) -> None:
    one_of(*ROPE_LAYOUTS)("pe.layout", layout)


def check_sinusoidal_layout(layout: str) -> None:
    one_of(*SINUSOIDAL_LAYOUTS)("pe.layout", layout)


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


def axis_share(dim: int, axes: int, key: str) -> int:
    """The channels (or rotated dimensions) each axis gets: dim / A, which must be even."""
    if dim % (2 * axes):
        raise ValueError(
            f"{key} = {dim} must be divisible by 2 × {axes} (an even share per axis) for "
            f"positions on {axes} axes; allowed: a multiple of {2 * axes} (e.g. model.d_model="
            f"{24 * axes} or {48 * axes} with model.n_heads=4)"
        )
    return dim // axes
