"""The time left of a sweep counts only runs that trained as measures of their estimates, and
a job of a stopped sweep prints no "run k of N, ≈ … left" line (a SIGTERM'd sweep printed
"run 3 of 9; 2 finished, ≈ 17m47s left" for runs that were interrupted or never started,
2026-12-02)."""

from __future__ import annotations

import signal

import pytest
from omegaconf import OmegaConf

from lengen.cli import SweepReport
from lengen.sweep_estimate import time_left


def planned(*runs):
    return [{"seconds": s, "mechanism": m, "rough": False} for m, s in runs]


def test_an_interrupted_run_neither_measures_the_estimates_nor_counts_as_finished():
    plan = {"runs": 3, "workers": 1, "estimates": planned(("A", 100), ("A", 100), ("A", 100))}
    records = {
        0: {"outcome": "trained", "wall_s": 200.0},  # twice its estimate
        1: {"outcome": "interrupted: by SIGTERM at step 5", "wall_s": 3.0},
    }
    # the one run to go takes 200 s (the trained run's ratio 2), not (200 + 3) / 200 × 100
    assert time_left(plan, records) == (1, pytest.approx(200.0))


def test_runs_that_ended_without_training_are_not_to_go():
    plan = {"runs": 3, "workers": 1, "estimates": planned(("A", 100), ("A", 100), ("A", 100))}
    records = {
        0: {"outcome": "refused: data.len=0", "wall_s": 1.0},
        1: {"outcome": "not started: the sweep was stopped by SIGTERM", "wall_s": 0.5},
    }
    assert time_left(plan, records) == (0, pytest.approx(100.0))


def test_a_run_finished_earlier_counts_as_finished_but_measures_nothing():
    plan = {"runs": 2, "workers": 1, "estimates": planned(("A", 100), ("A", 100))}
    records = {0: {"outcome": "finished earlier", "wall_s": 0.2}}
    assert time_left(plan, records) == (1, pytest.approx(100.0))


def hydra_node(tmp_path, number):
    from hydra.types import RunMode

    return OmegaConf.create(
        {
            "mode": RunMode.MULTIRUN,
            "sweep": {"dir": str(tmp_path)},
            "job": {"num": number},
            "runtime": {"output_dir": str(tmp_path / f"run{number}")},
            "overrides": {"task": []},
        }
    )


def test_a_job_of_a_stopped_sweep_prints_no_progress_line(tmp_path, capsys):
    from lengen.rundir.sweep_stop import mark_stopped

    SweepReport.write_plan(
        tmp_path, runs=2, workers=1, skipped=[], estimates=planned(("A", 60)) * 2
    )
    mark_stopped(tmp_path, signal.SIGTERM)
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        SweepReport().on_job_start(OmegaConf.create({"hydra": hydra_node(tmp_path, 1)}))
    finally:  # on_job_start installs lengen's handlers in the main thread
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    assert "sweep: run" not in capsys.readouterr().out


def test_a_job_of_a_sweep_not_stopped_prints_its_progress_line(tmp_path, capsys):
    SweepReport.write_plan(
        tmp_path, runs=2, workers=1, skipped=[], estimates=planned(("A", 60)) * 2
    )
    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        SweepReport().on_job_start(OmegaConf.create({"hydra": hydra_node(tmp_path, 1)}))
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    assert "sweep: run 2 of 2 (run1); ≈ 2m00s left" in capsys.readouterr().out
