"""Every encoding packs or is refused up front (glob-driven over configs/pe/*.yaml): a pack of
two trains a few steps, each member's losses equal a plain training loop's of its own model
(what a solo run computes each step), and both members write their results."""

from __future__ import annotations

import pytest
import torch

from helpers import yaml_choices
from lengen.build import build
from lengen.data.source import IGNORE
from lengen.evaluation.metrics import loss_sum
from lengen.lit import LitModel
from lengen.pack import pack_refusal, train_pack
from lengen.preflight import validate
from test_pack import losses, small

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("unsaved_run_figures")

STEPS = 3
FEW = (f"trainer.max_steps={STEPS}", f"trainer.val_check_interval={STEPS}", "eval.lengths=[16]")


def solo_losses(cfg) -> list[float]:
    """A solo run's training losses, step by step, without Lightning: its model, batches,
    optimiser and schedule (``LitModel.configure_optimizers``), loss, and clipping."""
    data, model, _ = build(cfg)
    lit = LitModel(model, validate(cfg).optim, cfg.trainer.max_steps)
    setup = lit.configure_optimizers()
    optimizer, schedule = setup["optimizer"], setup["lr_scheduler"]["scheduler"]
    losses = []
    for step in range(cfg.trainer.max_steps):
        batch = data.train_batch(step)
        targets = batch["targets"]
        scored = max(float((targets != IGNORE).sum()), 1.0)
        loss = loss_sum(model(**batch["inputs"]), targets) / scored
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.trainer.gradient_clip_val)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.parametrize("pe", yaml_choices("pe"))
def test_every_encoding_packs_or_is_refused_naming_its_key(
    pe, pack_strategy, tmp_path, single_thread
):
    cfgs = [small(*FEW, f"pe={pe}", f"seed={seed}") for seed in (0, 1)]
    refusal = pack_refusal(cfgs[0])
    if refusal is not None:
        assert refusal.startswith(("pe.", "pe=", "model.")), refusal
        return
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    results = train_pack(cfgs, dirs)
    assert [r["pe"] for r in results] == [pe, pe]
    for cfg, directory in zip(cfgs, dirs, strict=True):
        torch.testing.assert_close(
            torch.tensor(losses(directory)), torch.tensor(solo_losses(cfg)), rtol=0, atol=1e-5
        )


@pytest.mark.parametrize("model", ["encoder", "encoder_decoder"])
def test_a_bidirectional_model_packs_with_one_length_per_step(model, tmp_path, single_thread):
    cfgs = [
        small(*FEW, f"model={model}", "data.curriculum=fixed", f"seed={seed}") for seed in (0, 1)
    ]
    train_pack(cfgs, [tmp_path / str(seed) for seed in (0, 1)])
    for seed, cfg in enumerate(cfgs):
        torch.testing.assert_close(
            torch.tensor(losses(tmp_path / str(seed))),
            torch.tensor(solo_losses(cfg)),
            rtol=0,
            atol=1e-5,
        )


def test_a_bidirectional_model_with_lengths_of_its_own_is_refused():
    refusal = pack_refusal(small("model=encoder", "data.curriculum=uniform"))
    assert refusal.startswith("data.curriculum=uniform cannot train in a pack")


def test_members_with_their_own_learning_rates_train_as_their_solo_runs(tmp_path, single_thread):
    cfgs = [small(*FEW, "seed=0", f"optim.lr={lr}") for lr in (1e-3, 3e-3)]
    train_pack(cfgs, [tmp_path / "slow", tmp_path / "fast"])
    assert losses(tmp_path / "slow")[1] != losses(tmp_path / "fast")[1]
    for cfg, name in zip(cfgs, ("slow", "fast"), strict=True):
        torch.testing.assert_close(
            torch.tensor(losses(tmp_path / name)), torch.tensor(solo_losses(cfg)), rtol=0, atol=1e-5
        )


def test_members_trained_in_length_groups_train_as_their_solo_runs(
    tmp_path, monkeypatch, single_thread
):
    from lengen.pack import engine
    from lengen.pack.engine import GROUP_COST, length_groups

    monkeypatch.setattr(engine, "LOOPED", {})  # length groups are the vmapped path's

    cfgs = [
        small("trainer.max_steps=6", "trainer.val_check_interval=6", f"seed={s}") for s in range(4)
    ]
    streams = [build(cfg)[0] for cfg in cfgs]
    lengths = [
        [data.train_batch(step)["targets"].shape[1] for data in streams] for step in range(6)
    ]
    assert any(len(length_groups(step, GROUP_COST["cpu"])) > 1 for step in lengths)
    train_pack(cfgs, [tmp_path / str(s) for s in range(4)])
    for seed, cfg in enumerate(cfgs):
        torch.testing.assert_close(
            torch.tensor(losses(tmp_path / str(seed))),
            torch.tensor(solo_losses(cfg)),
            rtol=0,
            atol=1e-5,
        )


def test_length_groups_partition_the_members_and_pad_less():
    from lengen.pack.engine import length_groups

    lengths = [5, 7, 29, 21, 3, 16, 16, 9]
    groups = length_groups(lengths, 1.0)
    assert sorted(i for group in groups for i in group) == list(range(8))
    padded = sum(len(group) * max(lengths[i] for i in group) for group in groups)
    assert len(groups) > 1 and padded < len(lengths) * max(lengths)
    assert length_groups(lengths, float("inf")) == [list(range(8))]  # a GPU: one call
