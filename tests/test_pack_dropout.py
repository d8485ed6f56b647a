"""Dropout and randomized positions in a CPU pack (members one after another): each member's
forward draws from the global generator reseeded as its solo run's training step reseeds it
(``LitModel.training_step``), so its losses are its solo run's exactly; elsewhere (a vmapped
pack, ``trainer.accelerator=auto``) they are still refused in one line."""

from __future__ import annotations

import pytest
import torch

from helpers import compose_train
from lengen.build import build
from lengen.data.source import IGNORE, mix_seed
from lengen.errors import ConfigError
from lengen.evaluation.metrics import loss_sum
from lengen.lit import LitModel
from lengen.pack import engine, pack_refusal, train_pack
from lengen.packable import RESEEDED_ACCELERATORS
from lengen.preflight import validate
from test_pack import losses, small

BASE = ("trainer.max_steps=6", "trainer.val_check_interval=6", "eval.lengths=[16]")
STEPS = (*BASE, "model.dropout=0.3")
RANDOMIZED = (*BASE, "pe.randomized=true", "pe.max_position=64")


def solo_dropout_losses(cfg) -> list[float]:
    """A solo run's training losses without Lightning, its generator reseeded before each
    step's forward as ``LitModel.training_step`` does (seed, step, 2, rank 0)."""
    data, model, _ = build(cfg)
    model.train()
    setup = LitModel(model, validate(cfg).optim, cfg.trainer.max_steps).configure_optimizers()
    optimizer, schedule = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
    found = []
    for step in range(cfg.trainer.max_steps):
        batch = data.train_batch(step)
        scored = max(float((batch["targets"] != IGNORE).sum()), 1.0)
        torch.manual_seed(mix_seed(cfg.seed, step, 2, 0))
        loss = loss_sum(model(**batch["inputs"]), batch["targets"]) / scored
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.trainer.gradient_clip_val)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        found.append(float(loss.detach()))
    return found


def test_a_cpu_pack_with_dropout_trains_each_members_solo_losses_exactly(tmp_path, single_thread):
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1)])
    for seed, cfg in enumerate(cfgs):
        packed = torch.tensor(losses(tmp_path / str(seed)), dtype=torch.float64)
        solo = torch.tensor(solo_dropout_losses(cfg), dtype=torch.float64)
        torch.testing.assert_close(packed, solo, rtol=0, atol=0)


def test_a_cpu_pack_with_randomized_positions_trains_each_members_solo_losses_exactly(
    tmp_path, single_thread
):
    # within one float32 step of ~3: seed 0's logged loss at step 1 differs in its last digit
    # (4.8e-7; a real solo run's equals the reference), its later steps are equal again, so the
    # weights are; without the reseed the draws differ and so do the losses, by far more
    cfgs = [small(*RANDOMIZED, f"seed={seed}") for seed in (0, 1)]
    train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1)])
    for seed, cfg in enumerate(cfgs):
        packed = torch.tensor(losses(tmp_path / str(seed)), dtype=torch.float64)
        solo = torch.tensor(solo_dropout_losses(cfg), dtype=torch.float64)
        torch.testing.assert_close(packed, solo, rtol=0, atol=1e-6)


@pytest.mark.parametrize("override", ["pe.randomized=true", "pe.start_offset=3"])
def test_random_positions_pack_on_the_cpu_accelerator_only(override):
    assert pack_refusal(compose_train(override, "trainer=cpu")) is None
    refused = pack_refusal(compose_train(override, "trainer.accelerator=auto"))
    assert refused.startswith(override) and "trainer.accelerator=cpu" in refused


def test_dropout_packs_on_the_cpu_accelerator():
    assert pack_refusal(compose_train("model.dropout=0.1", "trainer=cpu")) is None


def test_dropout_where_the_accelerator_may_be_a_gpu_is_refused_naming_the_cpu():
    refusal = pack_refusal(compose_train("model.dropout=0.1", "trainer.accelerator=auto"))
    assert refusal.startswith("model.dropout=0.1 cannot train in a pack")
    assert "trainer.accelerator=cpu" in refusal and "\n" not in refusal


def test_the_reseeded_accelerators_are_the_looped_devices():
    assert all(engine.LOOPED.get(name) for name in RESEEDED_ACCELERATORS)


def test_a_vmapped_pack_with_dropout_is_refused_before_anything_is_written(
    tmp_path, monkeypatch, single_thread
):
    monkeypatch.setitem(engine.LOOPED, "cpu", False)
    cfgs = [small(*STEPS, f"seed={seed}") for seed in (0, 1)]
    with pytest.raises(ConfigError, match=r"model.dropout=0.3 cannot train in a pack .* on cpu"):
        train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1)])
    assert not any(tmp_path.iterdir())
