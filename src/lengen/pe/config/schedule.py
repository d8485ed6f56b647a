"""The configs of schedules (``lengen.pe.schedule``: an encoding per layer), without torch:
each layer's encoding is named as ``pe=`` names it and checked by its own config."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar, NamedTuple

from lengen.pe.config.base import (
    EncodingConfig,
    EncodingContext,
    config_class,
    encoding_target,
)
from lengen.schema import option

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
class ScheduleConfig(EncodingConfig):
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

    def parameter_sizes(self, context: EncodingContext) -> dict[str, int]:
        # each layer its own encoding: layer i's is entry i mod len(layers)
        sizes: dict[str, int] = {}
        for layer in range(context.n_layers):
            index = layer % len(self.layers)
            for key, count in self._entry_sizes(index, context, "parameter_sizes").items():
                sizes[key] = sizes.get(key, 0) + count
        return sizes

    def activation_sizes(self, context: EncodingContext, batch: int, tokens: int) -> dict[str, int]:
        sizes: dict[str, int] = {}  # per layer: the largest entry's
        for index in range(len(self.layers)):
            entry = self._entry_sizes(index, context, "activation_sizes", batch, tokens)
            for key, count in entry.items():
                sizes[key] = max(sizes.get(key, 0), count)
        return sizes

    def _entry_sizes(self, index: int, context: EncodingContext, method: str, *args) -> dict:
        """An entry's sizes, its own options named ``pe.layers.<i>.<key>``; none for an entry
        its checks refuse (the component checks refuse it after)."""
        try:
            plan = self.layer_plan(index, self.layers[index], context)
        except ValueError:
            return {}
        config = config_class(plan.target).from_keys(plan.keywords, owner=plan.name)
        own = set(self.layers[index]) - {"pe"}
        return {
            f"pe.layers.{index}.{key[3:]}" if key[3:] in own else key: count
            for key, count in getattr(config, method)(context, *args).items()
        }

    def layer_plan(self, index: int, entry: dict, context: EncodingContext) -> LayerPlan:
        key = f"pe.layers.{index}"
        name = entry["pe"]
        target = encoding_target(name, key, allowed=layer_encoding)
        options = config_class(target)
        if options is None or issubclass(options, ScheduleConfig):
            raise ValueError(
                f"{key}.pe={name}: a layer's encoding must have a config class (lengen.pe."
                f"config) and not be a schedule itself"
            )
        own = {k: v for k, v in entry.items() if k != "pe"}
        shared = {field.name: getattr(self, field.name) for field in _shared_fields()}
        for option_key in own:
            if option_key in SCHEDULE_STACK_KEYS:
                raise ValueError(
                    f"{key}.{option_key}: positions are drawn once per stack; allowed: "
                    f"pe.{option_key} (the schedule's)"
                )
            default = EncodingConfig.defaults().get(option_key, own[option_key])
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
        options = config_class(plan.target)
        relative = plan.keywords.get("randomized_relative", "distances")
        return bool(options.bias_of_distance) and (relative or "positions") == "distances"


def layer_encoding(options: type[EncodingConfig]) -> bool:
    """Whether an encoding's config may serve a layer of a schedule: not a schedule itself,
    nor an encoding that adds to the token embeddings (once per stack)."""
    return not issubclass(options, ScheduleConfig) and not options.embeds


def _shared_fields():
    return dataclasses.fields(EncodingConfig)


@dataclasses.dataclass(frozen=True)
class RNoPESWAConfig(ScheduleConfig):
    #: RNoPE-SWA / SWAN-GPT: RoPE layers with a sliding window, every 4th layer NoPE (global)
    layers: tuple = ScheduleConfig.with_default(
        "layers", ({"pe": "rope", "window": 8},) * 3 + ({"pe": "nope"},)
    )


@dataclasses.dataclass(frozen=True)
class IRoPEConfig(ScheduleConfig):
    #: Llama 4's iRoPE: chunked RoPE layers, every 4th layer NoPE (global) with the query
    #: temperature, floor_scale = the chunk (Llama 4: both 8,192)
    layers: tuple = ScheduleConfig.with_default(
        "layers",
        ({"pe": "rope", "chunk": 8},) * 3
        + ({"pe": "nope", "attn_temperature_tuning": True, "floor_scale": 8},),
    )
