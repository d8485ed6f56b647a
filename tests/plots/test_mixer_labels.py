"""Figure legends name mixers as the mixers' configs name them (issue #49): ``Gated DeltaNet
(neg. eig.) · nope``, a layer list run-length encoded, today's long name where a mixer has no
display name or two short names would be equal. Tables keep the settings as written."""

from __future__ import annotations

import csv

import pytest

from helpers import CONFIG_DIR, ROOT
from lengen.model.mixers.config.base import mixer_config_class, mixer_display, mixer_target
from lengen.plots.names import line_names

FLIP_FLOP = ROOT / "results" / "reproductions" / "encoding_or_recurrence" / "flip_flop"
GATED_NEGATIVE = '{"mixer":"gated_deltanet","negative_eigenvalues":true}'


def names_of(*arms: tuple[str, str]) -> list[str]:
    """(pe, settings) per arm, one table -> the arms' line names, in order."""
    rows = [
        {"task": "copy", "model": "decoder", "train_len": 8, "config_hash": f"{index:010d}",
         "pe": pe, "settings": settings}
        for index, (pe, settings) in enumerate(arms)
    ]  # fmt: skip
    names = line_names(rows)
    return [names[row["config_hash"]] for row in rows]


def test_the_flip_flop_legend_names_each_arm_by_its_mixers():
    with (FLIP_FLOP / "summary.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert sorted(set(line_names(rows).values())) == [
        "3× Gated DeltaNet (neg. eig.) + attention · rope",
        "DeltaNet · nope",
        "GLA · nope",
        "Gated DeltaNet (neg. eig.) · nope",
        "fox",
        "path",
        "rope",
    ]


def test_an_option_the_mixer_names_by_a_word_is_shown_by_it():
    settings = "model.mixer.mixer=gated_deltanet, model.mixer.negative_eigenvalues=true"
    assert names_of(("nope", settings), ("rope", ""))[0] == "Gated DeltaNet (neg. eig.) · nope"


def test_an_option_without_a_word_is_shown_with_its_value():
    settings = "model.mixer.mixer=gla, model.mixer.state_init=passing"
    assert names_of(("nope", settings), ("rope", ""))[0] == "GLA (state_init=passing) · nope"


def test_a_layer_list_is_run_length_encoded():
    layers = f'model.mixers=[{GATED_NEGATIVE},{GATED_NEGATIVE},"gla","attention","attention"]'
    expected = "2× Gated DeltaNet (neg. eig.) + GLA + 2× attention · rope"
    assert names_of(("rope", layers), ("rope", ""))[0] == expected


def test_other_settings_stay_beside_the_mixers():
    names = names_of(
        ("nope", "model.d_model=64, model.mixer=gla"),
        ("nope", "model.d_model=128, model.mixer=deltanet"),
    )
    assert names == ["GLA · nope [d_model=64]", "DeltaNet · nope [d_model=128]"]


def test_a_mixer_without_a_display_name_keeps_the_long_name():
    user = "model.mixer.mixer=my_package.MyMixer, model.mixer.width=3"
    names = names_of(("nope", user), ("nope", "model.mixer=gla"), ("nope", "model.mixer=lstm"))
    assert names == [
        "nope [mixer.mixer=my_package.MyMixer]",
        "GLA · nope",
        "LSTM · nope",
    ]


def test_arms_whose_short_names_would_be_equal_keep_their_long_names():
    # one GLA layer cycled over the stack is every layer GLA: two configurations, one short name
    names = names_of(
        ("nope", "model.mixer=gla"), ("nope", 'model.mixers=["gla"]'), ("nope", "model.mixer=lstm")
    )
    assert names == ["nope [mixer=gla]", 'nope [mixers=["gla"]]', "LSTM · nope"]


SHIPPED = sorted(path.stem for path in (CONFIG_DIR / "model" / "mixer").glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_mixer_declares_its_display_name(name):
    config_class = mixer_config_class(mixer_target(name, "model.mixer"))
    assert config_class.display_name and mixer_display(name) == config_class.display_name


def test_no_two_shipped_mixers_share_a_display_name():
    assert len({mixer_display(name) for name in SHIPPED}) == len(SHIPPED)
