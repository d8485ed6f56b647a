"""lengen.options: the run's typed configs. The models' facts the early checks read without
torch agree with the classes, and the module imports no torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import lengen.model
from lengen.model.config import model_config
from lengen.model.transformer import Stack
from lengen.pe import NoPE


@pytest.mark.parametrize("name", lengen.model.__all__)
def test_a_model_class_consumes_the_config_found_without_torch(name):
    cls = getattr(lengen.model, name)
    assert (
        cls.Options
        is model_config(f"lengen.model.{name}")
        is model_config(f"lengen.model.transformer.{name}")
    )


@pytest.mark.parametrize("name", lengen.model.__all__)
def test_stacks_agree_with_the_built_models(name):
    cls = getattr(lengen.model, name)
    model = cls(pe=NoPE, vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=16)
    built = tuple(m.pe.causal for m in model.modules() if isinstance(m, Stack))
    assert built == cls.Options.stacks


def test_a_model_of_the_users_is_not_known():
    assert model_config("mypackage.models.MyDecoder") is None


def test_options_import_no_torch():
    code = "import sys, lengen.options, lengen.model; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
