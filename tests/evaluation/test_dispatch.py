"""``lengen.evaluation.evaluate`` scores a source as the source says (``evaluation_kind``)."""

from __future__ import annotations

import importlib

import pytest
from omegaconf import OmegaConf

from helpers import CONFIG_DIR
from lengen.evaluation import EVALUATORS, evaluate


@pytest.mark.parametrize(
    "yaml", sorted((CONFIG_DIR / "data").glob("*.yaml")), ids=lambda path: path.stem
)
def test_every_data_source_names_an_evaluation_that_exists(yaml):
    module, _, name = OmegaConf.load(yaml)._target_.rpartition(".")
    source = getattr(importlib.import_module(module), name)
    assert source.evaluation_kind in EVALUATORS


def test_a_source_naming_no_evaluation_is_refused():
    with pytest.raises(TypeError, match="^no evaluator for data of type object$"):
        evaluate(object(), None, [4], settings=None)
