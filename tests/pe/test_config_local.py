"""lengen.pe.config: a local mask (``pe.window``, ``pe.chunk``) on an encoding that computes
attention itself is refused by its typed config, naming the key, before torch (issue #51 item
8: P52, P52b–d); a schedule's unknown layer lists only names a layer may be (P31)."""

from __future__ import annotations

import pytest
from hydra.utils import get_class
from omegaconf import OmegaConf

from helpers import CONFIG_DIR, compose_train, fresh_python, yaml_choices
from lengen import preflight
from lengen.errors import ConfigError
from lengen.pe.config import config_of
from lengen.pe.config.base import EncodingContext, config_class

CONTEXT = EncodingContext(d_model=32, n_heads=4, train_positions=33, max_positions=65)


def _target(name: str) -> str:
    return OmegaConf.load(CONFIG_DIR / "pe" / f"{name}.yaml")._target_


OWN_ATTENTION = [
    name
    for name in yaml_choices("pe")
    if (options := config_of(_target(name))) is not None and options.computes_attention
]


def test_the_own_attention_encodings_are_found():
    assert {"fox", "path", "path_fox", "stick_breaking"} <= set(OWN_ATTENTION)


@pytest.mark.parametrize("name", yaml_choices("pe"))
def test_the_config_fact_agrees_with_the_attention_hook(name):
    from lengen.pe.base import PositionalEncoding

    cls = get_class(_target(name))
    options = config_class(_target(name))
    hook = cls.attention is not PositionalEncoding.attention
    assert options is None or options.computes_attention == hook


@pytest.mark.parametrize("local", ["window", "chunk"])
@pytest.mark.parametrize("name", OWN_ATTENTION)
def test_a_local_mask_is_refused_by_the_config_naming_its_key(name, local):
    options = config_of(_target(name))
    with pytest.raises(ValueError, match=rf"^pe\.{local}=4: \w+ computes attention itself"):
        options.from_keys({local: 4}).check(CONTEXT, name)


def test_a_layer_of_a_schedule_is_refused_with_its_own_key():
    cfg = compose_train("pe=irope", "pe.layers=[{pe: fox, chunk: 8}, nope]")
    with pytest.raises(ConfigError, match=r"^pe\.layers\.0\.chunk=8: ForgettingAttention"):
        preflight.check_components(cfg)


def test_the_refusal_imports_no_torch():
    code = (
        "import sys; from helpers import compose_train; from lengen import preflight\n"
        "cfg = compose_train('pe=stick_breaking', 'pe.window=4')\n"
        "try:\n    preflight.check_components(cfg)\nexcept Exception as e: print(e)\n"
        "print('torch' in sys.modules)"
    )
    refusal, imported = fresh_python(code).splitlines()[-2:]
    assert refusal.startswith("pe.window=4: StickBreaking computes attention itself")
    assert imported == "False"


def test_an_unknown_layer_lists_only_what_a_layer_may_be():
    cfg = compose_train("pe=rnope", "pe.layers=[bogus]")
    with pytest.raises(ConfigError) as refused:
        preflight.check_components(cfg)
    listed = str(refused.value).partition("must be one of ")[2].partition(";")[0].split(", ")
    assert "rope" in listed and "fox" in listed
    assert not {"rnope", "rnope_swa", "irope", "sinusoidal", "learned"} & set(listed)
