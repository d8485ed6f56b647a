"""scripts/summarize_tasks.sh: per-token tables under *.accuracy.*, exact-match tables under
the plain names, and the exact-match figures, as docs/reproductions.md reads them."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import pytest

from helpers import CONFIG_DIR
from sweep_fixture import make_sweep

SCRIPT = CONFIG_DIR.parent / "scripts" / "summarize_tasks.sh"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = make_sweep(tmp_path_factory.mktemp("summarize") / "sweep")
    done = subprocess.run(
        ["bash", str(SCRIPT), str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr
    return folder


def mean_at(path, pe: str, length: int) -> float:
    with open(path) as handle:
        rows = [r for r in csv.DictReader(handle) if r["pe"] == pe and r["length"] == str(length)]
    return float(rows[0]["mean"])


def test_per_token_tables_carry_the_accuracy_suffix(sweep):
    # the fixture's alibi seeds: per-token accuracy 0.5 and 0.7 at length 8
    assert mean_at(sweep / "summary.accuracy.csv", "alibi", 8) == pytest.approx(0.6)
    assert "Metric: `accuracy`" in (sweep / "summary.accuracy.md").read_text()
    assert (sweep / "ranking.accuracy.csv").is_file()


def test_plain_tables_hold_exact_match(sweep):
    # the fixture's exact match is half its per-token accuracy
    assert mean_at(sweep / "summary.csv", "alibi", 8) == pytest.approx(0.3)
    assert "Metric: `exact_match`" in (sweep / "summary.md").read_text()


def test_figures_show_exact_match(sweep):
    assert list(sweep.glob("extrapolation_exact_match_*.png"))
    assert not list(sweep.glob("extrapolation_accuracy_*"))
