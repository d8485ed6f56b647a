"""Packs when members part ways: the criterion stops one, one diverges, the pack is
interrupted and resumed (``lengen.pack``)."""

from __future__ import annotations

import csv
import json
import signal

import pytest
import torch

from lengen.checks import ConfigError, Preempted
from lengen.pack import engine, train_pack
from lengen.pack.member import Member
from lengen.train import run
from test_pack import losses, rows, small

# its runs are read for numbers and files, never figures: each is built, not rasterised
pytestmark = pytest.mark.usefixtures("unsaved_run_figures")

SHORT = (
    "trainer.max_steps=6",
    "trainer.val_check_interval=2",
    "trainer.checkpoint_every_n_steps=null",
)


def validation_accuracy(run_dir, step: int) -> float:
    """val/accuracy logged at ``step`` (0-based) in a run's CSV log."""
    with open(run_dir / "logs" / "metrics.csv", newline="") as file:
        for row in csv.DictReader(file):
            if row["val/accuracy"] and int(row["step"]) == step:
                return float(row["val/accuracy"])
    raise AssertionError(f"no validation at step {step}")


def test_criterion_freezes_one_member_at_its_step_and_the_others_go_on(tmp_path, single_thread):
    probes = [tmp_path / "probe" / str(seed) for seed in (0, 1)]
    train_pack([small(*SHORT, f"seed={seed}") for seed in (0, 1)], probes)
    first = [validation_accuracy(probe, 1) for probe in probes]  # after 2 steps
    assert first[0] != first[1], "the test needs members that differ at the first validation"
    leader = first.index(max(first))
    criterion = (
        "trainer.criterion_metric=accuracy",
        f"trainer.criterion_target={max(first)}",
        "trainer.criterion_checks=1",
    )
    dirs = [tmp_path / "pack" / str(seed) for seed in (0, 1)]
    results = train_pack([small(*SHORT, *criterion, f"seed={seed}") for seed in (0, 1)], dirs)
    assert results[leader]["train_steps"] == 2
    assert results[leader]["criterion"]["reached_at_step"] == 2
    assert results[1 - leader]["train_steps"] > 2
    frozen = torch.load(dirs[leader] / "checkpoints" / "last.ckpt", weights_only=False)
    solo_dir = tmp_path / "solo"
    solo = run(small(*SHORT, *criterion, f"seed={leader}"), solo_dir)
    assert solo["train_steps"] == 2
    theirs = torch.load(solo_dir / "checkpoints" / "last.ckpt", weights_only=False)
    torch.testing.assert_close(frozen["state_dict"], theirs["state_dict"], rtol=0, atol=1e-5)


def test_a_diverged_member_stops_with_the_usual_message_and_the_others_finish(
    tmp_path, monkeypatch, single_thread
):
    start = Member.start

    def poisoned(self, resumed):  # member 1's weights are NaN from the first step
        start(self, resumed)
        if self.index == 1:
            with torch.no_grad():
                self.model.head.weight.fill_(float("nan"))

    monkeypatch.setattr(Member, "start", poisoned)
    dirs = [tmp_path / "pack" / str(seed) for seed in (0, 1)]
    results = train_pack([small(*SHORT, f"seed={seed}") for seed in (0, 1)], dirs)
    assert results[1]["type"] == "TrainingDiverged"
    failed = json.loads((dirs[1] / "failed.json").read_text())
    assert failed["type"] == "TrainingDiverged"
    assert failed["error"].startswith("training diverged at step 0: the loss is nan")
    assert not (dirs[1] / "results.json").exists()
    assert results[0]["train_steps"] == 6 and (dirs[0] / "results.json").is_file()
    monkeypatch.undo()
    solo = run(small(*SHORT, "seed=0"), tmp_path / "solo")
    torch.testing.assert_close(
        torch.tensor(losses(dirs[0])), torch.tensor(losses(tmp_path / "solo")), rtol=0, atol=1e-5
    )
    assert solo["train_steps"] == 6


def test_an_interrupted_pack_resumed_gives_the_uninterrupted_rows(
    tmp_path, monkeypatch, single_thread
):
    steps = ("trainer.max_steps=8", "trainer.val_check_interval=4")
    cfgs = [small(*steps, f"seed={seed}") for seed in (0, 1)]
    whole = train_pack(cfgs, [tmp_path / "whole" / str(seed) for seed in (0, 1)])
    dirs = [tmp_path / "cut" / str(seed) for seed in (0, 1)]
    calls = iter(range(100))  # SIGTERM arrives during the fifth step
    monkeypatch.setattr(
        engine, "received_signal", lambda: signal.SIGTERM if next(calls) == 4 else 0
    )
    with pytest.raises(Preempted) as stopped:
        train_pack(cfgs, dirs)
    assert stopped.value.step == 5
    monkeypatch.undo()
    for directory in dirs:
        checkpoint = torch.load(directory / "checkpoints" / "last.ckpt", weights_only=False)
        assert checkpoint["global_step"] == 5 and not (directory / "results.json").exists()
    resumed = train_pack([small(*steps, f"seed={seed}", "resume=auto") for seed in (0, 1)], dirs)
    for mine, theirs in zip(resumed, whole, strict=True):
        assert mine["resumed"] and rows(mine) == rows(theirs)
    assert losses(dirs[1]) == losses(tmp_path / "whole" / "1")


def test_a_finished_pack_resumed_returns_its_results(tmp_path, single_thread):
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    first = train_pack([small(*SHORT, f"seed={seed}") for seed in (0, 1)], dirs)
    again = train_pack([small(*SHORT, f"seed={seed}", "resume=auto") for seed in (0, 1)], dirs)
    assert again == [json.loads((d / "results.json").read_text()) for d in dirs]
    assert [r["eval"] for r in again] == [r["eval"] for r in first]


def test_a_member_interrupted_in_a_pack_continues_as_a_solo_run(
    tmp_path, monkeypatch, single_thread
):
    steps = ("trainer.max_steps=8", "trainer.val_check_interval=4")
    dirs = [tmp_path / "cut" / str(seed) for seed in (0, 1)]
    calls = iter(range(100))
    monkeypatch.setattr(
        engine, "received_signal", lambda: signal.SIGTERM if next(calls) == 4 else 0
    )
    with pytest.raises(Preempted):
        train_pack([small(*steps, f"seed={seed}") for seed in (0, 1)], dirs)
    monkeypatch.undo()
    continued = run(small(*steps, "seed=1", "resume=auto"), dirs[1])
    whole = run(small(*steps, "seed=1"), tmp_path / "whole")
    assert continued["train_steps"] == 8 and continued["resumed"]
    torch.testing.assert_close(
        torch.tensor(losses(dirs[1])), torch.tensor(losses(tmp_path / "whole")), rtol=0, atol=1e-5
    )
    assert len(rows(continued)) == len(rows(whole))


def test_a_member_that_may_not_start_refuses_the_pack_before_anything_is_written(tmp_path):
    dirs = [tmp_path / "0", tmp_path / "1"]
    dirs[1].mkdir()
    (dirs[1] / "notes.txt").write_text("the user's own file")
    with pytest.raises(ConfigError, match="holds files that no lengen run wrote"):
        train_pack([small(*SHORT, f"seed={seed}") for seed in (0, 1)], dirs)
    assert not dirs[0].exists()


def test_each_member_adds_its_evaluation_to_the_calibration(tmp_path, monkeypatch, single_thread):
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "cache"))
    dirs = [tmp_path / str(seed) for seed in (0, 1)]
    train_pack([small(*SHORT, f"seed={seed}") for seed in (0, 1)], dirs)
    calibration = json.loads((tmp_path / "cache" / "timings.json").read_text())
    [machine] = calibration["machines"].values()
    assert len(machine["eval teacher_forced"]) == 2  # one entry per member
