"""Seeds as a distribution (min, max, best and worst over seeds; ``--statistic``), the data seed
as a replicate of its configuration, and the length-generalisation ratio ρ_τ over seeds in
ratios.csv, summary.md and the ranking. Expected numbers are computed by hand; the fixture is
tests/sweep_fixture.py (per-token accuracies, exact match = accuracy / 2)."""

from __future__ import annotations

import csv
import functools

import pytest

import lengen.aggregate
from lengen.aggregate import main, write_outputs
from lengen.aggregate.stats import RATIO_COLUMNS, seed_statistics
from sweep_fixture import make_sweep, write_run

aggregate = functools.partial(lengen.aggregate.aggregate, metric="accuracy")


@pytest.fixture
def sweep(tmp_path):
    return make_sweep(tmp_path / "sweep")


def only(rows: list[dict], **match) -> dict:
    found = [row for row in rows if all(row[key] == value for key, value in match.items())]
    assert len(found) == 1, found
    return found[0]


# -- seed statistics ---------------------------------------------------------------------------
def test_min_and_max_are_the_extremes_whatever_the_direction():
    for higher_is_better in (True, False):
        stats = seed_statistics([0.3, 0.7, 0.5], higher_is_better)
        assert (stats["min"], stats["max"]) == (0.3, 0.7)


def test_best_and_worst_follow_the_metric_direction():
    accuracy = seed_statistics([0.3, 0.7, 0.5], higher_is_better=True)
    ppl = seed_statistics([30.0, 20.0, 25.0], higher_is_better=False)
    assert (accuracy["best_of_seeds"], accuracy["worst_of_seeds"]) == (0.7, 0.3)
    assert (ppl["best_of_seeds"], ppl["worst_of_seeds"]) == (20.0, 30.0)


def test_one_seed_has_min_and_max_but_no_spread():
    stats = seed_statistics([0.4], higher_is_better=True)
    assert (stats["min"], stats["max"], stats["std"], stats["ci95_low"]) == (0.4, 0.4, None, None)


def test_summary_rows_carry_min_and_max_over_seeds(sweep):
    row = only(aggregate(sweep).rows, pe="rope", length=8)  # seeds: 0.2, 0.3, 0.1
    assert (row["min"], row["max"], row["worst_of_seeds"]) == (0.1, 0.3, 0.1)


# -- --statistic -------------------------------------------------------------------------------
def two_pe_sweep(folder):
    """At length 8: A's seeds 0.1 and 0.9 (mean 0.5, max 0.9), B's 0.6 and 0.6 (mean 0.6)."""
    for seed, value in ((0, 0.1), (1, 0.9)):
        write_run(folder, f"A{seed}", pe="A", seed=seed, accuracy={4: 1.0, 8: value})
    for seed in (0, 1):
        write_run(folder, f"B{seed}", pe="B", seed=seed, accuracy={4: 1.0, 8: 0.6})
    return folder


def first_place(summary) -> str:
    return only(summary.ranking, scope="all", position=1)["pe"]


def test_the_ranking_ranks_by_the_mean_by_default(tmp_path):
    assert first_place(aggregate(two_pe_sweep(tmp_path))) == "B"


def test_statistic_max_ranks_by_the_best_seed(tmp_path):
    assert first_place(aggregate(two_pe_sweep(tmp_path), statistic="max")) == "A"


def test_statistic_max_shows_the_maximum_in_summary_md(tmp_path):
    summary = aggregate(two_pe_sweep(tmp_path), statistic="max")
    write_outputs(summary)
    text = (tmp_path / "summary.accuracy.max.md").read_text()
    assert "## Results (accuracy: maximum over seeds)" in text
    assert "| A | – | 2 | 1.000 (max of 2) | 0.900 (max of 2) |" in text


def test_cli_refuses_an_unknown_statistic(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([str(two_pe_sweep(tmp_path)), "--statistic", "median"])
    assert exit_.value.code == 2
    assert "--statistic: invalid choice: 'median'" in capsys.readouterr().err


# -- the data seed -----------------------------------------------------------------------------
def crossed_sweep(folder):
    """seed 0 with data seeds 0 (null) and 1, seed 1 with data seed 2: one configuration."""
    write_run(folder, "s0", seed=0, accuracy={4: 1.0, 8: 0.2})
    write_run(
        folder,
        "s0_d1",
        seed=0,
        accuracy={4: 1.0, 8: 0.4},
        overrides={"data.seed": 1},
        extra={"data_seed": 1},
    )
    write_run(folder, "s1_d2", seed=1, accuracy={4: 1.0, 8: 0.6}, overrides={"data.seed": 2})
    return folder


def test_runs_differing_in_data_seed_are_replicates_of_one_configuration(tmp_path):
    row = only(aggregate(crossed_sweep(tmp_path)).rows, length=8)
    assert (row["n_seeds"], row["mean"]) == (3, pytest.approx(0.4))


def test_seeds_list_the_data_seed_where_it_differs(tmp_path):
    # s1_d2's results.json lacks data_seed (written before it existed): config.yaml's is used
    assert only(aggregate(crossed_sweep(tmp_path)).rows, length=8)["seeds"] == "0 0:1 1:2"


def test_same_seed_and_data_seed_twice_is_a_duplicate(tmp_path):
    crossed_sweep(tmp_path)
    write_run(tmp_path, "s0_d1_again", seed=0, accuracy={4: 1.0, 8: 0.9}, extra={"data_seed": 1})
    summary = aggregate(tmp_path)
    assert [run.name for run in summary.duplicates] == ["s0_d1_again"]


def test_runs_csv_has_the_data_seed(tmp_path):
    write_outputs(aggregate(crossed_sweep(tmp_path)))
    with open(tmp_path / "runs.csv") as handle:
        assert {r["run_dir"]: r["data_seed"] for r in csv.DictReader(handle)} == {
            "s0": "0",
            "s0_d1": "1",
            "s1_d2": "2",
        }


# -- ρ_τ over seeds ----------------------------------------------------------------------------
def test_ratio_statistics_over_seeds(sweep):
    # rope at 4 (train_len) and 8: (0.98, 0.2), (0.97, 0.3), (0.6, 0.1): ρ_0.9 = 1, 1, 0
    row = only(aggregate(sweep).ratios, pe="rope", tau=0.9)
    assert (row["n_seeds"], row["mean"], row["min"], row["max"]) == (3, pytest.approx(2 / 3), 0, 1)
    assert (row["n_zero"], row["n_capped"]) == (1, 0)


def test_a_ratio_that_reached_the_longest_length_counts_as_capped(sweep):
    # alibi (d_model 128) at 8: 0.5 and 0.7 ≥ 0.5, the longest length: ρ_0.5 = 2, a lower bound
    row = only(aggregate(sweep).ratios, pe="alibi", tau=0.5, settings="model.d_model=128")
    assert (row["mean"], row["n_capped"], row["longest_ratio"]) == (2.0, 2, 2.0)


def test_ratio_thresholds_are_configurable(sweep):
    summary = aggregate(sweep, ratio_thresholds=[0.25])
    assert {row["tau"] for row in summary.ratios} == {0.25}
    # rope at 8: 0.2 < 0.25 (ρ 1), 0.3 (ρ 2), 0.1 (ρ 1)
    assert only(summary.ratios, pe="rope")["mean"] == pytest.approx(4 / 3)


def test_ratios_csv_has_the_documented_columns(sweep):
    write_outputs(aggregate(sweep))
    with open(sweep / "ratios.accuracy.csv") as handle:
        assert tuple(csv.DictReader(handle).fieldnames) == RATIO_COLUMNS


def test_the_ranking_reports_each_pes_mean_ratio(sweep):
    entries = {e["pe"]: e for e in aggregate(sweep).ranking}
    assert (entries["rope"]["rho_0.9"], entries["rope"]["rho_0.5"]) == pytest.approx((2 / 3, 1.0))


def test_summary_md_has_a_ratio_section(sweep):
    write_outputs(aggregate(sweep))
    text = (sweep / "summary.accuracy.md").read_text()
    assert "## Length-generalisation ratio ρ_τ" in text
    row = "| rope | model.d_model=128 | 0.9 | 3 | 0.667 ± 1.43 | 0.577 | 0 | 1 | 1 / 0 |"
    assert row in text


def test_cli_refuses_a_threshold_outside_the_unit_interval(sweep, capsys):
    assert main([str(sweep), "--ratio-thresholds", "0.9", "1.5"]) == 2
    assert "ratio thresholds must be numbers in (0, 1]" in capsys.readouterr().err


def test_a_first_place_shared_by_three_counts_for_each(tmp_path):
    # three PEs tie for first (average rank 2), a fourth is last: n_best 1, 1, 1 and 0
    for pe, value in (("A", 1.0), ("B", 1.0), ("C", 1.0), ("D", 0.5)):
        write_run(tmp_path, pe, pe=pe, seed=0, accuracy={4: 1.0, 8: value})
    ranking = aggregate(tmp_path).ranking
    best = {row["pe"]: row["n_best"] for row in ranking if row["scope"] == "all"}
    assert best == {"A": 1, "B": 1, "C": 1, "D": 0}


def test_a_comparison_in_which_every_pe_ties_has_no_first_place(tmp_path):
    for pe in ("A", "B"):  # both at 0 past L: neither is first
        write_run(tmp_path, pe, pe=pe, seed=0, accuracy={4: 1.0, 8: 0.0})
    ranking = aggregate(tmp_path).ranking
    assert [row["n_best"] for row in ranking if row["scope"] == "all"] == [0, 0]
