"""lengen.model.options: the models' facts the early checks read without torch agree with the
classes, and the module imports no torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import lengen.model
from lengen.model.options import KINDS, STACKS, kind_of
from lengen.model.transformer import Stack
from lengen.pe import NoPE


@pytest.mark.parametrize("name", lengen.model.__all__)
def test_kinds_agree_with_the_classes(name):
    cls = getattr(lengen.model, name)
    assert kind_of(f"lengen.model.{name}") == cls.kind == KINDS[name]


@pytest.mark.parametrize("name", lengen.model.__all__)
def test_stacks_agree_with_the_built_models(name):
    cls = getattr(lengen.model, name)
    model = cls(pe=NoPE, vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=16)
    built = tuple(m.pe.causal for m in model.modules() if isinstance(m, Stack))
    assert built == STACKS[cls.kind]


def test_a_model_of_the_users_is_not_known():
    assert kind_of("mypackage.models.MyDecoder") is None


def test_options_import_no_torch():
    code = "import sys, lengen.model.options; print('torch' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
