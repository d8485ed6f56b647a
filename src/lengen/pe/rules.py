"""The groundwork of the encodings' checks (``lengen.pe.options``), without torch: the
allowed values of their keys, what a class declares about itself (``Facts``), what an encoding
is told of the run (``Run``), small checks shared with the functional API, and the options every
encoding takes (``check_shared``). Only the standard library and ``lengen.checks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from lengen.checks import check_heads, positive_int

#: ``pe.randomized_relative``: how randomized positions reach a bias of distances
RANDOMIZED_RELATIVE = ("distances", "positions")
#: ``pe=`` names with an N-d form (their class sets ``supports_axes``); tests check this list
#: against configs/pe
GRID_ENCODINGS = ("alibi", "learned", "nope", "rope", "rope_mixed", "sinusoidal")
#: keys of a pe yaml node that are lengen's, not arguments of the encoding (besides Hydra's
#: ``_target_``, ``_partial_``, …)
NODE_KEYS = ("name",)
#: the options every encoding takes (``PositionalEncoding``), as yaml keys
SHARED_KEYS = (
    "randomized",
    "max_position",
    "randomized_eval",
    "randomized_relative",
    "log_length_scale",
)

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


class Facts(NamedTuple):
    """What an encoding class declares about itself, as class attributes of the same names."""

    #: defined for causal attention only: a bidirectional stack is refused
    causal_only: bool = False
    #: has a form for positions on several axes (grids, volumes); the others refuse axes > 1
    supports_axes: bool = False
    #: its logit bias is a function of the query–key distance (randomized distances apply)
    bias_of_distance: bool = False

    @classmethod
    def of(cls, encoding: type) -> Facts:
        """The facts a class declares (a user's encoding sets its own attributes)."""
        return cls(encoding.causal_only, encoding.supports_axes, encoding.bias_of_distance)


@dataclass(frozen=True)
class Run:
    """What an encoding is told of the run (the keywords ``lengen.build`` and the model pass)
    and the shared options, as checked: ``randomized_relative`` resolved (``check_shared``)."""

    d_model: int
    n_heads: int
    causal: bool = True
    train_positions: int | None = None
    max_positions: int | None = None
    randomized: bool = False
    max_position: int | None = None
    randomized_eval: bool = True
    randomized_relative: str | None = None
    log_length_scale: bool = False
    axes: int = 1
    n_layers: int = 1

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def position_range(self) -> int | None:
        """How many distinct positions the encoding can be asked about."""
        return self.max_position if self.randomized else self.max_positions


# -- small checks shared by the encodings and their functional API -----------------------------
def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_number_or_null(key: str, value) -> float | None:
    """``value`` as a float if it is a number > 0, None if None; else a ValueError naming key."""
    if value is None:
        return None
    if not is_number(value) or not value > 0:
        raise ValueError(
            f"{key} must be a number > 0, or null for a default sized from the run's training "
            f"positions; got {value!r}"
        )
    return float(value)


def check_bool(key: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{key} must be true or false, got {value!r}")


def check_choice(key: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key} must be one of {', '.join(allowed)}; got {value!r}")


def check_rope_layout(layout: str) -> None:
    check_choice("pe.layout", layout, ROPE_LAYOUTS)


def check_sinusoidal_layout(layout: str) -> None:
    check_choice("pe.layout", layout, SINUSOIDAL_LAYOUTS)


def check_yarn_ramp(ramp: str) -> None:
    check_choice("pe.yarn_ramp", ramp, YARN_RAMPS)


def check_scaling(scaling: str, factor: float) -> None:
    check_choice("pe.scaling", scaling, SCALINGS)
    if not is_number(factor) or not factor >= 1:
        raise ValueError(f"pe.scaling_factor must be a number >= 1, got {factor!r}")


def rotary_dimension(head_dim: int, fraction: float = 1.0) -> int:
    """Dimensions rotated under partial rotary: int(fraction · head_dim) rounded down to an even
    number, at least 2 (GPT-NeoX ``rotary_ndims = int(head_dim * rotary_pct)``)."""
    if not is_number(fraction) or not 0 < fraction <= 1:
        raise ValueError(f"pe.fraction must be a number in (0, 1], got {fraction!r}")
    return max(2, int(fraction * head_dim) // 2 * 2)


def p_rope_pairs(dim: int, p: float = 1.0) -> int:
    """Pairs p-RoPE keeps rotating out of dim/2: int(p · dim // 2), Barbero et al.'s
    ``rope_angles``; the others (the lowest frequencies) get θ = 0."""
    if not is_number(p) or not 0 <= p <= 1:
        raise ValueError(f"pe.p must be a number in [0, 1], got {p!r}")
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


def require_even_head_dim(run: Run, name: str) -> None:
    """Rotations pair a head's dimensions: refuse an odd head dimension, naming the keys."""
    if run.head_dim % 2:
        raise ValueError(
            f"pe={name} needs an even head dimension; model.d_model / model.n_heads = "
            f"{run.d_model} / {run.n_heads} = {run.head_dim}"
        )


# -- the options every encoding takes (PositionalEncoding) -------------------------------------
def check_axes(name: str, supports_axes: bool, axes, randomized: bool) -> None:
    """Refuse an axis count this encoding has no form for, in one line naming the key."""
    if isinstance(axes, bool) or not isinstance(axes, int) or not 1 <= axes <= 3:
        raise ValueError(
            f"pe.axes must be an integer 1, 2 or 3 (sequence, grid, volume); got {axes!r}"
        )
    if axes == 1:
        return
    if not supports_axes:
        raise ValueError(
            f"pe: {name} has no form for positions on {axes} axes (the data is a grid "
            f"task); allowed: {', '.join(GRID_ENCODINGS)}"
        )
    if randomized:
        raise ValueError(
            f"pe.randomized=true has no form for positions on {axes} axes (the data is a grid "
            f"task); allowed: pe.randomized=false"
        )


def check_max_position(
    max_position, train_positions: int | None, max_positions: int | None
) -> None:
    """Randomized positions are drawn from [0, max_position): it must cover every sequence."""
    needed = max_positions or train_positions or 1
    value = max_position
    if isinstance(value, bool) or not isinstance(value, int) or value < needed:
        raise ValueError(
            f"pe.max_position must be an integer >= {needed} (the longest sequence this "
            f"run sees) when pe.randomized=true, got {value!r}"
        )


def resolve_randomized_relative(name: str, facts: Facts, value: str | None) -> str | None:
    """``pe.randomized_relative`` as the encoding uses it: refused for encodings whose bias is
    not of distances; a missing key means ``positions`` for those whose bias is."""
    if value is not None and not facts.bias_of_distance:
        raise ValueError(
            f"pe.randomized_relative applies to bias encodings of distances (alibi, t5, "
            f"kerple, sandwich, fire), not to {name}; allowed here: null"
        )
    if value is None and facts.bias_of_distance:
        # the key is absent: a run directory written before the option existed, whose model
        # trained with random positions, or a module built directly; new runs get
        # ``distances`` from their yaml (configs/pe/<name>.yaml)
        return "positions"
    if value is not None:
        check_choice("pe.randomized_relative", value, RANDOMIZED_RELATIVE)
    return value


def check_shared(
    name: str,
    facts: Facts,
    *,
    d_model: int,
    n_heads: int,
    causal: bool = True,
    train_positions: int | None = None,
    max_positions: int | None = None,
    randomized: bool = False,
    max_position: int | None = None,
    randomized_eval: bool = True,
    randomized_relative: str | None = None,
    log_length_scale: bool = False,
    axes: int = 1,
    n_layers: int = 1,
) -> Run:
    """The checks ``PositionalEncoding.__init__`` makes for every encoding (class ``name``
    with ``facts``), in its order -> the Run, ``randomized_relative`` resolved."""
    check_heads(d_model, n_heads)
    check_axes(name, facts.supports_axes, axes, randomized)
    positive_int("model.n_layers", n_layers)
    if facts.causal_only and not causal:
        raise ValueError(
            f"pe: {name} is defined for causal attention only; allowed: "
            f"model=decoder (a bidirectional stack was requested)"
        )
    check_bool("pe.randomized", randomized)
    check_bool("pe.randomized_eval", randomized_eval)
    check_bool("pe.log_length_scale", log_length_scale)
    if randomized:
        check_max_position(max_position, train_positions, max_positions)
    return Run(
        d_model=d_model,
        n_heads=n_heads,
        causal=causal,
        train_positions=train_positions,
        max_positions=max_positions,
        randomized=randomized,
        max_position=max_position,
        randomized_eval=randomized_eval,
        randomized_relative=resolve_randomized_relative(name, facts, randomized_relative),
        log_length_scale=log_length_scale,
        axes=axes,
        n_layers=n_layers,
    )
