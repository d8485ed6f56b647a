"""Packs (``lengen.pack``): a member trains as its solo run does, within 1e-5 per step, and its
run directory is a solo run's (rows, checkpoint, eval.py), plus the pack's record."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from helpers import compose_train
from lengen.pack import train_pack
from lengen.train import run

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("unsaved_run_figures")

#: a small model, a few validations: seconds per run on one core
SMALL = (
    "trainer=cpu",
    "model.d_model=32",
    "model.d_ff=64",
    "model.n_heads=2",
    "data.batch_size=8",
    "eval.samples=8",
    "eval.lengths=[16,32]",
    "eval.diagnostics=false",
    "trainer.log_every_n_steps=1",
    "optim.warmup_steps=5",
)
#: what differs between two evaluations of the same weights: time and memory
MEASURED = ("seconds", "peak_mem_mb", "batch_size")


def small(*overrides: str):
    return compose_train(*SMALL, *overrides)


def losses(run_dir: Path) -> list[float]:
    """The training losses of a run, step by step, from its CSV log."""
    with open(run_dir / "logs" / "metrics.csv", newline="") as file:
        return [float(row["train/loss"]) for row in csv.DictReader(file) if row["train/loss"]]


def rows(results: dict) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in MEASURED} for row in results["eval"]]


@pytest.fixture(scope="module")
def fifty(tmp_path_factory, single_thread):
    """A pack of two seeds trained 50 steps, and the second seed's solo run."""
    root = tmp_path_factory.mktemp("fifty")
    steps = ("trainer.max_steps=50", "trainer.val_check_interval=25")
    cfgs = [small(*steps, f"seed={seed}") for seed in (0, 1)]
    members = [root / "pack" / "seed=0", root / "pack" / "seed=1"]
    packed = train_pack(cfgs, members)
    solo = run(small(*steps, "seed=1"), root / "solo")
    return members, packed, root / "solo", solo


def test_member_losses_equal_the_solo_run_for_50_steps(fifty):
    members, _, solo_dir, _ = fifty
    member, solo = losses(members[1]), losses(solo_dir)
    assert len(member) == len(solo) == 50
    torch.testing.assert_close(torch.tensor(member), torch.tensor(solo), rtol=0, atol=1e-5)


def test_members_train_on_their_own_streams(fifty):
    members, _, _, _ = fifty
    assert losses(members[0])[0] != losses(members[1])[0]


def test_member_results_say_it_trained_in_a_pack(fifty):
    members, packed, _, _ = fifty
    recorded = json.loads((members[1] / "results.json").read_text())
    assert recorded["pack"] == {"size": 2, "index": 1, "members": ["seed=0", "seed=1"]}
    assert packed[1]["pack"] == recorded["pack"]
    assert recorded["train_steps"] == 50 and recorded["seed"] == 1


def test_member_timing_is_the_packs_with_its_size(fifty):
    members, packed, _, _ = fifty
    timing = [json.loads((m / "results.json").read_text())["timing"] for m in members]
    assert [t["members"] for t in timing] == [2, 2]
    assert [t["steps"] for t in timing] == [50, 50]
    assert timing[1]["fit_seconds"] >= timing[0]["fit_seconds"] > 0  # the first evaluated first


def test_member_rows_equal_evaluation_of_its_checkpoint_by_eval_py(fifty):
    from lengen.reeval import evaluate_run

    members, packed, _, _ = fifty
    again = evaluate_run([f"run={members[0]}", "tag=again"])
    assert rows(again) == rows(packed[0])


def test_member_checkpoint_holds_the_solo_runs_keys(fifty):
    members, _, solo_dir, _ = fifty
    member = torch.load(members[1] / "checkpoints" / "last.ckpt", weights_only=False)
    solo = torch.load(solo_dir / "checkpoints" / "last.ckpt", weights_only=False)
    assert set(member["state_dict"]) == set(solo["state_dict"])
    assert member["global_step"] == solo["global_step"] == 50
    mine, theirs = member["optimizer_states"][0], solo["optimizer_states"][0]
    assert [g["params"] for g in mine["param_groups"]] == [
        g["params"] for g in theirs["param_groups"]
    ]
    assert member["lr_schedulers"][0]["last_epoch"] == solo["lr_schedulers"][0]["last_epoch"]
    assert member["lengen"]["train_tokens"] == solo["lengen"]["train_tokens"]


def test_a_pack_of_one_is_the_solo_run(fifty, tmp_path):
    _, _, solo_dir, solo = fifty
    steps = ("trainer.max_steps=50", "trainer.val_check_interval=25")
    [alone] = train_pack([small(*steps, "seed=1")], [tmp_path / "alone"])
    torch.testing.assert_close(
        torch.tensor(losses(tmp_path / "alone")), torch.tensor(losses(solo_dir)), rtol=0, atol=1e-5
    )
    for mine, theirs in zip(rows(alone), rows(solo), strict=True):
        assert mine.keys() == theirs.keys()
        numbers = [k for k, v in mine.items() if isinstance(v, float)]
        torch.testing.assert_close(
            [mine[k] for k in numbers], [theirs[k] for k in numbers], rtol=0, atol=1e-5
        )
        assert {k: v for k, v in mine.items() if k not in numbers} == {
            k: v for k, v in theirs.items() if k not in numbers
        }


def test_a_member_under_bf16_autocast_trains_as_its_solo_run(tmp_path, single_thread):
    # bf16 rounds batched and single products differently: 1e-3, not fp32's 1e-5
    steps = ("trainer.max_steps=10", "trainer.val_check_interval=5", "trainer.precision=bf16-mixed")
    train_pack([small(*steps, f"seed={seed}") for seed in (0, 1)], [tmp_path / "0", tmp_path / "1"])
    run(small(*steps, "seed=1"), tmp_path / "solo")
    torch.testing.assert_close(
        torch.tensor(losses(tmp_path / "1")),
        torch.tensor(losses(tmp_path / "solo")),
        rtol=0,
        atol=1e-3,
    )


def test_a_pack_of_one_that_cannot_pack_is_trained_by_run(tmp_path, single_thread):
    # dropout packs on the CPU accelerator only (test_pack_dropout.py): auto may be a GPU's
    steps = ("trainer.max_steps=2", "trainer.val_check_interval=2", "model.dropout=0.1")
    steps += ("trainer.accelerator=auto",)
    [alone] = train_pack([small(*steps)], [tmp_path / "alone"])
    assert "pack" not in alone and alone["train_steps"] == 2
