"""LitModel reads its training statistics back to the host only now and then (issue #46 item 2):
the logged rows and weights do not depend on how often, and a diverged step is still named."""

from __future__ import annotations

import tracemalloc
from functools import partial

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import CSVLogger

import lengen.lit
from lengen.checks import TrainingDiverged
from lengen.lit import DataModule, LitModel, quiet_known_noise, warmup_cosine
from lengen.model import DecoderOnly
from lengen.pe import RoPE

pytestmark = pytest.mark.usefixtures("single_thread")

OPTIM = {"lr": 1e-2, "weight_decay": 0.1, "warmup_steps": 3}


class RandomTokens:
    """Random next-token batches (4 × 12, vocabulary 8), each a function of its step."""

    def train_batches(self, start_step: int = 0):
        step = start_step
        while True:
            tokens = torch.randint(0, 8, (4, 13), generator=torch.Generator().manual_seed(step))
            yield {"inputs": {"tokens": tokens[:, :-1]}, "targets": tokens[:, 1:]}
            step += 1

    def val_batches(self):
        return []


def fit(tmp_path, steps: int, **lit_options) -> tuple[LitModel, str]:
    """``steps`` steps of a tiny RoPE decoder, a row logged every 2 steps: (module, metrics.csv)."""
    quiet_known_noise()
    torch.manual_seed(0)
    model = DecoderOnly(pe=partial(RoPE), vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    lit = LitModel(model, OPTIM, max_steps=steps, **lit_options)
    trainer = pl.Trainer(
        accelerator="cpu", devices=1, max_steps=steps, logger=CSVLogger(tmp_path),
        log_every_n_steps=2, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0,
        gradient_clip_val=1.0,
    )  # fmt: skip
    trainer.fit(lit, datamodule=DataModule(RandomTokens()))
    return lit, (tmp_path / "lightning_logs" / "version_0" / "metrics.csv").read_text()


def test_rows_and_weights_do_not_depend_on_how_often_the_host_reads(tmp_path):
    every, fifth = fit(tmp_path / "every", 9), fit(tmp_path / "fifth", 9, sync_every=5)
    assert every[1] == fifth[1] and every[1].count("\n") == 5  # header + steps 1, 3, 5, 7
    assert every[0].last_logged == fifth[0].last_logged
    assert isinstance(fifth[0].last_logged["train/loss"], float)  # read at the end of training
    for a, b in zip(every[0].parameters(), fifth[0].parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_a_divergence_read_later_names_the_step_where_it_happened(tmp_path, monkeypatch):
    real, calls, trained = lengen.lit.batch_stats, [], []

    def diverging(logits, targets, **kwargs):
        calls.append(1)
        stats = real(logits, targets, **kwargs)
        return {**stats, "loss_sum": float("nan")} if len(calls) == 3 else stats

    monkeypatch.setattr(lengen.lit, "batch_stats", diverging)
    real_read = LitModel.read_training_stats

    def read(self):
        trained.append(self.global_step)
        return real_read(self)

    monkeypatch.setattr(LitModel, "read_training_stats", read)
    with pytest.raises(TrainingDiverged, match=r"^training diverged at step 2: the loss is nan"):
        fit(tmp_path, 9, sync_every=100)
    assert trained == [1, 3]  # read at the logged rows only: step 2's loss a step after it


def test_a_checkpoint_is_refused_while_an_unread_step_diverged():
    torch.manual_seed(0)
    model = DecoderOnly(pe=partial(RoPE), vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32)
    lit = LitModel(model, OPTIM, max_steps=10, sync_every=100)
    stats = {"tokens": torch.tensor(3), "correct_tokens": torch.tensor(1)}
    lit._pending = [
        (4, {"step": 4}, {**stats, "loss_sum": torch.tensor(2.0)}),
        (5, {"step": 5}, {**stats, "loss_sum": torch.tensor(float("inf"))}),
    ]
    checkpoint: dict = {}
    with pytest.raises(TrainingDiverged, match=r"^training diverged at step 5: the loss is inf"):
        lit.on_save_checkpoint(checkpoint)
    assert "lengen" not in checkpoint


def test_the_schedule_is_warmup_cosine_at_every_step_and_holds_after_max_steps():
    expected = [warmup_cosine(s, warmup_steps=7, max_steps=50, min_lr_ratio=0.1) for s in range(51)]
    scheduler = LitModel(
        DecoderOnly(pe=partial(RoPE), vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32),
        {**OPTIM, "warmup_steps": 7, "min_lr_ratio": 0.1},
        max_steps=50,
    ).configure_optimizers()["lr_scheduler"]["scheduler"]
    assert [scheduler.lr_lambdas[0](s) for s in range(51)] == expected
    assert scheduler.lr_lambdas[0](80) == expected[50]


def test_a_huge_max_steps_builds_its_schedule_without_memory_in_the_horizon():
    # ES05 (trial re-run 2026-12-02): a table of max_steps + 1 floats was built before the first
    # step, so trainer.max_steps=10**12 never started and ignored SIGTERM; 10**6 steps held
    # ~30 MB in the old table, well over the bound here
    lit = LitModel(
        DecoderOnly(pe=partial(RoPE), vocab_size=8, d_model=16, n_layers=1, n_heads=2, d_ff=32),
        {**OPTIM, "warmup_steps": 7, "min_lr_ratio": 0.1},
        max_steps=10**6,
    )
    tracemalloc.start()
    try:
        scheduler = lit.configure_optimizers()["lr_scheduler"]["scheduler"]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    assert scheduler.lr_lambdas[0](10**6) == pytest.approx(0.1)
