"""What every mixer's config shares, and ``model.mixer`` / ``model.mixers`` resolved to a plan
per layer, without torch.

A mixer ``lengen.model.mixers.<module>.<Class>`` keeps its config in
``lengen.model.mixers.config.<module>`` as ``<Class>Config`` (found by that path, as an
encoding's is); a user's mixer (any other dotted ``_target_``) is checked with its class's own
``Options``. A mixer is named as its yaml names it: ``configs/model/mixer/<name>.yaml`` gives
its ``_target_`` and the defaults of its options. The yamls live under ``configs/model/``, not
in a group of their own: a mixer is part of the model, named by a model key's value (as
``pe.layers`` names encodings), never composed at the top level, and a top-level folder would
be taken for a Hydra group that ``train.py mixer=…`` composes.
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, NamedTuple

from lengen.schema import Config, integer, option

#: the mixer every layer uses unless told otherwise: softmax attention, today's layer
DEFAULT_MIXER = "attention"


@dataclasses.dataclass(frozen=True)
class MixerConfig(Config):
    """A mixer's options (``configs/model/mixer/<name>.yaml``); the base of every mixer's."""

    prefix: ClassVar[str] = "model.mixer"
    #: it carries a state left to right (so it serves causal stacks only), instead of keys
    recurrent: ClassVar[bool] = True
    #: how figures name it (``mixer_display``: a legend's "GLA · nope"); "": its yaml's name
    display_name: ClassVar[str] = ""
    #: boolean options a figure names by a word where they are on ({option: word}); other
    #: options away from the yaml's defaults show as ``option=value``
    display_flags: ClassVar[dict[str, str]] = {}


@dataclasses.dataclass(frozen=True)
class LinearMixerConfig(MixerConfig):
    """The options of the linear-attention family (GLA, DeltaNet, Gated DeltaNet)."""

    #: tokens per chunk of the parallel (training) form: memory per chunk ∝ chunk², steps ∝ T / chunk
    chunk_size: int = option(64, integer())
    #: width of the causal depthwise convolution (then SiLU) on q, k and v, as fla's layers
    #: and Mamba-2 put before the recurrence; 0: none
    conv_size: int = option(0, integer(0))


class MixerPlan(NamedTuple):
    """One layer's mixer, resolved: its name, class, checked options and kind."""

    name: str  # as the yaml names it: attention, gla, …
    target: str  # the class, lengen.model.mixers.gla.GatedLinearAttention
    keywords: dict  # its options as the config checked them
    recurrent: bool


def mixer_config_dir() -> Path:
    """configs/model/mixer of lengen's configs (or of ``LENGEN_CONFIG_DIR``'s, as the pe yamls
    are read)."""
    from lengen.pe.config.base import pe_config_dir

    return pe_config_dir().parent / "model" / "mixer"


def known_mixers() -> list[str]:
    return sorted(path.stem for path in mixer_config_dir().glob("*.yaml"))


def _entry(key: str, value) -> str | dict:
    """A mixer's name (``gla``) or a mapping with key ``mixer`` and its options."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("mixer"), str):
        return dict(value)
    raise ValueError(
        f"{key} must be a mixer's name (one of {', '.join(known_mixers())}) or a mapping with "
        f"key mixer ({{mixer: gated_deltanet, negative_eigenvalues: true}}); got {value!r}"
    )


def mixer_entry(key: str, value) -> str | dict:
    """The rule of ``model.mixer``: one entry (``_entry``)."""
    return _entry(key, value)


def mixer_entries(key: str, value) -> tuple | None:
    """The rule of ``model.mixers``: null, or a non-empty list of entries (``_entry``)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__") or not value:
        raise ValueError(
            f"{key} must be null or a non-empty list of mixers, cycled over each stack's "
            f"layers ([gla, gla, gla, attention]); got {value!r}"
        )
    return tuple(_entry(f"{key}.{index}", entry) for index, entry in enumerate(value))


def mixer_target(name: str, key: str) -> str:
    """A mixer's class from its name: ``_target_`` of configs/model/mixer/<name>.yaml (a dotted
    class path is taken as it is)."""
    if "." in name:
        return name
    path = mixer_config_dir() / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"{key} must be one of {', '.join(known_mixers())}; got {name!r}")
    import yaml

    target = (yaml.safe_load(path.read_text()) or {}).get("_target_")
    if not isinstance(target, str):
        raise ValueError(f"{key}={name}: configs/model/mixer/{name}.yaml names no _target_")
    return target


def mixer_defaults(name: str) -> dict:
    """The options configs/model/mixer/<name>.yaml sets (its defaults, shown)."""
    if "." in name:
        return {}
    import yaml

    node = yaml.safe_load((mixer_config_dir() / f"{name}.yaml").read_text()) or {}
    return {k: v for k, v in node.items() if k != "name" and not k.startswith("_")}


def mixer_config_class(target: str) -> type[MixerConfig]:
    """``<Class>Config`` in ``lengen.model.mixers.config.<module>`` for lengen's mixers
    (no torch); a user's class's ``Options`` otherwise (importing it)."""
    module, _, name = target.rpartition(".")
    if module.startswith("lengen.model.mixers.") and ".config" not in module:
        config_module = "lengen.model.mixers.config." + module.removeprefix("lengen.model.mixers.")
        found = getattr(importlib.import_module(config_module), name + "Config", None)
    else:
        from hydra.utils import get_class

        found = getattr(get_class(target), "Options", None)
    if not (isinstance(found, type) and issubclass(found, MixerConfig)):
        raise ValueError(f"{target}: a mixer needs a config class (a MixerConfig); found none")
    return found


def plan_entry(entry: str | dict, key: str) -> MixerPlan:
    """One entry checked by its mixer's config (options named ``<key>.<option>``)."""
    own = {"mixer": entry} if isinstance(entry, str) else dict(entry)
    name = own.pop("mixer")
    name_key = key if isinstance(entry, str) else f"{key}.mixer"
    target = mixer_target(name, name_key)
    options = mixer_config_class(target)
    nested = type(options.__name__, (options,), {"prefix": key})
    keywords = {**mixer_defaults(name), **own}
    checked = nested.from_keys(keywords, owner=target.rpartition(".")[2])
    return MixerPlan(name, target, dataclasses.asdict(checked), options.recurrent)


def plan_mixers(mixer: str | dict, mixers: tuple | None) -> list[MixerPlan]:
    """The plans ``model.mixer`` and ``model.mixers`` give, cycled over a stack by the model:
    layer i uses plan i mod len(plans)."""
    if mixers is None:
        return [plan_entry(mixer, "model.mixer")]
    if mixer != DEFAULT_MIXER:
        raise ValueError(
            f"model.mixer={_label(mixer)} and model.mixers disagree; set one: model.mixer (every "
            f"layer) or model.mixers (per layer)"
        )
    return [plan_entry(entry, f"model.mixers.{index}") for index, entry in enumerate(mixers)]


def layer_plans(plans: list[MixerPlan], n_layers: int) -> list[MixerPlan]:
    """Each of a stack's ``n_layers`` layers' plan: plan i mod len(plans). A stack shallower than
    the list uses its first entries, warned (as ``pe.layers`` warns): the default 2 layers of
    ``model.mixers=[gla, gla, gla, attention]`` have no attention layer."""
    if n_layers < len(plans):
        used = ", ".join(mixer_label(plan) for plan in plans[:n_layers])
        warnings.warn(
            f"model.mixers: a stack of {n_layers} layers uses the first {n_layers} of its "
            f"{len(plans)} entries: {used} (model.n_layers sets the depth)",
            stacklevel=2,
        )
    return [plans[index % len(plans)] for index in range(n_layers)]


def _label(entry: str | dict) -> str:
    return entry if isinstance(entry, str) else str(entry.get("mixer"))


def mixer_label(plan: MixerPlan) -> str:
    """A layer's mixer as results name it: ``gla`` or ``gated_deltanet(negative_eigenvalues=True)``
    (options other than its yaml's)."""
    shown = mixer_defaults(plan.name)
    changed = {k: v for k, v in plan.keywords.items() if shown.get(k, v) != v}
    return plan.name + (f"({', '.join(f'{k}={v}' for k, v in changed.items())})" if changed else "")


def mixer_display(entry: str | dict, key: str = "model.mixer") -> str:
    """A mixer entry (a name, or a mapping with key ``mixer`` and options) as figures name it:
    its config's ``display_name``, then in brackets the options away from its yaml's defaults,
    a flag's word where its config gives one: ``Gated DeltaNet (neg. eig.)``, ``GLA
    (state_init=passing)``. Tables name it as written (``mixer_label``). ValueError for what
    ``plan_entry`` refuses, and for a mixer named by its class (no yaml: no display name)."""
    import json

    name = entry if isinstance(entry, str) else entry.get("mixer")
    if not isinstance(name, str) or "." in name:
        raise ValueError(f"{key}: {name!r} has no display name (a mixer of configs/model/mixer)")
    plan = plan_entry(entry, key)
    config_class = mixer_config_class(plan.target)
    defaults = mixer_defaults(plan.name)
    shown = []
    for setting, value in plan.keywords.items():
        if defaults.get(setting, value) == value:
            continue
        if value is True and setting in config_class.display_flags:
            shown.append(config_class.display_flags[setting])
        else:
            shown.append(f"{setting}={value if isinstance(value, str) else json.dumps(value)}")
    label = config_class.display_name or plan.name
    return label + (f" ({', '.join(shown)})" if shown else "")
