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
#: the options that multiply a query's logits by a function of log n, n the keys it sees: at
#: most one per layer (each is the other's job); Llama 4's temperature, a function of the
#: token's index, composes with either (as YaRN's constant does)
LENGTH_TEMPERATURES = ("log_length_scale", "ssmax")


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
    #: the task gives each token its position (``inputs["positions"]`` (T,): position
    #: coupling, Abacus; ``lengen.data.tasks.arithmetic``) instead of the index 0 … T−1
    task_positions: bool = False

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
    #: adds to the token embeddings (``embed``): once per stack, so no layer of a schedule
    embeds: ClassVar[bool] = False

    #: Ruoss et al. 2023: positions (bias encodings: distances) drawn from [0, max_position)
    randomized: bool = option(False, flag())
    #: the range of randomized positions; must cover every sequence (``check``)
    max_position: int | None = option(None)
    randomized_eval: bool = option(True, flag())
    log_length_scale: bool = option(False, flag())
    #: local attention by index (``lengen.pe.local``): a sliding window of w keys, or chunks of
    #: c tokens (Llama 4); null: the whole sequence. Exclusive (``check``)
    window: int | None = option(None, integer(nullable=True))
    chunk: int | None = option(None, integer(nullable=True))
    #: Scalable-Softmax (Nakanishi 2025): logits × s·log n, s learned per layer and head,
    #: starting at ``ssmax_init`` (null: 1 / the mean of log n over training's queries)
    ssmax: bool = option(False, flag())
    ssmax_init: float | None = option(None, number(above=0, nullable=True))
    #: Llama 4's query temperature (Hugging Face ``Llama4TextAttention``, its config's names and
    #: defaults): query t × (1 + attn_scale · log1p(⌊(t + 1) / floor_scale⌋))
    attn_temperature_tuning: bool = option(False, flag())
    floor_scale: int = option(8192, integer())
    attn_scale: float = option(0.1, number(at_least=0))
    #: random start offset of task-supplied positions (position coupling, Abacus): training
    #: adds k, uniform in 0 … start_offset and drawn per batch, to every task position >= 1
    #: (position 0, BOS or a non-digit, stays); evaluation adds none (``lengen.pe.base``)
    start_offset: int = option(0, integer(minimum=0))

    @classmethod
    def option_names(cls) -> list[str]:
        """An encoding's own options first, then the shared ones (as messages list them)."""
        shared = [field.name for field in dataclasses.fields(EncodingOptions)]
        return [key for key in super().option_names() if key not in shared] + shared

    def position_range(self, context: EncodingContext) -> int | None:
        """How many distinct positions the encoding can be asked about: under a random start
        offset, also the training positions shifted by the largest offset."""
        if self.randomized:
            return self.max_position
        if self.start_offset and context.train_positions is not None:
            return max(context.max_positions or 0, context.train_positions + self.start_offset)
        return context.max_positions

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
        self.check_task_positions(context, name)
        self.check_temperatures()
        return self.check_own(context)

    def check_task_positions(self, context: EncodingContext, name: str) -> None:
        """Task-supplied positions (``data.task.positions``) and the options that read them."""
        if context.task_positions and self.randomized:
            raise ValueError(
                "pe.randomized=true draws its own positions, but the task supplies them "
                "(data.task.positions); allowed: pe.randomized=false (pe.start_offset shifts "
                "task positions in training)"
            )
        if self.start_offset and not context.task_positions:
            raise ValueError(
                f"pe.start_offset={self.start_offset} shifts task-supplied positions, but the "
                f"task supplies none; allowed: 0, or a task option such as "
                f"data.task.positions=coupled|abacus"
            )

    def check_temperatures(self) -> None:
        """Refuse two local masks, or two length-dependent temperatures, on one layer."""
        if self.window is not None and self.chunk is not None:
            raise ValueError(
                f"pe.window and pe.chunk are exclusive (a sliding window or fixed chunks); "
                f"got window={self.window}, chunk={self.chunk}; allowed: one of them null"
            )
        scalings = [key for key in LENGTH_TEMPERATURES if getattr(self, key)]
        if len(scalings) > 1:
            raise ValueError(
                f"pe.{scalings[0]} and pe.{scalings[1]} both scale the logits with the length; "
                f"allowed: one of {', '.join(LENGTH_TEMPERATURES)}"
            )

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
                f"task); allowed: {', '.join(grid_encodings())}"
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
    embeds: ClassVar[bool] = True
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
    embeds: ClassVar[bool] = True
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


# -- PoPE: polar coordinates (lengen.pe.pope) -----------------------------------------------
#: how PoPE's learnable key phase bias δ starts: zero (both reference codes' default) or
#: uniform in [−2π, 0] (their ``bias_uniform_init``)
POPE_BIAS_INITS = ("zero", "uniform")


@dataclasses.dataclass(frozen=True)
class PoPEOptions(EncodingOptions):
    base: float = option(10000.0, number(above=1, message="must be > 1, got {value}"))
    bias_init: str = option("zero", one_of(*POPE_BIAS_INITS))


# -- DAPE: an MLP over the logits and a bias encoding's bias (lengen.pe.dape) ---------------
#: pe.bias -> the bias encoding DAPE wraps (its config class is found by ``options_of``)
DAPE_BIASES = {
    "alibi": "lengen.pe.alibi.ALiBi",
    "kerple": "lengen.pe.kerple.KERPLE",
    "fire": "lengen.pe.fire.FIRE",
}
#: ``reference``: x + B + f([x; B]) (the authors' code); ``paper``: x + f([x; B])
DAPE_FORMS = ("reference", "paper")


def wrapped_keys(options, key: str, shared_class) -> dict:
    """The keywords of an encoding another wraps (DAPE's ``pe.bias``, Abacus's ``pe.base``):
    its own options (``pe.<key>``), none of which may be one the wrapper takes for both
    (``shared_class``'s fields: set on the wrapper instead), and the wrapper's
    ``POSITION_KEYS``."""
    own = dict(getattr(options, key) or {})
    shared = {field.name for field in dataclasses.fields(shared_class)}
    for name in own:
        if name in shared:
            raise ValueError(f"pe.{key}.{name}: an option every encoding takes; allowed: pe.{name}")
    return {**own, **{name: getattr(options, name) for name in options.POSITION_KEYS}}


def _wrapped_options(wrapped: str, example: str):
    """The rule of a key holding a wrapped encoding's options (``pe.<wrapped>``'s): a mapping,
    or null (its defaults)."""

    def check(key: str, value):
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise ValueError(
                f"{key} must be a mapping of the pe.{wrapped} encoding's options (e.g. "
                f"{{{example}}}) or null, got {value!r}"
            )
        return dict(value)

    return check


_bias_options = _wrapped_options("bias", "variant: power")


@dataclasses.dataclass(frozen=True)
class DAPEOptions(DistanceBiasOptions):
    bias: str = option("alibi", one_of(*DAPE_BIASES))
    bias_options: dict | None = option(None, _bias_options)
    mlp_width: int = option(32, integer())
    form: str = option("reference", one_of(*DAPE_FORMS))

    #: DAPE's options that the wrapped encoding shares, so both see one set of positions; the
    #: others every encoding takes (temperatures, windows) act in DAPE's attention, not in B
    POSITION_KEYS: ClassVar[tuple[str, ...]] = (
        "randomized",
        "max_position",
        "randomized_eval",
        "randomized_relative",
    )

    def bias_keys(self) -> dict:
        """The keywords of the wrapped encoding: its own options (``pe.bias_options``) and
        DAPE's positional options (``POSITION_KEYS``)."""
        return wrapped_keys(self, "bias_options", DistanceBiasOptions)

    def check_own(self, context: EncodingContext) -> dict:
        """-> the wrapped encoding's keywords, checked by its config class (keys named
        ``pe.bias_options.<key>``)."""
        target = DAPE_BIASES[self.bias]
        wrapped = options_of(target)
        nested = type(wrapped.__name__, (wrapped,), {"prefix": "pe.bias_options"})
        keys = self.bias_keys()
        owner = target.rpartition(".")[2]
        nested.from_keys(keys, owner=owner).check(context, owner)
        return keys


# -- Abacus: a learned table at the task's digit offsets, a base encoding in attention -------
#: pe.base -> the encoding Abacus's attention uses at token indices (``lengen.pe.abacus``)
ABACUS_BASES = {
    "nope": "lengen.pe.nope.NoPE",
    "rope": "lengen.pe.rope.RoPE",
    "fire": "lengen.pe.fire.FIRE",
    "alibi": "lengen.pe.alibi.ALiBi",
    "t5": "lengen.pe.t5.T5RelativeBias",
    "kerple": "lengen.pe.kerple.KERPLE",
    "sandwich": "lengen.pe.sandwich.Sandwich",
}


_base_options = _wrapped_options("base", "mlp_width: 16")


@dataclasses.dataclass(frozen=True)
class AbacusOptions(EncodingOptions):
    embeds: ClassVar[bool] = True
    #: the encoding attention uses, at token indices (the paper pairs Abacus with NoPE or FIRE)
    base: str = option("nope", one_of(*ABACUS_BASES))
    #: the base encoding's own options; null: its defaults
    base_options: dict | None = option(None, _base_options)
    #: rows of the table; null: every position the run reaches (``position_range``)
    table_size: int | None = option(None, integer(nullable=True))
    #: the table's initial standard deviation; null: d_model^-1/2
    init_std: float | None = option(None, number(above=0, nullable=True))

    #: Abacus's options the base shares, so that its index positions are drawn as its own
    POSITION_KEYS: ClassVar[tuple[str, ...]] = ("randomized", "max_position", "randomized_eval")

    def base_keys(self) -> dict:
        """The base encoding's keywords: ``pe.base_options`` and ``POSITION_KEYS``."""
        return wrapped_keys(self, "base_options", EncodingOptions)

    def check_own(self, context: EncodingContext) -> tuple[int, dict]:
        """-> (rows of the table, the base encoding's keywords, checked by its config class
        with keys named ``pe.base_options.<key>``)."""
        target = ABACUS_BASES[self.base]
        base = options_of(target)
        nested = type(base.__name__, (base,), {"prefix": "pe.base_options"})
        keys = self.base_keys()
        owner = target.rpartition(".")[2]
        nested.from_keys(keys, owner=owner).check(
            dataclasses.replace(context, task_positions=False), owner
        )
        needed = max(
            p for p in (context.train_positions, self.position_range(context), 1) if p is not None
        )
        rows = self.table_size if self.table_size is not None else needed
        if rows < needed:
            raise ValueError(
                f"pe.table_size={rows}: this run reaches position {needed - 1}; allowed: "
                f">= {needed}, or null"
            )
        return rows, keys


# -- attention that carries position itself (issue #28; lengen.pe.fox, stick_breaking, path) --
#: what stick-breaking attention does with the weight its sticks leave over, 1 − Σ_j A_ij
STICK_REMAINDERS = ("current_value", "none")


@dataclasses.dataclass(frozen=True)
class ForgettingAttentionOptions(EncodingOptions):
    #: the forget gates' bias at initialisation: 0.0 (the FoX reference, f = σ(0) = 0.5);
    #: x-transformers' DataDependentAlibi starts at 5.0 (f ≈ 0.993)
    gate_bias_init: float = option(0.0, number())


@dataclasses.dataclass(frozen=True)
class StickBreakingOptions(EncodingOptions):
    causal_only: ClassVar[bool] = True
    #: ``current_value``: the leftover weight goes to the query's own value (the reference's
    #: tests/test_attn.py); ``none``: dropped (the bare formula, weights summing to < 1)
    remainder: str = option("current_value", one_of(*STICK_REMAINDERS))
    #: the query's own key breaks the stick first (the reference's ``attend_current``)
    attend_current: bool = option(False, flag())


@dataclasses.dataclass(frozen=True)
class PaTHOptions(EncodingOptions):
    causal_only: ClassVar[bool] = True
    #: rank of the low-rank projection to the Householder vectors (the reference's 32)
    w_rank: int = option(32, integer())
    #: a causal depthwise convolution (width 3, SiLU) over the vectors before their L2 norm
    short_conv: bool = option(True, flag())
    #: PaTH-FoX: FoX's data-dependent forget gates on top of the transforms
    forget_gate: bool = option(False, flag())


@dataclasses.dataclass(frozen=True)
class PaTHFoXOptions(PaTHOptions):
    #: path_fox.yaml: PaTH with the forget gates on by default
    forget_gate: bool = option(True, flag())


# -- schedules: an encoding per layer (lengen.pe.schedule) ------------------------------------
#: options a layer of a schedule cannot set for itself: positions are drawn once per stack
SCHEDULE_STACK_KEYS = ("randomized", "max_position", "randomized_eval")


def _layer_entries(key: str, value):
    """A non-empty list of layers, each an encoding's name (``rope``: configs/pe/rope.yaml) or
    a mapping with ``pe`` and that layer's options (``{pe: rope, window: 64}``) -> a tuple of
    mappings."""
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or not value:
        raise ValueError(
            f"{key} must be a non-empty list of encodings, each a name (rope) or a mapping "
            f"with key pe ({{pe: rope, window: 64}}); got {value!r}"
        )
    entries = []
    for index, entry in enumerate(value):
        entry = {"pe": entry} if isinstance(entry, str) else entry
        if not isinstance(entry, Mapping) or not isinstance(entry.get("pe"), str):
            raise ValueError(
                f"{key}.{index} must be an encoding's name (rope) or a mapping with key pe "
                f"({{pe: rope, window: 64}}); got {entry!r}"
            )
        entries.append(dict(entry))
    return tuple(entries)


class LayerPlan(NamedTuple):
    """One entry of a schedule, resolved: its name, class and keywords (options)."""

    name: str  # as the schedule names it: rope, nope, …
    target: str  # the class, lengen.pe.rope.RoPE
    keywords: dict  # its options: the schedule's shared ones, then its own


@dataclasses.dataclass(frozen=True)
class ScheduleOptions(EncodingOptions):
    """An encoding per layer (``lengen.pe.schedule``): ``layers`` cycled over the stack's
    layers. The shared options set here (window, temperatures, …) apply to every layer; a
    layer's own value of the same key must not disagree with a value set here."""

    supports_axes: ClassVar[bool] = True  # each layer's encoding checks the axes itself
    #: SmolLM3's pattern: NoPE every 4th layer (Hugging Face ``no_rope_layer_interval`` 4)
    layers: tuple = option(("rope", "rope", "rope", "nope"), _layer_entries)

    def check_own(self, context: EncodingContext) -> list[LayerPlan]:
        """Each layer's encoding checked by its own config class (keys named
        ``pe.layers.<i>.<key>``) -> the plans of the entries, in order."""
        plans = [self.layer_plan(index, entry, context) for index, entry in enumerate(self.layers)]
        if self.randomized:
            kinds = {self.randomizes_distances(plan) for plan in plans}
            if len(kinds) > 1:
                raise ValueError(
                    "pe.randomized=true: a schedule draws one set of positions per stack, but "
                    "some layers randomize distances (bias encodings) and others positions; "
                    "allowed: layers of one kind, or pe.randomized=false"
                )
        return plans

    def layer_plan(self, index: int, entry: dict, context: EncodingContext) -> LayerPlan:
        key = f"pe.layers.{index}"
        name = entry["pe"]
        target = encoding_target(name, key)
        options = config_class(target)
        if options is None or issubclass(options, ScheduleOptions):
            raise ValueError(
                f"{key}.pe={name}: a layer's encoding must have a config class (lengen.pe."
                f"options) and not be a schedule itself"
            )
        own = {k: v for k, v in entry.items() if k != "pe"}
        shared = {field.name: getattr(self, field.name) for field in _shared_fields()}
        for option_key in own:
            if option_key in SCHEDULE_STACK_KEYS:
                raise ValueError(
                    f"{key}.{option_key}: positions are drawn once per stack; allowed: "
                    f"pe.{option_key} (the schedule's)"
                )
            default = EncodingOptions.defaults().get(option_key, own[option_key])
            if option_key in shared and shared[option_key] not in (default, own[option_key]):
                raise ValueError(
                    f"pe.{option_key}={shared[option_key]} and {key}.{option_key}="
                    f"{own[option_key]} disagree; set it in one place: pe.{option_key} (every "
                    f"layer) or {key}.{option_key}"
                )
        keywords = {**shared, **own}
        nested = type(options.__name__, (options,), {"prefix": key})
        owner = target.rpartition(".")[2]
        checked = nested.from_keys(keywords, owner=owner)
        if options.embeds:
            raise ValueError(
                f"{key}.pe={name} adds to the token embeddings, once per stack, not per layer; "
                f"allowed: encodings of attention (rope, nope, alibi, …)"
            )
        checked.check(context, owner)
        return LayerPlan(name, target, keywords)

    @staticmethod
    def randomizes_distances(plan: LayerPlan) -> bool:
        """Whether a layer randomizes distances (bias encodings of distances) under
        ``pe.randomized``, rather than positions."""
        options = options_of(plan.target) or config_class(plan.target)
        relative = plan.keywords.get("randomized_relative", "distances")
        return bool(options.bias_of_distance) and (relative or "positions") == "distances"


def _shared_fields():
    return dataclasses.fields(EncodingOptions)


#: the folder of the pe yamls a schedule's layers are named from: lengen's configs/pe, or
#: LENGEN_CONFIG_DIR's (as lengen.config reads it; this layer cannot import it)
def _pe_config_dir():
    import os
    from pathlib import Path

    root = os.environ.get("LENGEN_CONFIG_DIR") or Path(__file__).resolve().parents[3] / "configs"
    return Path(root) / "pe"


def grid_encodings() -> tuple[str, ...]:
    """``pe=`` names with an N-d form: the yamls of configs/pe whose class sets
    ``supports_axes``, read from the yamls, so a new encoding is listed by its own class (a
    shipped one's config class without torch; another's class imported)."""
    import yaml

    names = []
    for path in sorted(_pe_config_dir().glob("*.yaml")):
        target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
        if not isinstance(target, str):
            continue
        options = options_of(target)
        if options is None:
            from hydra.utils import get_class

            options = get_class(target)
        if getattr(options, "supports_axes", False):
            names.append(path.stem)
    return tuple(names)


def encoding_target(name: str, key: str = "pe.layers") -> str:
    """A layer's encoding class from its name: ``_target_`` of configs/pe/<name>.yaml (a
    dotted class path is taken as it is)."""
    if "." in name:
        return name
    path = _pe_config_dir() / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        raise ValueError(f"{key}.pe must be one of {', '.join(known)}; got {name!r}")
    import yaml

    target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
    if not isinstance(target, str):
        raise ValueError(f"{key}.pe={name}: configs/pe/{name}.yaml names no _target_")
    return target


@dataclasses.dataclass(frozen=True)
class RNoPESWAOptions(ScheduleOptions):
    #: RNoPE-SWA / SWAN-GPT: RoPE layers with a sliding window, every 4th layer NoPE (global)
    layers: tuple = ScheduleOptions.with_default(
        "layers", ({"pe": "rope", "window": 8},) * 3 + ({"pe": "nope"},)
    )


@dataclasses.dataclass(frozen=True)
class IRoPEOptions(ScheduleOptions):
    #: Llama 4's iRoPE: chunked RoPE layers, every 4th layer NoPE (global) with the query
    #: temperature, floor_scale = the chunk (Llama 4: both 8,192)
    layers: tuple = ScheduleOptions.with_default(
        "layers",
        ({"pe": "rope", "chunk": 8},) * 3
        + ({"pe": "nope", "attn_temperature_tuning": True, "floor_scale": 8},),
    )
