"""lengen.attention_maps.map_refusal: maps too large to form are refused before the instances
are drawn, naming plot.py's option to change (``--length`` or ``--samples``), the length asked
for and the largest allowed value (issue #51 item 8: G11 said "length: … got 200001" for
``--length 100000``; G12 named ``length`` and a product for ``--samples 100000``, after 29 s)."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_train
from lengen.attention_maps import map_refusal
from lengen.build import build


@pytest.fixture(scope="module")
def models():
    sizes = ("model.d_model=32", "data.len=4", "eval.lengths=[4]")
    return {pe: build(compose_train(f"pe={pe}", *sizes))[1] for pe in ("stick_breaking", "rope")}


def inputs(tokens: int) -> dict:
    return {"tokens": torch.zeros(1, tokens, dtype=torch.long)}  # one instance, (1, T)


def test_a_length_past_the_map_limit_names_the_option_and_the_tokens(models):
    message = map_refusal(models["rope"], inputs(200001), 100000, 16)
    assert message.startswith("--length 100000: its sequences hold 200,001 tokens")
    assert message.endswith("allowed: a shorter --length")


def test_too_many_instances_name_samples_and_the_most_allowed(models):
    message = map_refusal(models["stick_breaking"], inputs(33), 16, 100000)
    heads = 4
    most = (1 << 24) // (heads * 33 * 33)
    assert message.startswith("--samples 100000: StickBreaking computes attention itself")
    assert message.endswith(f"allowed: --samples {most} or fewer")


def test_what_fits_is_not_refused(models):
    assert map_refusal(models["stick_breaking"], inputs(33), 16, 16) is None
    assert map_refusal(models["rope"], inputs(33), 16, 100000) is None
