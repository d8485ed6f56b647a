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
        # one layer, two heads: a smaller graph to trace, lower and compile (forward, backward)
        "model.d_model=16",
        "model.n_layers=1",
        "model.n_heads=2",
        "model.d_ff=32",
        "trainer.max_steps=6",
        "data.curriculum=fixed",  # one training shape: one compile, not one per length
        "eval.factors=[1,2]",  # evaluation is eager: two lengths show it ran
        "eval.diagnostics=false",
    )
    results = run(cfg, run_dir=tmp_path / "run")
    assert len(compiled_calls) == 6  # every training step
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
    assert all(row["loss"] is not None for row in results["eval"])


def test_bf16_autocast_trains_with_fused_adamw_and_clips_its_gradients(monkeypatch):
    # Lightning refuses clipping for fused optimisers under any autocast (for fp16's loss
    # scaler); bf16 has no scaler, so LitModel clips itself and keeps the fused kernel
    import pytorch_lightning as pl

    from lengen.lit import DataModule

    norms = []
    real_clip = torch.nn.utils.clip_grad_norm_

    def clip(parameters, max_norm, **kwargs):
        parameters = list(parameters)
        real_clip(parameters, max_norm, **kwargs)
        norms.append(
            float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in parameters])))
        )

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", clip)

    class Tokens:
        def train_batches(self, start_step=0):
            while True:
                tokens = torch.randint(0, 8, (2, 9))
                yield {"inputs": {"tokens": tokens[:, :-1]}, "targets": tokens[:, 1:]}

        def val_batches(self):
            return []

    lit = LitModel(tiny_model(), OPTIM, max_steps=3)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_steps=3, precision="bf16-mixed", logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        limit_val_batches=0, num_sanity_val_steps=0, gradient_clip_val=1e-3,
    )  # fmt: skip
    trainer.fit(lit, datamodule=DataModule(Tokens()))
    assert trainer.optimizers[0].defaults["fused"] is True
    assert len(norms) == 3 and max(norms) <= 1e-3 * (1 + 1e-3)


def test_fused_can_be_switched_off():
    optimizer = LitModel(tiny_model(), OPTIM, max_steps=10, fused=False).configure_optimizers()
    assert not optimizer["optimizer"].defaults["fused"]
