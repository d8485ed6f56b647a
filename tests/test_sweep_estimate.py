"""A sweep's time (lengen.sweep_estimate, issue #52 item 2): its total before the first run,
and the time left from the runs still to go, each by its own estimate as the finished runs of
its mechanism corrected it, not the mean of every finished run."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_train, run_train
from lengen import sweep_estimate
from lengen.cli import SweepReport
from lengen.sweep_estimate import planned_runs, time_left, total_line

FAST = ("debug=fast", "data.len=4", "eval.factors=[1]", "eval.diagnostics=false", "logger=none")


def planned(*runs):
    """Plan estimates from (mechanism, seconds) pairs."""
    return [{"seconds": s, "mechanism": m, "rough": False} for m, s in runs]


def finished(*walls):
    """Job records of finished runs, by run number."""
    return {number: {"wall_s": wall} for number, wall in enumerate(walls)}


# -- the time left -------------------------------------------------------------------------------
def test_the_time_left_is_the_runs_to_go_each_corrected_by_its_mechanism():
    plan = {
        "runs": 4,
        "workers": 1,
        "estimates": planned(("A", 10), ("B", 20), ("B", 20), ("B", 20)),
    }
    # A took 3× its estimate, B half of it: B's two runs to go take 10 s each (the mean of the
    # finished runs, 20 s, × 2 runs would say 40 s)
    assert time_left(plan, finished(30.0, 10.0)) == (2, pytest.approx(20.0))


def test_a_mechanism_not_finished_yet_takes_the_ratio_of_all_finished_runs():
    plan = {"runs": 3, "workers": 1, "estimates": planned(("A", 10), ("A", 10), ("C", 30))}
    # A took twice its estimate: the machine (or the calibration) is slower than thought
    assert time_left(plan, finished(20.0)) == (1, pytest.approx(20.0 + 60.0))


def test_before_any_run_has_finished_the_time_left_is_the_estimates():
    plan = {"runs": 2, "workers": 2, "estimates": planned(("A", 10), ("B", 30))}
    assert time_left(plan, {}) == (0, pytest.approx(20.0))  # 40 s of runs, 2 at a time


def test_a_job_says_the_time_left_before_any_run_has_finished(tmp_path):
    from hydra.types import RunMode

    hydra = OmegaConf.create(
        {
            "mode": RunMode.MULTIRUN,
            "sweep": {"dir": str(tmp_path)},
            "job": {"num": 0},
            "runtime": {"output_dir": str(tmp_path / "run0")},
        }
    )
    estimates = planned(("A", 50), ("B", 70))
    SweepReport.write_plan(tmp_path, runs=2, workers=1, skipped=[], estimates=estimates)
    line = SweepReport.progress_line(hydra)
    assert line == "sweep: run 1 of 2 (run0); ≈ 2m00s left"


# -- the total, before the first run -------------------------------------------------------------
def test_the_total_is_every_runs_estimate_over_the_runs_at_once():
    line = total_line(planned(("A", 30), ("A", 30), ("B", 60), ("B", 120)), workers=2)
    assert line == "sweep: 4 runs, ≈ 2m00s in all, 2 at a time (calibrated on this machine)"


def test_the_total_says_how_much_of_it_is_rough():
    estimates = [*planned(("A", 30)), {"seconds": 60, "mechanism": "B", "rough": True}, None]
    line = total_line(estimates, workers=1)
    assert line.endswith(
        "(2 of 3 runs estimated; 1 of 2 runs partly rough: not all measured here yet)"
    )


def test_runs_that_differ_only_in_their_seeds_are_built_once(monkeypatch):
    built = []
    monkeypatch.setattr(
        sweep_estimate,
        "run_estimate",
        lambda cfg, members: (
            built.append(cfg.seed) or {"seconds": 8.0, "mechanism": "A", "rough": False}
        ),
    )
    configs = [compose_train(f"seed={seed}") for seed in (0, 1, 2)]
    assert [r["seconds"] for r in planned_runs(configs, [1, 1, 1])] == [8.0] * 3
    assert built == [0]


def test_a_packs_estimate_is_shared_by_its_members(monkeypatch):
    monkeypatch.setattr(
        sweep_estimate,
        "run_estimate",
        lambda cfg, members: {"seconds": 60.0, "mechanism": "A", "rough": False},
    )
    runs = planned_runs([compose_train("seed=0")], [3])
    assert [r["seconds"] for r in runs] == [20.0] * 3


def test_a_run_estimate_builds_no_weights_and_names_its_mechanism(tmp_path, monkeypatch):
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))
    estimate = sweep_estimate.run_estimate(compose_train("pe=alibi"))
    assert estimate["mechanism"] == "ALiBi · DecoderOnly" and estimate["rough"] is True
    assert estimate["seconds"] > 0


# -- one real sweep ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """``train.py -m pe=rope,alibi`` (debug=fast) into a fresh cache: rough estimates."""
    folder = tmp_path_factory.mktemp("estimate") / "sweep"
    result = run_train("-m", "pe=rope,alibi", *FAST, f"hydra.sweep.dir={folder}", one_thread=True)
    return result, folder


def test_a_sweep_prints_its_total_before_its_first_run(sweep):
    result, _ = sweep
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    total = next(i for i, line in enumerate(lines) if line.startswith("sweep: 2 runs, ≈ "))
    first = next(i for i, line in enumerate(lines) if line.startswith("sweep: run 1 of 2"))
    assert total < first and " in all (" in lines[total]


def test_the_plan_keeps_each_runs_estimate_and_mechanism(sweep):
    _, folder = sweep
    plan = json.loads((folder / SweepReport.RECORDS / SweepReport.PLAN).read_text())
    assert [e["mechanism"] for e in plan["estimates"]] == [
        "RoPE · DecoderOnly",
        "ALiBi · DecoderOnly",
    ]


def test_a_run_estimate_reads_the_calibration_of_the_threads_its_job_will_use(
    tmp_path, monkeypatch
):
    # hydra/launcher=local runs each job on one thread; the sweep's own process has more
    from lengen.estimate import Estimate, machine_key

    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path))
    cfg = compose_train()
    OmegaConf.set_struct(cfg, False)
    cfg.hydra = {"job": {"env_set": {"OMP_NUM_THREADS": "1"}}}
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        calibration = Estimate(tmp_path / "timings.json", machine_key("cpu", threads=1), "cpu")
        calibration.record(1e3, 0.5, 1e3, 1.0, "teacher_forced", 1.0, load=0.0)
        calibration.record(1e12, 0.5, 1e12, 1.0, "teacher_forced", 1.0, load=0.0)
        parts, _ = sweep_estimate.run_parts(cfg)
    finally:
        torch.set_num_threads(before)
    assert "steps" not in parts["guessed"]
