"""A recurrent layer's state kept between training batches (``state_init=passing`` and
``fitted_noise``, ``lengen.model.mixers.state``) travels in the checkpoint (``lengen.lit``), so
a resumed run's next batch starts where the uninterrupted run's would; a model without one
writes nothing for it."""

from __future__ import annotations

import io

import pytest
import torch

from helpers import compose_train
from lengen.build import build
from lengen.lit import LitModel

pytestmark = pytest.mark.usefixtures("single_thread")


def trained_one_batch(init: str):
    cfg = compose_train(f"model.mixers=[{{mixer:gla,state_init:{init}}},lstm]", "pe=nope",
                        "model.d_model=16")  # fmt: skip
    data, model, _ = build(cfg)
    model.train()
    model(**data.train_batch(0)["inputs"])  # records the final states
    return cfg, data, model


def saved_and_loaded(lit: LitModel) -> dict:
    checkpoint: dict = {}
    lit.on_save_checkpoint(checkpoint)
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)  # as a checkpoint is read back


@pytest.mark.parametrize("init", ["passing", "fitted_noise"])
def test_a_resumed_model_starts_the_next_batch_from_the_saved_state(init):
    cfg, data, model = trained_one_batch(init)
    checkpoint = saved_and_loaded(LitModel(model, cfg.optim, max_steps=4))
    _, resumed, _ = build(cfg)
    resumed.load_state_dict(model.state_dict())
    LitModel(resumed, cfg.optim, max_steps=4).on_load_checkpoint(checkpoint)
    resumed.train()
    batch = data.train_batch(1)["inputs"]
    torch.manual_seed(3)
    expected = model(**batch)
    torch.manual_seed(3)
    assert torch.equal(resumed(**batch), expected)


def test_without_a_kept_state_the_checkpoint_carries_none():
    cfg = compose_train("model.mixer=gla", "pe=nope", "model.d_model=16")
    data, model, _ = build(cfg)
    model.train()
    model(**data.train_batch(0)["inputs"])
    assert (
        saved_and_loaded(LitModel(model, cfg.optim, max_steps=4))["lengen"]["recurrent_states"]
        == {}
    )


def test_a_checkpoint_written_before_the_key_loads_and_changes_nothing():
    cfg, _, model = trained_one_batch("passing")
    LitModel(model, cfg.optim, max_steps=4).on_load_checkpoint({"lengen": {}})
    assert model.stack.blocks[0].attn.interventions.passed is not None  # left as it was
