"""Training options: model.compile keeps the checkpointed weights; AdamW is fused."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from lengen.lit import LitModel
from lengen.model import DecoderOnly
from lengen.pe import RoPE

pytestmark = pytest.mark.usefixtures("single_thread")

OPTIM = {"lr": 1e-3, "weight_decay": 0.1, "warmup_steps": 1}


def tiny_model() -> DecoderOnly:
    torch.manual_seed(0)
    return DecoderOnly(pe=partial(RoPE), vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)


def test_compile_keeps_the_state_dict_keys():
    # torch.compile wraps the forward only: checkpoints of compiled runs load into eager models
    eager = LitModel(tiny_model(), OPTIM, max_steps=10)
    compiled = LitModel(tiny_model(), OPTIM, max_steps=10, compile=True)
    assert compiled._compiled_forward is not None
    assert list(compiled.state_dict()) == list(eager.state_dict())


def test_adamw_is_fused_on_cpu():
    optimizer = LitModel(tiny_model(), OPTIM, max_steps=10).configure_optimizers()["optimizer"]
    assert optimizer.defaults["fused"] is True
