"""tests/helpers.py's compose_train composes the group choices once and applies the value
overrides to a copy (helpers._composed): the config and the errors are Hydra's own compose's,
for group choices, value overrides in any order, dict values, recipes and refused keys."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from helpers import CONFIG_DIR, compose_train, yaml_choices


def hydra_compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=["debug=fast", *overrides])


CASES = [
    ("pe=alibi", "model=encoder_decoder", "model.d_model=16", "data.len=4"),
    ("model.d_model=16", "pe=t5", "eval.lengths=[10]", "model=decoder"),  # values before groups
    ("data=s5", "data.task.group=a5", "data.len=6"),  # a key the group's yaml brings
    ("model.mixers=[gated_deltanet,attention]", "model.mixer=deltanet"),  # group-like names
    ("pe=rope", "pe.scaling=yarn", "pe.scaling_factor=4.0", "pe.scaling=pi"),  # last one wins
    ("model.mixers=[{mixer:gated_deltanet,negative_eigenvalues:true},attention]",),  # a dict
    ("trainer=ddp", "data.batch_size=8", "logger=none", "eval.factors=[1,2]"),
    *[(f"experiment={name}", "seed=3") for name in yaml_choices("experiment")],
]


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(case) for case in CASES])
def test_the_config_is_hydras_compose(overrides):
    ours, hydras = compose_train(*overrides), hydra_compose(*overrides)
    assert OmegaConf.to_yaml(ours) == OmegaConf.to_yaml(hydras)
    assert OmegaConf.is_struct(ours) == OmegaConf.is_struct(hydras)


@pytest.mark.parametrize("overrides", [("data.lenn=3",), ("pe=rope", "pe.no_such_key=1")])
def test_a_refused_value_override_is_hydras_error(overrides):
    with pytest.raises(ConfigCompositionException) as hydras:
        hydra_compose(*overrides)
    with pytest.raises(ConfigCompositionException) as ours:
        compose_train(*overrides)
    assert str(ours.value) == str(hydras.value)
    assert str(ours.value.__cause__) == str(hydras.value.__cause__)


def test_value_overrides_leave_the_cached_group_config_alone():
    compose_train("pe=alibi", "model.d_model=16")
    assert compose_train("pe=alibi").model.d_model == hydra_compose("pe=alibi").model.d_model


def test_a_yaml_changed_since_its_first_parse_is_parsed_again(tmp_path):
    from helpers import _yaml_read_once

    def composed_seed() -> int:
        config_dir = str(tmp_path)
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"), _yaml_read_once():
            return compose(config_name="train").seed

    (tmp_path / "train.yaml").write_text("seed: 1\n")
    assert composed_seed() == 1
    (tmp_path / "train.yaml").write_text("seed: 22\n")
    assert composed_seed() == 22
