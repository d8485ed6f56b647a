"""A recurrent mixer's initial-state interventions (``state_init``, lengen.model.mixers.state)
cannot train in a pack (``lengen.packable``): refused in one line naming the entry; truncated
BPTT alone packs."""

from __future__ import annotations

import pytest

from helpers import compose_train
from lengen.packable import pack_refusal


@pytest.mark.parametrize(
    ("override", "key"),
    [("model.mixer={mixer:gla,state_init:noise,state_noise_std:0.1}", "model.mixer.state_init=noise"),
     ("model.mixers=[attention,{mixer:gla,state_init:passing}]", "model.mixers.1.state_init=passing"),
     ("model.mixer={mixer:lstm,state_init:fitted_noise}", "model.mixer.state_init=fitted_noise")],
)  # fmt: skip
def test_a_kept_or_drawn_initial_state_is_refused_naming_its_entry(override, key):
    refusal = pack_refusal(compose_train(override, "pe=nope"))
    assert refusal is not None and refusal.startswith(key), refusal
    assert "\n" not in refusal and refusal.endswith("hydra.sweeper.pack=1")


@pytest.mark.parametrize(
    "override", ["model.mixer=gla", "model.mixer={mixer:gla,tbptt:4}", "model.mixers=[gla,lstm]"]
)
def test_zero_initial_states_pack(override):
    assert pack_refusal(compose_train(override, "pe=nope")) is None
