"""build(): the meta-device build that checks a command line before anything runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

from helpers import compose_train
from lengen.build import build, check_components, shapes_only
from lengen.checks import ConfigError


@pytest.mark.parametrize("overrides", [("pe=rope",), ("pe=learned", "model=encoder_decoder")])
def test_the_meta_build_has_the_real_models_parameters(overrides):
    cfg = compose_train(*overrides)
    _, meta_model, _ = build(cfg, meta=True)
    _, model, _ = build(cfg)
    meta_shapes = {name: p.shape for name, p in meta_model.state_dict().items()}
    assert meta_shapes == {name: p.shape for name, p in model.state_dict().items()}
    layers = (torch.nn.Linear, torch.nn.Embedding, torch.nn.LayerNorm)
    weights = [p for m in meta_model.modules() if isinstance(m, layers) for p in m.parameters()]
    assert weights and {p.device.type for p in weights} == {"meta"}


def test_the_meta_build_refuses_what_the_real_build_refuses():
    cfg = compose_train("pe=cope", "model=encoder")
    with pytest.raises(ConfigError, match="^pe: CoPE is defined for causal attention only"):
        build(cfg, meta=True)


def test_shapes_only_leaves_other_computation_alone():
    with shapes_only():
        layer = torch.nn.Linear(3, 4)
        table = torch.arange(6).reshape(2, 3) * 2  # neither a weight nor an initialiser
    assert layer.weight.device.type == "meta"
    torch.testing.assert_close(table, torch.tensor([[0, 2, 4], [6, 8, 10]]))
    assert torch.nn.Linear(3, 4).weight.device.type == "cpu"  # the context is gone


def fresh_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (tests/ importable) -> its stripped stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": "tests"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_meta_build_does_not_import_torch_dynamo():
    """Meta kernels of random initialisers import torch._dynamo on first use (about 1 s of a
    refused command); the meta build skips them. Checked in a fresh interpreter."""
    code = (
        "import sys; from helpers import compose_train; from lengen.build import build; "
        "build(compose_train('pe=rope'), meta=True); "
        "print('torch._dynamo' in sys.modules)"
    )
    assert fresh_python(code).splitlines()[-1] == "False"


# -- check_components: every shipped component's checks, without torch ---------------------
#: command lines refused by a component's own check (data source, encoding, model)
COMPONENT_REFUSALS = [
    (("pe=cope", "model=encoder"), "pe: CoPE is defined for causal attention only"),
    (("pe=xpos", "model=encoder_decoder"), "pe: XPos is defined for causal attention only"),
    (("pe=learned", "pe.policy=error"), "pe.policy=error: evaluation needs 257 positions"),
    (("pe.randomized=true",), "pe.max_position must be an integer >= 257"),
    (("pe=rope", "pe.base=0.5"), "pe.base must be > 1"),
    (("data.task.n_symbols=1",), "data.task.n_symbols must be an integer >= 2"),
    (("data=grid_locate", "model=encoder", "pe=t5"), "pe: T5RelativeBias has no form for"),
    (("data=grid_locate",), "model=decoder: task grid_locate has positions on 2 axes"),
    (("data.min_len=0",), "data.min_len must be a positive integer"),
    (("data=shapes", "model=encoder", "data.len=17"), "data.len must be a multiple of"),
]  # the model's keys are validate's (lengen.options): tests/test_configs.py


@pytest.mark.parametrize(("overrides", "expected"), COMPONENT_REFUSALS, ids=str)
def test_check_components_refuses_what_the_build_refuses(overrides, expected):
    cfg = compose_train(*overrides)
    for check in (check_components, lambda cfg: build(cfg, meta=True)):
        with pytest.raises(ConfigError, match=f"^{re.escape(expected)}"):
            check(cfg)


def test_component_refusals_import_no_torch():
    """Each refusal of the table, in one fresh interpreter: torch is never loaded."""
    code = (
        "import sys; from helpers import compose_train; from lengen.build import "
        "check_components; from lengen.lazy import is_loaded\n"
        f"for overrides, _ in {COMPONENT_REFUSALS!r}:\n"
        "    try:\n"
        "        check_components(compose_train(*overrides))\n"
        "    except ValueError:\n"
        "        pass\n"
        "    print(overrides, is_loaded('torch'))"
    )
    lines = fresh_python(code).splitlines()
    assert len(lines) == len(COMPONENT_REFUSALS)
    assert [line for line in lines if line.endswith("True")] == []


@pytest.mark.parametrize(
    "overrides", [(), ("pe=learned", "model=encoder_decoder"), ("data=shapes", "model=encoder")]
)
def test_check_components_covers_lengens_own_components(overrides):
    assert check_components(compose_train(*overrides)) is True


def test_check_components_leaves_the_flex_kernel_to_the_build():
    assert check_components(compose_train("model.attention=flex")) is False
