"""Every encoding's typed config: its options, their defaults and their checks, without torch.

Each shipped encoding ``lengen.pe.<module>.<Name>`` has one config class here,
``<Name>Options``: its fields are the keys of ``configs/pe/<name>.yaml`` with their one default
and the rule that refuses other values (``lengen.schema``); its ``check`` method makes the
checks that read several options or the run and returns what the encoding derives from them.
The torch module consumes it (``PositionalEncoding.__init__`` builds ``self.cfg`` with
``from_keys`` and calls ``check``), and the early layer (``lengen.preflight.check_components``) builds
the same config from the composed yaml before anything imports torch (``check_encoding``): one
source, so a refusal is the same message on both paths and costs no ``import torch``.

What a class declares about itself (``causal_only``, ``supports_axes``, ``bias_of_distance``) is
a class attribute of its config; the torch class inherits them from its ``Options``.

A new encoding may keep its config class in its own module (``Options = MyOptions`` on the
torch class); it is then checked by building it (``lengen.preflight.check_by_building``), after
``import torch``. Moving the class here, named ``<Name>Options``, makes its refusals torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar, NamedTuple

from lengen.checks import check_heads, positive_int
from lengen.pe.rules import (
    BIDIRECTIONAL,
    FRACTION,
    GRID_DISTANCES,
    GRID_ENCODINGS,
    KERPLE_VARIANTS,
    NEEDS_ORIGINAL_LENGTH,
    POLICIES,
    PROPORTION,
    RANDOMIZED_RELATIVE,
    ROPE_LAYOUTS,
    SCALINGS,
    SINUSOIDAL_LAYOUTS,
    T5_PAPER_MAX_DISTANCE,
    T5_PAPER_TRAIN_LENGTH,
    TABLES,
    YARN_RAMPS,
    axis_share,
    p_rope_pairs,
    rotary_dimension,
)
from lengen.schema import Options, flag, integer, node_options, number, one_of, option

#: the facts a config class declares about its encoding
FACTS = ("causal_only", "supports_axes", "bias_of_distance")


@dataclasses.dataclass(frozen=True)
class EncodingContext:
    """What the model and the data tell an encoding (the keywords ``lengen.build`` and the
    model pass): sizes, causality, the positions of training and of the longest evaluation
    (per axis on grids), the axes of a position and the layers of the stack."""

    d_model: int
    n_heads: int
    causal: bool = True
    train_positions: int | None = None
    max_positions: int | None = None
    axes: int = 1
    n_layers: int = 1

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


CONTEXT_KEYS = tuple(field.name for field in dataclasses.fields(EncodingContext))


def require_even_head_dim(context: EncodingContext, name: str) -> None:
    """Rotations pair a head's dimensions: refuse an odd head dimension, naming the keys."""
    if context.head_dim % 2:
        raise ValueError(
            f"pe={name} needs an even head dimension; model.d_model / model.n_heads = "
            f"{context.d_model} / {context.n_heads} = {context.head_dim}"
        )


# -- the options every encoding takes ------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class EncodingOptions(Options):
    """The options every encoding takes (``configs/train.yaml``'s ``pe:`` block); NoPE's
    config, and the base of every other."""

    prefix: ClassVar[str] = "pe"
    #: defined for causal attention only: a bidirectional stack is refused
    causal_only: ClassVar[bool] = False
    #: has a form for positions on several axes (grids, volumes); the others refuse axes > 1
    supports_axes: ClassVar[bool] = False
    #: its logit bias is a function of the query–key distance (randomized distances apply)
    bias_of_distance: ClassVar[bool] = False

    #: Ruoss et al. 2023: positions (bias encodings: distances) drawn from [0, max_position)
    randomized: bool = option(False, flag())
    #: the range of randomized positions; must cover every sequence (``check``)
    max_position: int | None = option(None)
    randomized_eval: bool = option(True, flag())
    log_length_scale: bool = option(False, flag())

    @classmethod
    def option_names(cls) -> list[str]:
        """An encoding's own options first, then the shared ones (as messages list them)."""
        shared = [field.name for field in dataclasses.fields(EncodingOptions)]
        return [key for key in super().option_names() if key not in shared] + shared

    def position_range(self, context: EncodingContext) -> int | None:
        """How many distinct positions the encoding can be asked about."""
        return self.max_position if self.randomized else context.max_positions

    def check(self, context: EncodingContext, name: str):
        """Every check of the options against the run, in order: the shared ones, then the
        encoding's own (``check_own``) -> what the encoding derives from them."""
        check_heads(context.d_model, context.n_heads)
        self.check_axes(context, name)
        positive_int("model.n_layers", context.n_layers)
        if self.causal_only and not context.causal:
            raise ValueError(
                f"pe: {name} is defined for causal attention only; allowed: "
                f"model=decoder (a bidirectional stack was requested)"
            )
        if self.randomized:
            needed = context.max_positions or context.train_positions or 1
            value = self.max_position
            if isinstance(value, bool) or not isinstance(value, int) or value < needed:
                raise ValueError(
                    f"pe.max_position must be an integer >= {needed} (the longest sequence "
                    f"this run sees) when pe.randomized=true, got {value!r}"
                )
        return self.check_own(context)

    def check_axes(self, context: EncodingContext, name: str) -> None:
        """Refuse an axis count this encoding has no form for, in one line naming the key."""
        axes = context.axes
        if isinstance(axes, bool) or not isinstance(axes, int) or not 1 <= axes <= 3:
            raise ValueError(
                f"pe.axes must be an integer 1, 2 or 3 (sequence, grid, volume); got {axes!r}"
            )
        if axes == 1:
            return
        if not self.supports_axes:
            raise ValueError(
                f"pe: {name} has no form for positions on {axes} axes (the data is a grid "
                f"task); allowed: {', '.join(GRID_ENCODINGS)}"
            )
        if self.randomized:
            raise ValueError(
                f"pe.randomized=true has no form for positions on {axes} axes (the data is a "
                f"grid task); allowed: pe.randomized=false"
            )

    def check_own(self, context: EncodingContext):
        """The encoding's own checks against the run (none here) -> what it derives."""
        return None


@dataclasses.dataclass(frozen=True)
class NoPEOptions(EncodingOptions):
    supports_axes: ClassVar[bool] = True


@dataclasses.dataclass(frozen=True)
class DistanceBiasOptions(EncodingOptions):
    """Encodings whose logit bias is a function of the query–key distance: under randomized
    positions they randomize the distances (Ruoss et al.'s code), their yamls' default."""

    bias_of_distance: ClassVar[bool] = True
    #: ``distances`` (Ruoss et al.'s code: offsets 1 … T−1 get sorted random distances) or
    #: ``positions`` (distances of random positions; what null means, for run directories
    #: written before the option existed); lengen.pe.base
    randomized_relative: str | None = option(
        "distances", one_of(*RANDOMIZED_RELATIVE, nullable=True)
    )

    def randomized_distances(self) -> str:
        """``randomized_relative`` as the encoding uses it, null read as ``positions``."""
        return self.randomized_relative or "positions"


# -- added to the embeddings ---------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SinusoidalOptions(EncodingOptions):
    supports_axes: ClassVar[bool] = True
    base: float = option(10000.0, number(above=1, message="must be > 1, got {value}"))
    layout: str = option("interleaved", one_of(*SINUSOIDAL_LAYOUTS))

    def check_own(self, context: EncodingContext) -> None:
        if context.d_model % 2:
            raise ValueError(f"pe=sinusoidal needs an even model.d_model, got {context.d_model}")
        if context.axes > 1:
            axis_share(context.d_model, context.axes, "pe=sinusoidal: model.d_model")


@dataclasses.dataclass(frozen=True)
class LearnedOptions(EncodingOptions):
    supports_axes: ClassVar[bool] = True
    policy: str = option("extend", one_of(*POLICIES))
    #: rows of the table (per axis on grids); null: derived from the policy and the lengths
    table_size: int | None = option(None, integer(nullable=True))
    #: the table's initial standard deviation; null: d_model^-1/2
    init_std: float | None = option(None, number(above=0, nullable=True))
    table: str = option("axial", one_of(*TABLES))

    def check_own(self, context: EncodingContext) -> int:
        """-> the rows of the table (per axis, or the side of a full grid, on A axes)."""
        if self.policy == "interpolate" and self.randomized:
            raise ValueError(
                "pe.policy=interpolate resizes the trained table past training; with "
                "pe.randomized=true the table already covers pe.max_position; allowed: extend, "
                "error"
            )
        trained = context.train_positions
        if context.axes > 1:
            needed = max(p for p in (trained, context.max_positions, 1) if p is not None)
            rows = self.table_rows(trained, needed, "positions per axis")
            if self.table == "axial":
                axis_share(context.d_model, context.axes, "pe=learned: model.d_model")
            return rows
        needed = max(p for p in (trained, self.position_range(context), 1) if p is not None)
        return self.table_rows(trained, needed, "positions")

    def table_rows(self, trained: int | None, needed: int, unit: str) -> int:
        """``pe.table_size``, or derived from the policy (``extend``: every position
        evaluation needs; otherwise the trained ones); ``pe.policy=error`` refuses evaluation
        that needs more rows than the table holds."""
        table_size = self.table_size
        if table_size is None:
            table_size = needed if self.policy == "extend" else (trained or needed)
        if self.policy == "error" and needed > table_size:
            raise ValueError(
                f"pe.policy=error: evaluation needs {needed} {unit} but the learned table "
                f"holds {table_size}; allowed: pe.policy=extend (untrained rows past training) "
                f"or interpolate, or evaluation within the table"
            )
        return table_size


# -- rotations of queries and keys ---------------------------------------------------------
class RopeSizes(NamedTuple):
    """What RoPE derives from its checked options."""

    rotary_dim: int  # r: the rotated dimensions of a head
    axis_dim: int  # r / A: the rotated dimensions of one axis
    rotated_pairs: int  # pairs p-RoPE keeps rotating, all axes
    original_max_position: int | None  # L, the default resolved


@dataclasses.dataclass(frozen=True)
class RoPEOptions(EncodingOptions):
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
        return RopeSizes(rotary_dim, axis_dim, rotated_pairs, original)


@dataclasses.dataclass(frozen=True)
class RoPEMixedOptions(EncodingOptions):
    supports_axes: ClassVar[bool] = True
    #: null: 10,000 on sequences, 100 on grids (the reference's rope_theta)
    base: float | None = option(
        None,
        number(
            above=1, nullable=True, message="must be > 1, or null for the default, got {value!r}"
        ),
    )
    per_layer: bool = option(True, flag())

    def check_own(self, context: EncodingContext) -> None:
        require_even_head_dim(context, "rope_mixed")
        axis_share(
            context.head_dim,
            context.axes,
            "pe=rope_mixed: the head dimension (model.d_model / model.n_heads)",
        )


#: ``pe.scale_base`` / ``pe.init_threshold``: null sizes them from the training positions
_SIZED_FROM_TRAINING = number(
    above=0,
    nullable=True,
    message="must be a number > 0, or null for a default sized from the run's training "
    "positions; got {value!r}",
)


@dataclasses.dataclass(frozen=True)
class XPosOptions(EncodingOptions):
    causal_only: ClassVar[bool] = True
    base: float = option(10000.0, number(above=1))
    layout: str = option("interleaved", one_of(*ROPE_LAYOUTS))
    #: γ of the decay; null: train_positions / 2 (the paper's 512 for 1,024 tokens)
    scale_base: float | None = option(None, _SIZED_FROM_TRAINING)
    gamma: float = option(0.4, number(above=0))

    def check_own(self, context: EncodingContext) -> None:
        require_even_head_dim(context, "xpos")


# -- logit biases --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ALiBiOptions(DistanceBiasOptions):
    supports_axes: ClassVar[bool] = True
    bidirectional: str = option("symmetric", one_of(*BIDIRECTIONAL))
    grid_distance: str = option("euclidean", one_of(*GRID_DISTANCES))
    learnable_slopes: bool = option(False, flag())

    def check_own(self, context: EncodingContext) -> None:
        if context.axes > 1 and self.bidirectional != "symmetric" and not context.causal:
            # a distance between cells: no cell is before another (lengen.pe.alibi's docstring)
            raise ValueError(
                f"pe.bidirectional={self.bidirectional} has no form on a grid (no cell is "
                f"before another); allowed: symmetric"
            )


class T5Sizes(NamedTuple):
    """``pe.max_distance`` as T5 uses it, and where it came from."""

    max_distance: int
    source: str


@dataclasses.dataclass(frozen=True)
class T5RelativeBiasOptions(DistanceBiasOptions):
    num_buckets: int = option(32, integer(minimum=4))
    #: null: train_positions // 4 (T5's 128 for 512 tokens), at least num_buckets // 2 + 1
    max_distance: int | None = option(None)

    def check_own(self, context: EncodingContext) -> T5Sizes:
        max_distance, source = self.max_distance, "given"
        train = context.train_positions
        if max_distance is None and not train:
            max_distance, source = T5_PAPER_MAX_DISTANCE, "T5's 128 (training positions unknown)"
        elif max_distance is None:
            ratio = T5_PAPER_TRAIN_LENGTH // T5_PAPER_MAX_DISTANCE  # 4
            max_distance = max(train // ratio, self.num_buckets // 2 + 1)
            source = f"max(train_positions {train} // {ratio}, num_buckets // 2 + 1)"
        if (
            isinstance(max_distance, bool)
            or not isinstance(max_distance, int)
            or max_distance <= self.num_buckets // 2
        ):
            raise ValueError(
                f"pe.max_distance must be an integer > pe.num_buckets // 2 = "
                f"{self.num_buckets // 2} (the exactly represented distances), or null "
                f"(train_positions // 4), got {max_distance!r}"
            )
        return T5Sizes(max_distance, source)


@dataclasses.dataclass(frozen=True)
class KERPLEOptions(DistanceBiasOptions):
    variant: str = option("log", one_of(*KERPLE_VARIANTS))


def _even_dimension(key: str, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 2 or value % 2:
        raise ValueError(f"{key} must be an even integer >= 2, got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class SandwichOptions(DistanceBiasOptions):
    dim: int = option(128, _even_dimension)
    base: float = option(10000.0, number(above=1, message="must be > 1, got {value}"))


@dataclasses.dataclass(frozen=True)
class FIREOptions(DistanceBiasOptions):
    mlp_width: int = option(32, integer())
    init_c: float = option(0.1, number(above=0))
    #: L₀; null: train_positions / 4 (the paper's 512 for 2,048 tokens)
    init_threshold: float | None = option(None, _SIZED_FROM_TRAINING)


# -- computed from the logits --------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class CoPEOptions(EncodingOptions):
    causal_only: ClassVar[bool] = True
    npos_max: int = option(64, integer(minimum=2))


# -- from a yaml node, before torch --------------------------------------------------------
def options_of(target: str | None) -> type[EncodingOptions] | None:
    """The config class of a shipped encoding's ``_target_`` (``lengen.pe.rope.RoPE`` or
    ``lengen.pe.RoPE``), found by name here; None for any other target."""
    if not isinstance(target, str) or not target.startswith("lengen.pe."):
        return None
    found = globals().get(target.rpartition(".")[2] + "Options")
    return found if isinstance(found, type) and issubclass(found, EncodingOptions) else None


def config_class(target: str | None) -> type[EncodingOptions] | None:
    """The config class an encoding's ``_target_`` is checked with: a shipped encoding's from
    here, without torch; else the class's own ``Options`` (importing its module, torch with it)
    when its constructor takes options only through it (``**keywords``); else None."""
    found = options_of(target)
    if found is not None or not isinstance(target, str):
        return found
    import inspect

    from hydra.utils import get_class

    cls = get_class(target)
    options = getattr(cls, "Options", None)
    if not (isinstance(options, type) and issubclass(options, EncodingOptions)):
        return None
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    keywords_only = all(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    return options if keywords_only else None


def check_encoding(node: Mapping, **context) -> bool:
    """Every check the encoding named by node["_target_"] makes of its options and of the run
    (``context``: the keywords of ``EncodingContext``, as lengen.build passes them) -> True
    when checked; False when its class has no config class to check with (an encoding with
    a constructor of its own: it checks itself when built). Raises ValueError naming the key."""
    options = config_class(node.get("_target_"))
    if options is None:
        return False
    name = node["_target_"].rpartition(".")[2]
    options.from_keys(node_options(node), owner=name).check(EncodingContext(**context), name)
    return True
