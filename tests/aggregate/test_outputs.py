"""scripts/aggregate.py's outputs through the command line: names that carry the metric and
statistic (one folder holds every metric's tables), sweeps compared, a read-only folder, NaN
values counted (issue #33 item 7, #34 item 11). The command line is called in this process
(tests/script_fixture.py); a read-only folder's cases run the script in a process of its own,
which sees the folder read-only."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from lengen.aggregate.command import main
from lengen.aggregate.report import output_name
from script_fixture import call_main
from sweep_fixture import make_sweep, read_only, write_run

AGGREGATE = [sys.executable, str(ROOT / "scripts" / "aggregate.py")]


@pytest.fixture
def run(capsys):
    """``aggregate.py arguments…`` in this process -> (returncode, stdout, stderr)."""
    return lambda *arguments: call_main(main, arguments, capsys)


def script(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def read_csv(path: Path) -> list[dict]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def sweep(tmp_path) -> Path:
    return make_sweep(tmp_path / "sweep")


# -- names -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "tag", "metric", "statistic", "expected"),
    [
        ("summary.csv", None, "exact_match", "mean", "summary.csv"),
        ("summary.csv", None, "accuracy", "mean", "summary.accuracy.csv"),
        ("summary.md", "yarn3", "accuracy", "max", "summary.yarn3.accuracy.max.md"),
        ("summary.csv", None, "exact_match", "max", "summary.csv"),  # holds every statistic
        ("ranking.csv", None, "exact_match", "min", "ranking.min.csv"),
        ("runs.csv", None, "accuracy", "max", "runs.csv"),  # the same for every metric
    ],
)
def test_output_names_carry_what_changes_their_content(name, tag, metric, statistic, expected):
    assert output_name(name, tag, metric, statistic) == expected


def test_metric_accuracy_leaves_the_exact_match_summary_alone(sweep, run):
    assert run(sweep).returncode == 0
    before = (sweep / "summary.csv").read_bytes()
    assert run(sweep, "--metric", "accuracy").returncode == 0
    assert (sweep / "summary.csv").read_bytes() == before


def test_metric_accuracy_writes_its_own_summary(sweep, run):
    assert run(sweep, "--metric", "accuracy").returncode == 0
    rows = read_csv(sweep / "summary.accuracy.csv")
    assert {row["metric"] for row in rows} == {"accuracy"}
    assert "Metric: `accuracy`" in (sweep / "summary.accuracy.md").read_text()


def test_a_tag_named_like_a_metric_is_refused_with_nothing_written(sweep, run):
    before = files(sweep)
    done = run(sweep, "--tag", "accuracy")
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)
    assert "--tag accuracy is a metric's name" in done.stderr
    assert files(sweep) == before


# -- comparing sweeps --------------------------------------------------------------------------
@pytest.fixture
def two_sweeps(tmp_path):
    """Two one-PE sweeps of the same configuration: A at 0.5 and B at 0.9 (accuracy, length 8)."""
    for name, value in (("a", 0.5), ("b", 0.9)):
        write_run(tmp_path / name, "rope_seed0", pe="rope", accuracy={4: 1.0, 8: value})
    return tmp_path


def test_compared_sweeps_are_configurations_of_their_own(two_sweeps, run):
    out = two_sweeps / "compared"
    done = run(f"base={two_sweeps / 'a'}", f"yarn={two_sweeps / 'b'}", "--out", out,
               "--metric", "accuracy")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [row for row in read_csv(out / "summary.accuracy.csv") if row["length"] == "8"]
    means = {row["settings"]: float(row["mean"]) for row in rows}
    assert means == {"sweep=base": 0.5, "sweep=yarn": 0.9}


def test_compared_sweeps_default_to_their_folder_names(two_sweeps, run):
    out = two_sweeps / "compared"
    done = run(two_sweeps / "a", two_sweeps / "b", "--out", out)
    assert done.returncode == 0, done.stderr
    assert {row["settings"] for row in read_csv(out / "summary.csv")} == {"sweep=a", "sweep=b"}


def test_compared_sweeps_leave_the_sweeps_untouched(two_sweeps, run):
    before = files(two_sweeps / "a")
    run(two_sweeps / "a", two_sweeps / "b", "--out", two_sweeps / "compared")
    assert files(two_sweeps / "a") == before


def test_comparing_without_out_is_refused_with_nothing_written(two_sweeps, run):
    before = files(two_sweeps)
    done = run(two_sweeps / "a", two_sweeps / "b")
    assert (done.returncode, done.stderr.strip()) == (
        2,
        "error: several folders are compared into a folder of their own: --out DIR",
    )
    assert files(two_sweeps) == before


def test_two_sweeps_with_one_label_are_refused(two_sweeps, run):
    done = run(f"x={two_sweeps / 'a'}", f"x={two_sweeps / 'b'}", "--out", two_sweeps / "c")
    assert done.returncode == 2 and "share the label 'x'" in done.stderr
    assert not (two_sweeps / "c").exists()


# -- a folder that cannot be written -----------------------------------------------------------
def test_a_read_only_folder_is_refused_in_one_line_naming_the_way_out(sweep):
    done = script(read_only(sweep, [*AGGREGATE, str(sweep)]))
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
    assert done.stderr.startswith(f"error: {sweep} is not writable")
    assert "--out DIR" in done.stderr and "Traceback" not in done.stderr


def test_a_read_only_folder_aggregates_into_out(sweep, tmp_path):
    done = script(read_only(sweep, [*AGGREGATE, str(sweep), "--out", str(tmp_path / "o")]))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "o" / "summary.csv").is_file()


# -- NaN ---------------------------------------------------------------------------------------
@pytest.fixture
def nan_sweep(tmp_path) -> Path:
    """Three seeds of one configuration; seed 1 diverged (accuracy NaN at length 8)."""
    for seed, value in enumerate((0.5, float("nan"), 0.7)):
        write_run(tmp_path / "s", f"seed{seed}", pe="rope", seed=seed, accuracy={4: 1.0, 8: value})
    return tmp_path / "s"


def test_nan_values_are_counted_not_averaged(nan_sweep, run):
    assert run(nan_sweep, "--metric", "accuracy").returncode == 0
    (row,) = [r for r in read_csv(nan_sweep / "summary.accuracy.csv") if r["length"] == "8"]
    assert (row["n_seeds"], float(row["mean"]), row["n_nan"]) == ("2", pytest.approx(0.6), "1")


def test_nan_values_are_reported_on_stderr(nan_sweep, run):
    done = run(nan_sweep, "--metric", "accuracy")
    assert "warning: 1 NaN value(s) of accuracy in 1 run(s)" in done.stderr
    assert "seed1" in done.stderr


def test_nan_values_are_marked_in_summary_md(nan_sweep, run):
    run(nan_sweep, "--metric", "accuracy")
    text = (nan_sweep / "summary.accuracy.md").read_text()
    assert "[1 NaN]" in text and "nan ±" not in text


def test_a_nan_fails_the_length_generalisation_ratio(nan_sweep, run):
    run(nan_sweep, "--metric", "accuracy", "--ratio-thresholds", "0.4")
    (row,) = read_csv(nan_sweep / "ratios.accuracy.csv")
    # seeds 0 and 2 keep 0.4 up to 8 (ρ 2); seed 1's NaN stops it at the training length (ρ 1)
    assert float(row["mean"]) == pytest.approx(5 / 3)


def test_a_write_that_fails_on_the_way_ends_in_one_line_and_exit_4(sweep, monkeypatch, capsys):
    import errno

    import lengen.aggregate.report as report
    from lengen.aggregate.command import main

    def full_disk(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "atomic_write", full_disk)
    assert main([str(sweep)]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(No space left on device)" in err
