"""build(): a config's objects, and the meta-device build that checks components lengen does
not know (the refusals themselves: tests/test_preflight.py)."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_train, fresh_python
from lengen.build import build, shapes_only


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


def test_shapes_only_leaves_other_computation_alone():
    with shapes_only():
        layer = torch.nn.Linear(3, 4)
        table = torch.arange(6).reshape(2, 3) * 2  # neither a weight nor an initialiser
    assert layer.weight.device.type == "meta"
    torch.testing.assert_close(table, torch.tensor([[0, 2, 4], [6, 8, 10]]))
    assert torch.nn.Linear(3, 4).weight.device.type == "cpu"  # the context is gone


def test_a_meta_build_does_not_import_torch_dynamo():
    """Meta kernels of random initialisers import torch._dynamo on first use (about 1 s of a
    refused command); the meta build skips them. Checked in a fresh interpreter."""
    code = (
        "import sys; from helpers import compose_train; from lengen.build import build; "
        "build(compose_train('pe=rope'), meta=True); "
        "print('torch._dynamo' in sys.modules)"
    )
    assert fresh_python(code).splitlines()[-1] == "False"
