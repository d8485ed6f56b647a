"""lengen.schema: NaN, ±inf and integers past int64 are refused for every option of every typed
config, in one place (``Config.from_keys``), naming the key (issue #51 item 7: P11, P13, P15,
P16, P23b, P35, V03, V09, ES06)."""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil

import pytest

import lengen
from helpers import compose_train
from lengen import preflight
from lengen.errors import ConfigError
from lengen.schema import Config, finite, option


def _typed_configs() -> list[type[Config]]:
    """Every typed config class of lengen's torch-free modules (their import is cheap)."""
    for module in ("lengen.options", "lengen.model.config", "lengen.data.text"):
        importlib.import_module(module)
    for package in ("lengen.pe.config", "lengen.data.tasks"):
        found = importlib.import_module(package)
        for info in pkgutil.iter_modules(found.__path__):
            importlib.import_module(f"{package}.{info.name}")
    seen, todo = [], list(Config.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls not in seen and cls.__module__.startswith(lengen.__name__):
            seen.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(seen, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def _float_options() -> list[tuple[type[Config], str]]:
    """(config, option) for every option whose default is a float."""
    return [
        (cls, field.name)
        for cls in _typed_configs()
        for field in dataclasses.fields(cls)
        if isinstance(field.default, float) and not field.metadata.get("infinite")
    ]


FLOAT_OPTIONS = _float_options()


def test_the_float_options_are_found():
    names = {f"{cls.__name__}.{name}" for cls, name in FLOAT_OPTIONS}
    assert {"ForgettingAttentionConfig.gate_bias_init", "OptimConfig.lr"} <= names


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(
    ("config", "name"), FLOAT_OPTIONS, ids=[f"{c.__name__}.{n}" for c, n in FLOAT_OPTIONS]
)
def test_every_float_option_refuses_a_non_finite_value(config, name, value):
    with pytest.raises(ValueError) as refused:
        config.from_keys({name: value})
    assert str(refused.value).startswith(f"{config.key(name)} must "), refused.value


def test_an_option_that_documents_inf_takes_it():
    @dataclasses.dataclass(frozen=True)
    class Limit(Config):
        prefix = "x"
        ceiling: float = option(1.0, infinite=True)

    assert Limit.from_keys({"ceiling": math.inf}).ceiling == math.inf
    with pytest.raises(ValueError, match=r"^x\.ceiling must be a number \(inf allowed\), got nan"):
        Limit.from_keys({"ceiling": math.nan})


def test_a_list_of_numbers_refuses_inf():
    with pytest.raises(ValueError, match=r"^eval\.factors must hold finite numbers, got inf$"):
        finite("eval.factors", [1, 2.0, math.inf])


def test_an_integer_past_int64_is_refused():
    with pytest.raises(ValueError, match=r"^trainer\.max_steps must be an integer within"):
        finite("trainer.max_steps", 2**63)
    assert finite("trainer.max_steps", 2**63 - 1) == 2**63 - 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ("pe.ssmax=true pe.ssmax_init=inf", "pe.ssmax_init must be a finite number, got inf"),
        (
            "pe.attn_temperature_tuning=true pe.attn_scale=inf",
            "pe.attn_scale must be a finite number, got inf",
        ),
        ("pe=fox pe.gate_bias_init=nan", "pe.gate_bias_init must be a finite number, got nan"),
        ("pe=fox pe.gate_bias_init=-inf", "pe.gate_bias_init must be a finite number, got -inf"),
        ("pe=pope pe.base=inf", "pe.base must be a finite number, got inf"),
        (
            "pe=irope model.n_layers=4 +pe.layers.3.attn_scale=inf",
            "pe.layers.3.attn_scale must be a finite number, got inf",
        ),
        ("optim.lr=inf", "optim.lr must be a finite number, got inf"),
        ("optim.weight_decay=inf", "optim.weight_decay must be a finite number, got inf"),
        ("trainer.max_steps=9223372036854775808", "trainer.max_steps must be an integer within"),
    ],
)
def test_the_trials_values_are_refused_by_the_precheck(overrides, message):
    cfg = compose_train(*overrides.split())
    with pytest.raises(ConfigError) as refused:
        preflight.validate(cfg)
        preflight.check_components(cfg)
    assert str(refused.value).startswith(message)
