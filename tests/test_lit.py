"""LitModel (lengen.lit) options: model.compile keeps the checkpointed weights; AdamW is fused."""

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


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_compiled_run_trains_through_the_compiled_forward_and_evaluates(tmp_path, monkeypatch):
    # end to end: train.py's run with model.compile=true (an inductor compile, ~20 s on CPU)
    from helpers import compose_train
    from lengen import lit
    from lengen.train import run

    compiled_calls = []
    real_compile = torch.compile

    def counting_compile(function, **kwargs):
        compiled = real_compile(function, **kwargs)
        return lambda *a, **k: compiled_calls.append(1) or compiled(*a, **k)

    monkeypatch.setattr(lit.torch, "compile", counting_compile)
    cfg = compose_train(
        "model.compile=true",
        "model.d_model=16",
        "model.d_ff=32",
        "trainer.max_steps=6",
        "data.curriculum=fixed",  # one training shape: one compile, not one per length
    )
    results = run(cfg, run_dir=tmp_path / "run")
    assert len(compiled_calls) == 6  # every training step
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
    assert all(row["loss"] is not None for row in results["eval"])
