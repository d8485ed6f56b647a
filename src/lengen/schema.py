"""Typed configs: every option of a component written once, importable without torch.

A component's config is a frozen dataclass (``Config``) whose fields are its options: the
field's name is the yaml key, its annotation the type, its default the one default, and its
``rule`` (``flag``, ``one_of``, ``integer``, ``number``) the allowed values and the message that
refuses the others. ``Config.from_keys`` turns a yaml node (or a constructor's keywords) into
the config, refusing an unknown key with the allowed ones named; checks that read several
options, or the run, are methods of the config class. The torch module consumes the config
(``self.cfg``); the early layer (``lengen.preflight.check_components``) builds the same config from
the composed yaml before anything imports torch, so the two can never disagree.

Why the standard library's dataclasses and not pydantic (installed as wandb's dependency):
every refusal must be one line, worded as the docs quote it, naming the key and what is
allowed; pydantic formats its own multi-line errors and coerces values unless made strict
field by field, and an import of it costs more than every check here takes. A rule is a small
function, so a message that must stay exactly as documented is written beside its field.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from lengen.checks import SHOWN_CHARACTERS, positive_int, shown

#: a rule checks ``value`` for ``key`` and returns it (converted, e.g. int -> float), or raises
#: ValueError whose message starts with the key
Rule = Callable[[str, Any], Any]


def option(default: Any, rule: Rule | None = None, *, infinite: bool = False) -> Any:
    """A field of a ``Config`` class: its one default and the rule its values obey.
    ``infinite``: inf is a meaningful value of the option (documented beside it); every other
    float option refuses NaN and ±inf (``Config.from_keys``, ``finite``)."""
    return dataclasses.field(default=default, metadata={"rule": rule, "infinite": infinite})


#: the largest integer an option may hold: torch's and Lightning's counters are int64, and a
#: larger step count only overflows later, far from the key that caused it
INT64_MAX = 2**63 - 1


def finite(key: str, value, *, infinite: bool = False):
    """Refuse NaN (always), ±inf (unless ``infinite``) and integers past int64 in ``value`` or
    in a list of scalars it holds (``eval.factors``) -> value. Mappings are left to their own
    configs (a schedule's layers name their keys, ``pe.layers.3.attn_scale``). Why in one
    place: a rule with bounds refuses NaN by accident (every comparison is false) but lets inf
    through, and a rule without bounds (``pe.gate_bias_init``) takes both; either diverges at
    step 0 after a run directory is written."""
    listed = isinstance(value, (list, tuple))
    for item in value if listed else [value]:
        if isinstance(item, float) and (math.isnan(item) or (math.isinf(item) and not infinite)):
            kind = "number{} (inf allowed)" if infinite else "finite number{}"
            wanted = f"hold {kind.format('s')}" if listed else f"be a {kind.format('')}"
            raise ValueError(f"{key} must {wanted}, got {item!r}")
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > INT64_MAX:
            wanted = "hold integers" if listed else "be an integer"
            raise ValueError(f"{key} must {wanted} within ±{INT64_MAX} (int64), got {item}")
    return value


class Shown:
    """A value in a message's ``{value!r}`` / ``{value}`` (``number``'s ``message``), shown
    cut as ``shown`` cuts it."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return shown(self.value)

    def __str__(self) -> str:
        text = str(self.value)
        return text if len(text) <= SHOWN_CHARACTERS else shown(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


# -- rules ---------------------------------------------------------------------------------
def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def flag() -> Rule:
    """true or false."""

    def rule(key: str, value):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {shown(value)}")
        return value

    return rule


def one_of(*allowed, nullable: bool = False) -> Rule:
    """One of ``allowed``, or None where ``nullable``."""

    def rule(key: str, value):
        if value is None and nullable:
            return None
        if value not in allowed:
            raise ValueError(
                f"{key} must be one of {', '.join(map(str, allowed))}; got {shown(value)}"
            )
        return value

    return rule


def integer(minimum: int = 1, *, nullable: bool = False) -> Rule:
    """An integer >= ``minimum`` (bools refused), or None where ``nullable``."""

    def rule(key: str, value):
        if value is None and nullable:
            return None
        return positive_int(key, value, minimum)

    return rule


def integer_in(minimum: int, maximum: int, message: str | None = None) -> Rule:
    """An integer in ``minimum`` … ``maximum`` (bools refused). Below the minimum, the message
    of ``integer``; above the maximum, ``message`` (after the key, ``{value}`` substituted),
    by default "must be in minimum … maximum"."""
    above = message or f"must be in {minimum} … {maximum}, got {{value}}"

    def rule(key: str, value):
        positive_int(key, value, minimum)
        if value > maximum:
            raise ValueError(f"{key} {above.format(value=value)}")
        return value

    return rule


def number(
    *,
    above: float | None = None,
    at_least: float | None = None,
    at_most: float | None = None,
    nullable: bool = False,
    message: str | None = None,
) -> Rule:
    """A number (int or float, bools refused) in the bounds, returned as a float; None where
    ``nullable``. ``message`` (after the key; ``{value!r}``, ``{value}`` substituted) replaces
    the generated one where the docs quote another wording."""
    bounds = [(f"> {above}", above, float.__gt__), (f">= {at_least}", at_least, float.__ge__)]
    bounds.append((f"<= {at_most}", at_most, float.__le__))
    bounds = [(text, bound, test) for text, bound, test in bounds if bound is not None]

    def rule(key: str, value):
        if value is None and nullable:
            return None
        ok = is_number(value) and all(test(float(value), float(b)) for _, b, test in bounds)
        if not ok:
            wanted = "a number " + " and ".join(text for text, _, _ in bounds)
            text = message or f"must be {wanted.strip()}, got {{value!r}}"
            raise ValueError(f"{key} {text.format(value=Shown(value))}")
        return float(value)

    return rule


def interval(
    low: float, high: float | None = None, *, open_low=False, open_high=False, nullable=False
) -> Rule:
    """A number in [low, high] (brackets by ``open_*``; no high: up to inf), as a float."""
    left, right = "(" if open_low else "[", ")" if open_high or high is None else "]"
    upper = "inf" if high is None else high

    def rule(key: str, value):
        if value is None and nullable:
            return None
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (value > low if open_low else value >= low)
        if ok and high is not None:
            ok = value < high if open_high else value <= high
        if not ok:
            raise ValueError(
                f"{key} must be a number in {left}{low}, {upper}{right}, got {shown(value)}"
            )
        return float(value)

    return rule


def spelled_one_of(*allowed: str) -> Rule:
    """One of ``allowed`` as written (``trainer.precision=32`` is the yaml's int 32)."""

    def rule(key: str, value):
        if str(value) not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(allowed)}; got {shown(value)}")
        return value

    return rule


#: keys of a component's yaml node that are lengen's, not options (besides Hydra's ``_target_``,
#: ``_partial_``, …): ``name`` names the choice
NODE_KEYS = ("name",)


def node_options(node: Mapping) -> dict:
    """The keys of a yaml node that are options: without Hydra's (``_target_``, ``_partial_``,
    …) and lengen's own (``name``)."""
    return {
        key: value
        for key, value in node.items()
        if key not in NODE_KEYS and not (key.startswith("_") and key.endswith("_"))
    }


# -- the config classes --------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Config:
    """Base of a component's typed config; subclasses add fields with ``option``."""

    #: the yaml node the options live under, for messages (``pe``, ``model``, …; empty for
    #: the top level)
    prefix: ClassVar[str] = ""
    #: keys that are not options pass through unchecked (a trainer's other Lightning keys)
    passthrough: ClassVar[bool] = False

    @classmethod
    def option_names(cls) -> list[str]:
        """The option names, in the order messages list them."""
        return [field.name for field in dataclasses.fields(cls)]

    @classmethod
    def defaults(cls) -> dict:
        """Every option with its default: what the component's yaml must show."""
        return {field.name: field.default for field in dataclasses.fields(cls)}

    @classmethod
    def from_keys(cls, keys: Mapping, *, owner: str | None = None):
        """The config from a yaml node's keys (missing keys take their defaults); each value
        checked by its field's rule. ValueError naming the key, also for a key ``owner`` (the
        component's name in the message) does not take."""
        names = cls.option_names()
        unknown = sorted(set(keys) - set(names))
        if unknown and not names and not cls.passthrough:  # "allowed: " would end the line
            raise ValueError(f"{cls.key(unknown[0])}: {owner or cls.__name__} takes no options")
        if unknown and not cls.passthrough:
            raise ValueError(
                f"{cls.key(unknown[0])}: {owner or cls.__name__} takes no such key; "
                f"allowed: {', '.join(names)}"
            )
        values = {}
        for field in dataclasses.fields(cls):
            value = keys.get(field.name, field.default)
            rule = field.metadata.get("rule")
            value = value if rule is None else rule(cls.key(field.name), value)
            values[field.name] = finite(
                cls.key(field.name), value, infinite=field.metadata.get("infinite", False)
            )
        return cls(**values)

    @classmethod
    def with_default(cls, name: str, default: Any) -> Any:
        """The field ``name`` with another default and the same rule: how a subclass whose
        config differs from its parent's in a default only says so (a task's alphabet)."""
        field = next(f for f in dataclasses.fields(cls) if f.name == name)
        return option(
            default, field.metadata.get("rule"), infinite=field.metadata.get("infinite", False)
        )

    @classmethod
    def key(cls, name: str) -> str:
        """An option's key as the user types it: ``pe.base``, or ``seed`` at the top level."""
        return f"{cls.prefix}.{name}" if cls.prefix else name


#: the older name of ``Config`` (#50 named every config so), for components written before it
Options = Config
