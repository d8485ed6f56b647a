"""The tables of one sweep agree: extension.csv carries every column of summary.csv (the
baselines extension.md marks with, the seeds' min / max / best / worst per length), and the
notebook form of the tables (lengen.aggregate.load_tables) gives every one of them, ranking included,
as a DataFrame with its CSV's columns. On a constructed sweep folder, no training."""

from __future__ import annotations

import csv
import subprocess
import sys

import pandas as pd
import pytest

from helpers import ROOT
from sweep_fixture import write_run

SPREAD = ("min", "max", "best_of_seeds", "worst_of_seeds")


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """Two RoPE seeds re-evaluated under YaRN ×4, an ALiBi seed without re-evaluations, with
    baselines in the rows; aggregated once by scripts/aggregate.py."""
    folder = tmp_path_factory.mktemp("tables") / "s"
    baselines = {4: {"baseline_exact_match": 0.1}, 8: {"baseline_exact_match": 0.05}}
    for seed, value in ((0, 0.2), (1, 0.4)):
        write_run(folder, f"rope{seed}", pe="rope", seed=seed, accuracy={4: 1.0, 8: value},
                  row_fields=baselines)  # fmt: skip
        extra = {"overrides": ["pe.scaling=yarn", "pe.scaling_factor=4"], "tag": "y4"}
        write_run(folder, f"rope{seed}", pe="rope", seed=seed, accuracy={4: 1.0, 8: value + 0.3},
                  results_file="results.y4.json", extra=extra, row_fields=baselines)  # fmt: skip
    write_run(folder, "alibi0", pe="alibi", accuracy={4: 1.0, 8: 0.6}, row_fields=baselines)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "aggregate.py"), str(folder)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder


def read_csv(path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def header(path) -> list[str]:
    with path.open(newline="") as handle:
        return next(csv.reader(handle))


def own_rows(extended) -> tuple[list[dict], list[dict]]:
    """summary.csv's RoPE rows and extension.csv's method-none rows, in length order."""
    summary = [r for r in read_csv(extended / "summary.csv") if r["pe"] == "rope"]
    extension = [r for r in read_csv(extended / "extension.csv") if r["method"] == "none"]
    return summary, extension


def test_extension_csv_has_every_summary_csv_column(extended):
    missing = set(header(extended / "summary.csv")) - set(header(extended / "extension.csv"))
    assert missing == set()


def test_extension_csv_carries_the_baselines_of_summary_csv(extended):
    summary, extension = own_rows(extended)
    keys = ("length", "baseline", "above_baseline")
    assert [{k: r.get(k) for k in keys} for r in extension] == [
        {k: r[k] for k in keys} for r in summary
    ]


def test_extension_csv_carries_the_seed_spread_per_length_of_summary_csv(extended):
    summary, extension = own_rows(extended)
    keys = ("length", *SPREAD)
    assert [{k: r.get(k) for k in keys} for r in extension] == [
        {k: r[k] for k in keys} for r in summary
    ]


def test_every_notebook_table_is_a_dataframe_ranking_included(extended):
    from lengen.aggregate import load_tables

    tables = load_tables(extended)
    assert sorted(tables) == ["extension", "failed", "ranking", "ratios", "runs", "summary"]
    assert all(isinstance(frame, pd.DataFrame) for frame in tables.values())


def test_the_notebook_ranking_has_ranking_csv_columns_and_rows(extended):
    from lengen.aggregate import load_tables

    ranking = load_tables(extended)["ranking"]
    written = read_csv(extended / "ranking.csv")
    assert list(ranking.columns) == header(extended / "ranking.csv")
    assert list(ranking["pe"]) == [row["pe"] for row in written]


def test_the_notebook_extension_table_has_extension_csv_columns(extended):
    from lengen.aggregate import load_tables

    assert list(load_tables(extended)["extension"].columns) == header(extended / "extension.csv")
