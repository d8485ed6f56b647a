"""What every encoding's config shares, without torch: the run an encoding is told about
(``EncodingContext``), the options every encoding takes (``EncodingConfig``, NoPE's config and
the base of every other), the encodings of a distance bias (``DistanceBiasConfig``), and the
small rules several encodings use (``axis_share``, ``BASE``, the wrapped encodings' keys).

An encoding ``lengen.pe.<module>.<Class>`` keeps its config in ``lengen.pe.config.<module>``,
as ``<Class>Config`` (``lengen.pe.config.config_of`` finds it by that path): its fields are the
keys of ``configs/pe/<name>.yaml`` with their one default and the rule that refuses other
values (``lengen.schema``); its ``check_own`` makes the checks that read several options or the
run and returns what the encoding derives from them. The torch module consumes it
(``PositionalEncoding.__init__`` builds ``self.cfg`` with ``from_keys`` and calls ``check``),
and the early layer (``lengen.preflight``) builds the same config from the composed yaml before
anything imports torch (``lengen.pe.config.check_encoding``): one source, so a refusal is the
same message on both paths and costs no ``import torch``.

What a class declares about itself (``causal_only``, ``supports_axes``, ``bias_of_distance``,
``embeds``) is a class attribute of its config; the torch class inherits them.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from lengen.checks import check_heads, positive_int
from lengen.pe.config.logits import check_plain_logits
from lengen.schema import Config, flag, integer, node_options, number, one_of, option

#: Largest (B × H × Tq × Tk) weights formed for an encoding that computes attention itself
#: (``computes_attention``: its weights are formed by calling it with one-hot values): 16M fp32
#: = 64 MiB, and Tk / (columns per call) calls of its kernel (4 at 1,024 keys with B·H = 16).
#: Here, torch-free, so plot.py's pre-check reads it (``lengen.preflight.attention_maps``);
#: ``lengen.evaluation.attention`` forms the weights
MAX_OWN_WEIGHTS = 1 << 24

#: the base of the sinusoid frequencies (Vaswani et al.), kept by RoPE, xPos, Sandwich and
#: PoPE: their configs' default, and their pure functions' (written here once)
BASE = 10000.0
#: ``pe.randomized_relative``: how randomized positions reach a bias of distances
RANDOMIZED_RELATIVE = ("distances", "positions")

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
    #: the model's block option that acts on plain softmax logits, as ``key=value``
    #: (``lengen.model.block_config.logit_option``), or None
    logit_option: str | None = None

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
class EncodingConfig(Config):
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
    #: (B, H, T, T) blocks a layer keeps for backward beyond the attention weights every layer
    #: keeps (a logit bias and its copies, gates, transforms): the memory estimate's
    #: (``activation_sizes``), measured per encoding at T = 129 (docs/scaling.md, "Memory")
    attention_copies: ClassVar[int] = 0
    #: computes attention itself (the torch class's ``attention`` hook: FoX, stick-breaking,
    #: PaTH), so it has no local mask to apply: ``window`` / ``chunk`` refused (``check_local``)
    computes_attention: ClassVar[bool] = False
    #: reads its logits from q·k itself (the torch class's ``contextual_logits`` hook: CoPE,
    #: DAPE), so a block option acting on plain logits is refused too (``check_plain_logits``)
    contextual_logits: ClassVar[bool] = False
    #: its hooks act inside attention layers (a rotation, a logit bias, gates, its own
    #: attention): a stack where no layer attends would not see it (NoPE: nothing acts;
    #: an encoding that ``embeds`` acts on the embeddings)
    acts_in_attention: ClassVar[bool] = True

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
        shared = [field.name for field in dataclasses.fields(EncodingConfig)]
        return [key for key in super().option_names() if key not in shared] + shared

    def changed(self, *leave_out: str) -> dict:
        """The encoding's own options (not the shared ones) whose values differ from its
        config's defaults, in field order, less ``leave_out``: what a generic ``describe``
        reports (``lengen.pe.base``), so no encoding copies its defaults by hand."""
        shared = {field.name for field in dataclasses.fields(EncodingConfig)}
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name not in shared
            and field.name not in leave_out
            and getattr(self, field.name) != field.default
        }

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
        self.check_local(name)
        check_plain_logits(self, context, name)
        self.check_temperatures()
        return self.check_own(context)

    def attends_itself(self) -> str | None:
        """How the torch class computes attention itself (its ``attention`` hook), or None:
        ``computes_attention``, or an option's choice (RoPE's ``pe.extension`` arms)."""
        return "computes attention itself" if self.computes_attention else None

    def check_local(self, name: str) -> None:
        """A local mask (``window``, ``chunk``) needs attention that lengen's kernels compute:
        refused, naming the key, for an encoding that computes attention itself."""
        if not self.computes_attention:
            return
        for local in ("window", "chunk"):
            if getattr(self, local) is not None:
                raise ValueError(
                    f"{self.key(local)}={getattr(self, local)}: {name} computes attention "
                    f"itself, without a local mask; allowed: null (the whole sequence)"
                )

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

    # -- sizes, for the memory pre-check (lengen.preflight.resources; docs/scaling.md) --------
    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        """The parameters (and buffers of their size) of the encoding of one stack, as numbers
        of floats by the key that sizes them (a learned table: ``{"pe.table_size": rows ×
        d_model}``), an upper bound; none here. An encoding with a table or a network sized
        by an option overrides this, so the pre-check refuses sizes that cannot fit."""
        return {}

    def table_rows_key(self) -> str:
        """The key that sizes a table of positions (learned, Abacus): ``pe.table_size`` when
        set, else the option that decides which positions it must cover."""
        if getattr(self, "table_size", None) is not None:
            return "pe.table_size"
        if self.randomized:
            return "pe.max_position"
        return "pe.start_offset" if self.start_offset else "eval.lengths"

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        """Floats the encoding keeps per layer for ``batch`` sequences of ``tokens`` positions,
        beyond what a layer's attention keeps anyway, by the key that sizes them (an upper
        bound): its ``attention_copies`` blocks, which grow with the length (``data.len``).
        An encoding with its own sized activations adds them to these (``added``)."""
        blocks = self.attention_copies * batch * context.n_heads * tokens * tokens
        return {"data.len": blocks} if blocks else {}


@dataclasses.dataclass(frozen=True)
class DistanceBiasConfig(EncodingConfig):
    """Encodings whose logit bias is a function of the query–key distance: under randomized
    positions they randomize the distances (Ruoss et al.'s code), their yamls' default."""

    bias_of_distance: ClassVar[bool] = True
    #: the bias block, the biased logits and their gradient (T5, KERPLE, FIRE, Sandwich measured
    #: 1–3 blocks over RoPE's step)
    attention_copies: ClassVar[int] = 4
    #: ``distances`` (Ruoss et al.'s code: offsets 1 … T−1 get sorted random distances) or
    #: ``positions`` (distances of random positions; what null means, for run directories
    #: written before the option existed); lengen.pe.base
    randomized_relative: str | None = option(
        "distances", one_of(*RANDOMIZED_RELATIVE, nullable=True)
    )

    def randomized_distances(self) -> str:
        """``randomized_relative`` as the encoding uses it, null read as ``positions``."""
        return self.randomized_relative or "positions"


#: ``pe.scale_base`` / ``pe.init_threshold``: null sizes them from the training positions
SIZED_FROM_TRAINING = number(
    above=0,
    nullable=True,
    message="must be a number > 0, or null for a default sized from the run's training "
    "positions; got {value!r}",
)


def axis_share(dim: int, axes: int, key: str) -> int:
    """The channels (or rotated dimensions) each axis gets: dim / A, which must be even."""
    if dim % (2 * axes):
        raise ValueError(
            f"{key} = {dim} must be divisible by 2 × {axes} (an even share per axis) for "
            f"positions on {axes} axes; allowed: a multiple of {2 * axes} (e.g. model.d_model="
            f"{24 * axes} or {48 * axes} with model.n_heads=4)"
        )
    return dim // axes


def added(sizes: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Two size mappings summed key by key (an encoding's own activations on its base's)."""
    return {key: sizes.get(key, 0) + more.get(key, 0) for key in {**sizes, **more}}


# -- an encoding that wraps another (DAPE's pe.bias, Abacus's pe.base) -------------------------
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


def wrapped_options(wrapped: str, example: str):
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


# -- an encoding's config, found from its class path, before torch ----------------------------
def config_module(target: str) -> str | None:
    """Where the config of a shipped encoding's class lives: ``lengen.pe.rope.RoPE`` (or the
    package's name for it, ``lengen.pe.RoPE``) -> ``lengen.pe.config.rope``; None for a class
    outside lengen.pe."""
    module, _, name = target.rpartition(".")
    if module == "lengen.pe":
        from lengen.pe import module_of  # the package's public names (no torch)

        module = module_of(name) or ""
    if not module.startswith("lengen.pe.") or module.startswith("lengen.pe.config"):
        return None
    return "lengen.pe.config." + module.removeprefix("lengen.pe.")


def config_of(target: str | None) -> type[EncodingConfig] | None:
    """The config class of a shipped encoding's ``_target_``: ``<Class>Config`` in the module
    ``config_module`` names (imported without torch); None for any other target."""
    if not isinstance(target, str):
        return None
    module = config_module(target)
    if module is None:
        return None
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        return None
    config = getattr(found, target.rpartition(".")[2] + "Config", None)
    return config if isinstance(config, type) and issubclass(config, EncodingConfig) else None


def config_class(target: str | None) -> type[EncodingConfig] | None:
    """The config class an encoding's ``_target_`` is checked with: a shipped encoding's
    (``config_of``), without torch; else the class's own ``Options`` (importing its module,
    torch with it) when its constructor takes options only through it (``**keywords``); else
    None."""
    found = config_of(target)
    if found is not None or not isinstance(target, str):
        return found
    import inspect

    from hydra.utils import get_class

    cls = get_class(target)
    options = getattr(cls, "Options", None)
    if not (isinstance(options, type) and issubclass(options, EncodingConfig)):
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


def pe_config_dir() -> Path:
    """The folder of the pe yamls encodings are named from (``pe=``, a schedule's layers,
    DAPE's ``pe.bias``): lengen's configs/pe, or ``LENGEN_CONFIG_DIR``'s (as lengen.config
    reads it; this layer cannot import it)."""
    root = os.environ.get("LENGEN_CONFIG_DIR") or Path(__file__).resolve().parents[4] / "configs"
    return Path(root) / "pe"


def grid_encodings() -> tuple[str, ...]:
    """``pe=`` names with an N-d form: the yamls of configs/pe whose class sets
    ``supports_axes``, read from the yamls, so a new encoding is listed by its own class (a
    shipped one's config class without torch; another's class imported)."""
    import yaml

    names = []
    for path in sorted(pe_config_dir().glob("*.yaml")):
        target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
        if not isinstance(target, str):
            continue
        options = config_of(target)
        if options is None:
            from hydra.utils import get_class

            options = get_class(target)
        if getattr(options, "supports_axes", False):
            names.append(path.stem)
    return tuple(names)


def encoding_target(name: str, key: str = "pe.layers", allowed=None) -> str:
    """An encoding's class from its name: ``_target_`` of configs/pe/<name>.yaml (a dotted
    class path is taken as it is). ``allowed`` (a config class -> bool) narrows the names an
    unknown name's message lists to those the caller takes (a schedule's layers: no schedules,
    no embeddings), so the message offers nothing the next check refuses."""
    if "." in name:
        return name
    path = pe_config_dir() / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in path.parent.glob("*.yaml"))
        if allowed is not None:
            known = [stem for stem in known if _yaml_config_allowed(path.parent, stem, allowed)]
        raise ValueError(f"{key}.pe must be one of {', '.join(known)}; got {name!r}")
    import yaml

    target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
    if not isinstance(target, str):
        raise ValueError(f"{key}.pe={name}: configs/pe/{name}.yaml names no _target_")
    return target


def _yaml_config_allowed(folder: Path, stem: str, allowed) -> bool:
    """Whether configs/pe/<stem>.yaml names a shipped encoding whose config ``allowed`` takes."""
    import yaml

    target = (yaml.safe_load((folder / f"{stem}.yaml").read_text()) or {}).get("_target_")
    options = config_of(target)
    return options is not None and bool(allowed(options))
