"""``data.seed``: the training stream's seed apart from the model's (``seed``). Null keeps
today's stream; a value changes the training batches and nothing else (model initialisation,
evaluation instances); run ids count it where it is set."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_train
from lengen.build import build
from lengen.checks import ConfigError
from lengen.data.task_data import TaskData
from lengen.identity import config_differences, run_id
from lengen.preflight import validate
from lengen.rundir import resolved_config


def first_batch(cfg) -> dict:
    data, _, _ = build(cfg)
    return data.train_batch(0)["inputs"]


def same_tensors(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_null_data_seed_gives_the_batches_of_the_seed():
    cfg = compose_train("seed=3")
    data, _, _ = build(cfg)
    # what build passed before data.seed existed: the run's seed
    options = dataclasses.asdict(data.cfg)
    before = TaskData(task=data.task, model_kind=data.model_kind, seed=3, **options)
    assert same_tensors(data.train_batch(0)["inputs"], before.train_batch(0)["inputs"])


def test_data_seed_changes_the_first_batch():
    assert not same_tensors(first_batch(compose_train()), first_batch(compose_train("data.seed=5")))


def test_data_seed_leaves_the_model_initialisation_alone():
    _, model, _ = build(compose_train())
    _, other, _ = build(compose_train("data.seed=5"))
    torch.testing.assert_close(model.state_dict(), other.state_dict(), rtol=0, atol=0)


def test_data_seed_leaves_the_evaluation_instances_alone():
    data, _, _ = build(compose_train())
    other, _, _ = build(compose_train("data.seed=5"))
    batch, other_batch = (next(d.eval_batches(32, samples=8, batch_size=8)) for d in (data, other))
    assert same_tensors(batch["inputs"], other_batch["inputs"])


def test_the_model_seed_alone_leaves_a_fixed_data_seed_stream_alone():
    crossed = compose_train("seed=1", "data.seed=0")
    assert same_tensors(first_batch(compose_train()), first_batch(crossed))
    _, model, _ = build(compose_train())
    _, other, _ = build(crossed)
    weights, other_weights = model.state_dict(), other.state_dict()
    assert not all(torch.equal(weights[k], other_weights[k]) for k in weights)


def test_a_set_data_seed_enters_the_run_id():
    assert run_id(compose_train("data.seed=1")) != run_id(compose_train("data.seed=2"))
    assert run_id(compose_train("data.seed=1")) != run_id(compose_train())


def test_a_null_data_seed_keeps_the_run_id_of_a_config_without_the_key():
    cfg = compose_train()
    older = OmegaConf.create(OmegaConf.to_container(cfg))
    del older.data["seed"]  # as configs were before the key existed
    assert run_id(cfg) == run_id(older)


def test_a_run_from_before_the_key_resumes_under_a_null_data_seed():
    saved = resolved_config(compose_train())
    del saved["data"]["seed"]
    assert config_differences(saved, resolved_config(compose_train())) == []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("data.seed=-1", "data.seed must be null or an integer in [0, 2^32 - 1], got -1"),
        ("eval.ratio_thresholds=[0.9,1.5]", "eval.ratio_thresholds must be a non-empty list "),
    ],
)
def test_bad_values_are_refused_in_one_line_naming_the_key(override, message):
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        validate(compose_train(override))
