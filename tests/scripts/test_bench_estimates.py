"""scripts/bench_estimates.py: every estimate line read back and set against what happened, on
a sweep folder and an output made up here (no training)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers import CONFIG_DIR


@pytest.fixture(scope="module")
def bench():
    path = CONFIG_DIR.parent / "scripts/bench_estimates.py"
    spec = importlib.util.spec_from_file_location("bench_estimates", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_durations_read_back_as_printed(bench):
    assert [bench.seconds_of(t) for t in ("12s", "3m05s", "2h07m")] == [12, 185, 7620]


@pytest.fixture
def sweep(tmp_path):
    """Two encodings, two seeds: runs of 10, 20, 12 and 18 s from t = 100 s, the output a
    sweep printed meanwhile. -> (lines, sweep folder)."""
    jobs = tmp_path / ".jobs"
    jobs.mkdir()
    (jobs / "sweep.json").write_text(json.dumps({"runs": 4, "started": 100.0}))
    start, lines = 100.0, [(100.0, "sweep: 4 runs, ≈ 1m20s in all (calibrated on this machine)")]
    for number, (pe, seed, wall) in enumerate(
        [("rope", 0, 10.0), ("fox", 0, 20.0), ("rope", 1, 12.0), ("fox", 1, 18.0)]
    ):
        run = tmp_path / f"{pe}{seed}"
        run.mkdir()
        (run / "results.json").write_text(json.dumps({"pe": pe, "seed": seed}))
        record = {"run_dir": str(run), "started": start, "wall_s": wall}
        (jobs / f"{number}.json").write_text(json.dumps(record))
        left = {0: "≈ 1m20s left", 2: "2 finished, ≈ 30s left"}.get(number)
        lines.append(
            (start, f"sweep: run {number + 1} of 4 ({run.name})" + (f"; {left}" if left else ""))
        )
        lines.append(
            (
                start + 1,
                f"[{run.name}] estimate: ≈ 15s (… ; calibrated on this machine by 1 finished run)",
            )
        )
        start += wall
    return lines, tmp_path


def test_each_runs_estimate_is_set_against_its_wall_time(bench, sweep):
    runs = bench.analyse(*sweep, encodings=2)["runs"]
    assert [(r["pe"], r["predicted_s"], r["actual_s"], r["error"]) for r in runs] == [
        ("rope", 15, 10.0, 0.5), ("fox", 15, 20.0, -0.25), ("rope", 15, 12.0, 0.25), ("fox", 15, 18.0, -0.167)
    ]  # fmt: skip


def test_the_targets_moment_is_the_first_run_once_each_encoding_has_finished(bench, sweep):
    result = bench.analyse(*sweep, encodings=2)
    at = result["once_each_encoding_finished"]
    # run 3 starts at 130 s: 30 s so far + 30 s left against the sweep's 60 s
    assert at["when"] == "start of run 3" and at["predicted_s"] == 60.0 and at["error"] == 0.0
    assert result["within_target"] is True


def test_the_total_before_the_first_run_is_kept(bench, sweep):
    first = bench.analyse(*sweep, encodings=2)["sweep_total"][0]
    assert first["when"] == "before the first run" and first["predicted_s"] == 80
    assert first["actual_s"] == 60.0 and first["error"] == pytest.approx(1 / 3, abs=1e-3)
