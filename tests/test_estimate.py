"""How long a run will take, said before it starts (lengen.progress.Estimate, lengen.train
RunTiming), and a sweep's "run k of N" with its time left (lengen.cli.SweepReport). The line
through the real command line: tests/test_sweep_skip.py's sweep."""

from __future__ import annotations

import json
import random
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from lengen.cli import SweepReport
from lengen.progress import (
    MIN_TIMED_STEPS,
    Estimate,
    StepTimer,
    eval_flops,
    interpolate,
    train_step_flops,
)
from lengen.train import RunTiming

MACHINE = "cpu · test CPU · 2 threads"


# -- reading the calibration -----------------------------------------------------------------
def test_a_size_measured_before_gives_its_fastest_time():
    # the slower ones were timed beside other work
    assert interpolate([[1e9, 0.5], [1e9, 1.1], [1e9, 0.6]], 1e9) == pytest.approx(0.5)


def test_a_size_between_two_measured_ones_is_read_between_them_in_log_log():
    # 1e9 -> 1 s and 1e11 -> 10 s: halfway in log FLOPs is halfway in log seconds
    assert interpolate([[1e9, 1.0], [1e11, 10.0]], 1e10) == pytest.approx(10**0.5)


def test_a_size_above_every_measured_one_adds_its_extra_flops_at_the_fastest_rate():
    # 2e9 in 5 s (the largest) was timed under load: scaling it would say 50 s at 2e10; its
    # time plus the extra FLOPs at the fastest rate seen (1e9 in 0.25 s, 4e9 FLOP/s) is 5 + 4.5
    assert interpolate([[1e9, 0.25], [2e9, 5.0]], 2e10) == pytest.approx(9.5)


def test_below_every_measured_size_the_smallest_ones_overhead_remains():
    # 1e10 in 1 s is the fastest rate: of the smallest's 0.2 s, its 1e9 FLOPs at that rate
    # (0.1 s) is compute and the rest overhead, which a smaller step still pays
    assert interpolate([[1e9, 0.2], [1e10, 1.0]], 1e6) == pytest.approx(0.1 + 1e6 / 1e10)


def test_below_a_smallest_size_at_the_fastest_rate_the_time_scales_with_the_flops():
    # a 1-layer model 8x smaller than the 4-layer runs: FLOPs-bound as they are, not their floor
    assert interpolate([[6e9, 0.099], [6.9e9, 0.147]], 7.5e8) == pytest.approx(0.099 / 8)


def test_below_a_single_measured_size_its_time_is_a_floor():
    # one size tells nothing of how much of its time is overhead
    assert interpolate([[1e9, 0.2]], 1e6) == pytest.approx(0.2)


def test_nothing_measured_gives_no_time():
    assert interpolate([], 1e9) is None


# -- the line ---------------------------------------------------------------------------------
def test_an_uncalibrated_machine_gets_a_rough_estimate_that_says_so(tmp_path):
    line = Estimate(tmp_path / "timings.json", MACHINE, "cpu").line(1000, 2e9, 4e9, "greedy", 4)
    assert line.startswith("estimate: ≈ ")
    assert "1,000 steps × " in line and "rough: 2 GFLOP a step at an assumed 20 GFLOP/s" in line
    assert str(tmp_path / "timings.json") in line  # where the calibration will go


def test_a_finished_run_calibrates_the_next_estimate(tmp_path):
    path = tmp_path / "timings.json"
    Estimate(path, MACHINE, "cpu").record(2e9, 0.25, 4e9, 8.0, "teacher_forced", 3.0, lengths=4)
    line = Estimate(path, MACHINE, "cpu").line(1000, 2e9, 4e9, "teacher_forced", 4)
    # 3 s start-up + 1,000 × 0.25 s + 4 lengths × 2 s = 261 s
    assert line.startswith("estimate: ≈ 4m21s (1,000 steps × 0.25 s + evaluation 8s + start-up 3s")
    assert line.endswith("calibrated on this machine by 1 finished run)")


def test_a_calibration_holds_for_its_machine_and_protocol_only(tmp_path):
    path = tmp_path / "timings.json"
    Estimate(path, MACHINE, "cpu").record(2e9, 0.25, 4e9, 8.0, "teacher_forced", 3.0)
    assert "rough:" in Estimate(path, "cpu · test CPU · 1 thread", "cpu").line(10, 2e9, 4e9, "x")
    assert "rough:" in Estimate(path, MACHINE, "cpu").line(10, 2e9, 4e9, "greedy")


def test_the_file_keeps_the_newest_measurements_only(tmp_path):
    from lengen.progress import KEPT

    path = tmp_path / "timings.json"
    for step in range(KEPT + 5):
        Estimate(path, MACHINE, "cpu").record(1e9, 1.0 + step, 1e9, 1.0, "t", 1.0)
    kept = json.loads(path.read_text())["machines"][MACHINE]["train"]
    assert len(kept) == KEPT and kept[-1][1] == 1.0 + KEPT + 4


def test_a_damaged_file_is_rough_and_then_replaced(tmp_path):
    path = tmp_path / "timings.json"
    path.write_text("{not json")
    assert "rough:" in Estimate(path, MACHINE, "cpu").line(10, 1e9, 1e9, "t")
    Estimate(path, MACHINE, "cpu").record(1e9, 0.1, 1e9, 1.0, "t", 1.0)
    # (FLOPs, the quiet equivalent, the contention it was divided by: 1 on a quiet machine)
    assert json.loads(path.read_text())["machines"][MACHINE]["train"] == [[1e9, 0.1, 1.0]]


def test_flops_grow_with_the_batch_and_the_length():
    base = train_step_flops(1000, 2, 16, 8, 10)
    assert train_step_flops(1000, 2, 16, 16, 10) == 2 * base
    assert train_step_flops(1000, 2, 16, 8, 20) > 2 * base  # attention is quadratic
    assert eval_flops(1000, 2, 16, 4, [10, 20]) > eval_flops(1000, 2, 16, 4, [10])


# -- the run: no result changes -----------------------------------------------------------------
def rng_states():
    return (torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())


def test_the_estimate_draws_no_random_number_and_costs_milliseconds(tmp_path, monkeypatch):
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))
    cfg = OmegaConf.create(
        {
            "model": {"n_layers": 2, "d_model": 16},
            "eval": {"samples": 8, "decoding": "teacher_forced"},
            "trainer": {"max_steps": 100, "criterion_target": None},
        }
    )
    data = SimpleNamespace(train_len=8, batch_size=4, sequence_length=lambda n: 2 * n + 1)
    timer = StepTimer()
    trainer = SimpleNamespace(
        strategy=SimpleNamespace(root_device=torch.device("cpu")), world_size=1, callbacks=[timer]
    )
    directory = SimpleNamespace(path=tmp_path / "run")
    model = torch.nn.Linear(16, 16)  # (its initialisation draws: before the states are kept)
    before = rng_states()
    started = time.perf_counter()
    timing = RunTiming.start(cfg, model, data, [8, 16], trainer, None, directory)
    elapsed = time.perf_counter() - started
    after = rng_states()
    assert torch.equal(before[0], after[0]) and (before[1] == after[1]).all()
    assert before[2] == after[2]
    assert timing is not None and timing.timer is timer
    assert elapsed < 1.0  # a file read and a few multiplications (generous on a busy machine)


def test_the_step_timer_keeps_nothing_in_the_checkpoint():
    assert StepTimer().state_dict() == {}  # a checkpoint (and a resumed run) is unchanged


def timed(steps: int, first_step_seconds: float = 5.0) -> StepTimer:
    """A StepTimer that saw ``steps`` steps of 0.5 s after a slow first one."""
    timer = StepTimer()
    for step in range(1, steps + 1):
        now = first_step_seconds + 0.5 * (step - 1)
        timer.first = timer.first or (step, now)
        timer.last = (step, now)
    return timer


def test_the_step_timer_leaves_the_first_step_out():
    timer = timed(MIN_TIMED_STEPS)
    assert timer.step_seconds() == pytest.approx(0.5) and timer.steps() == MIN_TIMED_STEPS


def test_a_run_of_few_steps_times_no_step():
    # a test's or a smoke run's steps are mostly warm-up and validations
    assert timed(MIN_TIMED_STEPS - 1).step_seconds() is None


# -- a sweep: run k of N, and the time left ------------------------------------------------------
def hydra_of(sweep_dir, number: int) -> OmegaConf:
    from hydra.types import RunMode

    return OmegaConf.create(
        {
            "mode": RunMode.MULTIRUN,
            "sweep": {"dir": str(sweep_dir)},
            "job": {"num": number},
            "runtime": {"output_dir": str(sweep_dir / f"run{number}")},
        }
    )


def test_a_job_says_which_run_of_how_many_it_is(tmp_path):
    SweepReport.write_plan(tmp_path, runs=4, workers=2, skipped=[])
    assert SweepReport.progress_line(hydra_of(tmp_path, 0)) == "sweep: run 1 of 4 (run0)"


def test_once_runs_have_finished_a_job_says_the_time_left(tmp_path):
    SweepReport.write_plan(tmp_path, runs=4, workers=2, skipped=[])
    records = tmp_path / SweepReport.RECORDS
    for number, wall in [(0, 50.0), (1, 70.0)]:
        record = {"run_dir": str(tmp_path / f"run{number}"), "outcome": "trained", "wall_s": wall}
        (records / f"{number}.json").write_text(json.dumps(record))
    # mean 60 s × 2 runs not finished / 2 at a time = 60 s
    line = SweepReport.progress_line(hydra_of(tmp_path, 2))
    assert line == "sweep: run 3 of 4 (run2); 2 finished, ≈ 1m00s left"


def test_a_jobs_end_records_its_wall_time(tmp_path):
    hydra = hydra_of(tmp_path, 0)
    SweepReport.record(hydra, None)
    SweepReport.record(hydra, "trained")
    record = json.loads((tmp_path / SweepReport.RECORDS / "0.json").read_text())
    assert record["outcome"] == "trained" and 0 <= record["wall_s"] < 60


def test_no_plan_no_progress_line(tmp_path):
    assert SweepReport.progress_line(hydra_of(tmp_path, 0)) is None  # another sweeper's sweep


def test_a_size_measured_several_times_scales_from_its_fastest_time():
    assert interpolate([[1e9, 0.2], [1e9, 2.0]], 4e9) == pytest.approx(0.8)


@pytest.mark.parametrize("version", [1, 2])
def test_a_calibration_of_an_old_format_is_read_as_empty_and_replaced(tmp_path, version):
    # version 1 kept the step times of short runs (warm-up and validations), which once made
    # an estimate 321 h; version 2 the times as measured, under whatever load
    path = tmp_path / "timings.json"
    old = {"version": version, "machines": {MACHINE: {"train": [[1e9, 7.0]]}}}
    path.write_text(json.dumps(old))
    assert "rough:" in Estimate(path, MACHINE, "cpu").line(10, 1e9, 1e9, "t")
    Estimate(path, MACHINE, "cpu").record(1e9, 0.1, 1e9, 1.0, "t", 1.0)
    assert json.loads(path.read_text())["machines"][MACHINE]["train"] == [[1e9, 0.1, 1.0]]


def test_a_run_without_a_step_time_still_counts_as_calibrating(tmp_path):
    path = tmp_path / "timings.json"
    Estimate(path, MACHINE, "cpu").record(1e9, None, 1e9, 4.0, "greedy", None)
    line = Estimate(path, MACHINE, "cpu").line(10, 1e9, 1e9, "greedy")
    assert line.endswith("the rest calibrated by 1 finished run)")
    assert "partly rough: steps and start-up not yet measured" in line


def test_an_estimate_with_only_its_steps_measured_names_what_is_guessed(tmp_path):
    path = tmp_path / "timings.json"
    estimate = Estimate(path, "cpu · test", "cpu")
    estimate.record(2e9, 0.25, 1e9, 8.0, "teacher_forced", 3.0)
    line = Estimate(path, "cpu · test", "cpu").line(1000, 2e9, 1e9, "greedy")
    assert "1,000 steps × 0.25 s" in line
    assert "partly rough: greedy evaluation not yet measured on this machine" in line
