"""scripts/aggregate.py and lengen.aggregate: grouping, statistics, flags, ranking, outputs,
and load_sweep.

Every expected number is computed by hand in the test (the fixture is tests/sweep_fixture.py).
"""

from __future__ import annotations

import csv
import functools
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import lengen.aggregate
from helpers import ROOT
from lengen.aggregate import (
    SUMMARY_COLUMNS,
    average_ranks,
    load_sweep,
    main,
    warnings_for,
    write_outputs,
)
from lengen.aggregate.stats import seed_statistics
from sweep_fixture import make_sweep, write_run

#: the fixture's numbers are per-token accuracies (exact match = accuracy / 2); the default
#: metric (exact match) has tests of its own below
aggregate = functools.partial(lengen.aggregate.aggregate, metric="accuracy")


@pytest.fixture
def sweep(tmp_path) -> Path:
    return make_sweep(tmp_path / "sweep")


def the_row(summary, pe, length, settings=None):
    """The one summary row of ``pe`` at ``length`` (whose settings equal ``settings`` if given)."""
    matches = [
        r
        for r in summary.rows
        if r["pe"] == pe and r["length"] == length and settings in (None, r["settings"])
    ]
    assert len(matches) == 1, matches
    return matches[0]


# -- Student t ---------------------------------------------------------------------------------
def interval(n_seeds: int) -> dict:
    """seed_statistics of one cell holding ``n_seeds`` values 0, 1, 0, 1, …"""
    return seed_statistics([float(i % 2) for i in range(n_seeds)], higher_is_better=True)


def t_factor(n_seeds: int) -> float:
    """The t quantile the 95% CI was built with: its half-width in standard errors std / √n."""
    stat = interval(n_seeds)
    return (stat["ci95_high"] - stat["mean"]) / (stat["std"] / math.sqrt(n_seeds))


@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (199_999, 1.95996)],
)
def test_ci_t_quantile_matches_tables(df, expected):
    # 199,999 degrees of freedom: the normal quantile (1.95996) to 1e-4
    assert t_factor(df + 1) == pytest.approx(expected, abs=1e-4)


def test_ci_t_quantile_df1_is_the_cauchy_closed_form():
    assert t_factor(2) == pytest.approx(math.tan(math.pi * 0.475), rel=1e-10)


def test_ci_is_symmetric_about_the_mean_and_not_clipped():
    stat = interval(6)  # mean 0.5, half-width 2.5706 · 0.5477 / √6 = 0.5750: leaves [0, 1]
    assert stat["ci95_high"] - stat["mean"] == pytest.approx(stat["mean"] - stat["ci95_low"])
    assert stat["ci95_high"] == pytest.approx(
        0.5 + 2.5706 * math.sqrt(0.3) / math.sqrt(6), abs=1e-4
    )


# -- grouping and statistics -------------------------------------------------------------------
def test_mean_std_ci_against_hand_computation(sweep):
    row = the_row(aggregate(sweep), "alibi", 8, "model.d_model=128")
    # values 0.5 and 0.7: mean 0.6, std = sqrt(0.02) = 0.141421, half-width 12.7062 · 0.1
    assert (row["n_seeds"], row["seeds"]) == (2, "0 1")
    assert row["mean"] == pytest.approx(0.6)
    assert row["std"] == pytest.approx(0.1414214, abs=1e-7)
    assert row["ci95_low"] == pytest.approx(0.6 - 12.7062 * 0.1, abs=1e-4)
    assert row["ci95_high"] == pytest.approx(0.6 + 12.7062 * 0.1, abs=1e-4)


def test_three_seeds_use_t_with_two_degrees_of_freedom(sweep):
    row = the_row(aggregate(sweep), "rope", 8)
    # 0.2, 0.3, 0.1: mean 0.2, std 0.1, half-width 4.3027 · 0.1 / sqrt(3)
    assert row["n_seeds"] == 3
    assert row["std"] == pytest.approx(0.1)
    assert row["ci95_high"] - row["mean"] == pytest.approx(4.3027 * 0.1 / math.sqrt(3), abs=1e-4)


def test_best_of_seeds_is_the_maximum_for_accuracy(sweep):
    assert the_row(aggregate(sweep), "rope", 8)["best_of_seeds"] == pytest.approx(0.3)


def test_runs_differing_in_a_non_seed_key_are_not_averaged(sweep):
    summary = aggregate(sweep)
    small = the_row(summary, "alibi", 8, "model.d_model=64")
    large = the_row(summary, "alibi", 8, "model.d_model=128")
    assert small["config_hash"] != large["config_hash"]
    assert (small["n_seeds"], small["mean"]) == (1, pytest.approx(0.9))


def test_single_seed_has_no_std_and_no_ci(sweep):
    row = the_row(aggregate(sweep), "alibi", 8, "model.d_model=64")
    assert (row["std"], row["ci95_low"], row["ci95_high"]) == (None, None, None)


def test_logger_choice_does_not_split_a_group(sweep):
    # alibi_seed1 logs with wandb, alibi_seed0 with csv: one configuration with both seeds
    assert the_row(aggregate(sweep), "alibi", 4, "model.d_model=128")["seeds"] == "0 1"


def test_hydra_folder_is_not_a_run(sweep):
    assert not any(".hydra" in run.name for run in aggregate(sweep).runs)


def test_one_row_per_configuration_length_and_protocol(sweep):
    keys = [(r["config_hash"], r["length"], r["protocol"]) for r in aggregate(sweep).rows]
    assert len(keys) == len(set(keys)) == 6  # 3 configurations × 2 lengths


# -- flags -------------------------------------------------------------------------------------
def test_failed_run_is_listed(sweep):
    summary = aggregate(sweep)
    assert [run.name for run in summary.failed] == ["alibi_seed2_failed"]
    assert "no results.json" in summary.failed[0].reason


def test_not_learned_run_is_flagged_and_kept(sweep):
    summary = aggregate(sweep)
    assert [run.name for run in summary.not_learned] == ["rope_seed2"]
    row = the_row(summary, "rope", 8)
    assert (row["n_not_learned"], row["n_seeds"]) == (1, 3)


def test_exclude_not_learned_drops_it_from_the_statistics(sweep):
    row = the_row(aggregate(sweep, exclude_not_learned=True), "rope", 8)
    assert (row["n_seeds"], row["n_not_learned"]) == (2, 1)
    assert row["mean"] == pytest.approx(0.25)


def test_min_accuracy_threshold_is_respected(sweep):
    assert aggregate(sweep, min_accuracy=0.5).not_learned == []


def test_duplicate_seed_is_not_counted(sweep):
    write_run(sweep, "zz_alibi_seed0_again", pe="alibi", seed=0, accuracy={4: 0.95, 8: 0.5})
    summary = aggregate(sweep)
    assert [run.name for run in summary.duplicates] == ["zz_alibi_seed0_again"]
    assert the_row(summary, "alibi", 8, "model.d_model=128")["n_seeds"] == 2


def test_unreadable_results_json_is_listed_as_failed(tmp_path):
    run_dir = write_run(tmp_path, "broken", accuracy={4: 1.0})
    (run_dir / "results.json").write_text("{not json")
    (failed,) = aggregate(tmp_path).failed
    assert "unreadable results.json" in failed.reason


def test_tag_files_are_ignored_by_default(sweep):
    write_run(sweep, "alibi_seed0", accuracy={4: 0.1, 8: 0.1}, results_file="results.near.json")
    summary = aggregate(sweep)
    assert summary.ignored_tag_files == ["alibi_seed0/results.near.json"]
    assert the_row(summary, "alibi", 8, "model.d_model=128")["mean"] == pytest.approx(0.6)


def test_tag_aggregates_the_reevaluation_with_its_overrides_applied(sweep):
    extra = {"overrides": ["model.d_model=32"], "tag": "near"}
    write_run(
        sweep, "alibi_seed0", accuracy={8: 0.4}, results_file="results.near.json", extra=extra
    )
    original = the_row(aggregate(sweep), "alibi", 8, "model.d_model=128")
    summary = aggregate(sweep, tag="near")
    (row,) = summary.rows
    assert (row["mean"], row["n_seeds"]) == (pytest.approx(0.4), 1)
    assert row["config_hash"] != original["config_hash"]  # d_model=32 is another configuration
    assert len(summary.failed) == len(summary.runs) - 1  # no results.near.json elsewhere


def test_language_modelling_rows_fall_back_to_ppl(tmp_path):
    write_run(tmp_path, "lm0", seed=0, ppl={4: 10.0, 8: 30.0})
    write_run(tmp_path, "lm1", seed=1, ppl={4: 12.0, 8: 20.0})
    summary = aggregate(tmp_path)
    row = next(r for r in summary.rows if r["length"] == 8)
    assert (row["metric"], row["mean"], row["best_of_seeds"]) == ("ppl", 25.0, 20.0)
    assert summary.runs[0].learned is None  # no accuracy: not checked


# -- ranking -----------------------------------------------------------------------------------
def test_average_ranks_share_ties():
    assert average_ranks([0.5, 0.9, 0.9, 0.1]) == [3.0, 1.5, 1.5, 4.0]


def test_average_ranks_lower_is_better_for_ppl():
    assert average_ranks([30.0, 10.0, 20.0], higher_is_better=False) == [3.0, 1.0, 2.0]


def test_mrr_against_hand_computation(tmp_path):
    # length 8: A 0.6, B 0.6, C 0.2 -> ranks 1.5, 1.5, 3; length 16: A 0.1, B 0.3, C 0.2 -> 3, 1, 2
    for pe, at8, at16 in (("A", 0.6, 0.1), ("B", 0.6, 0.3), ("C", 0.2, 0.2)):
        write_run(tmp_path, pe, pe=pe, accuracy={4: 1.0, 8: at8, 16: at16})
    mrr = {e["pe"]: e["mrr"] for e in aggregate(tmp_path).ranking if e["scope"] == "all"}
    assert mrr == pytest.approx(
        {"A": (1 / 1.5 + 1 / 3) / 2, "B": (1 / 1.5 + 1) / 2, "C": (1 / 3 + 1 / 2) / 2}
    )


def test_ranking_skips_in_distribution_and_single_pe_comparisons(sweep):
    ranking = aggregate(sweep).ranking
    # only length 8 at d_model 128 compares two PEs (d_model 64 holds alibi alone)
    assert {e["pe"]: (e["mrr"], e["n_comparisons"]) for e in ranking} == {
        "alibi": (1.0, 1),
        "rope": (0.5, 1),
    }


# -- outputs and CLI ---------------------------------------------------------------------------
def test_summary_csv_has_the_documented_columns(sweep):
    write_outputs(aggregate(sweep))
    with open(sweep / "summary.accuracy.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {"config_hash", "pe", "task", "model", "train_len", "length", "protocol"} <= set(rows[0])
    assert {"in_distribution", "mean", "std", "ci95_low", "ci95_high", "n_seeds"} <= set(rows[0])
    assert {"best_of_seeds", "n_not_learned"} <= set(rows[0])
    assert len(rows) == 6


def test_summary_md_states_the_method_and_lists_flags(sweep):
    write_outputs(aggregate(sweep))
    text = (sweep / "summary.accuracy.md").read_text()
    assert "95% CI, Student t, n−1 degrees of freedom" in text
    assert "alibi_seed2_failed" in text and "rope_seed2" in text
    assert "0.600 ± 1.271" in text  # the alibi cell at length 8


def test_failed_csv_lists_the_failed_run(sweep):
    write_outputs(aggregate(sweep))
    with open(sweep / "failed.csv") as handle:
        assert [row["run_dir"] for row in csv.DictReader(handle)] == ["alibi_seed2_failed"]


def test_cli_warns_on_stderr_and_exits_zero(sweep):
    completed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "aggregate.py"), str(sweep)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert "1 failed or missing run" in completed.stderr
    assert (sweep / "ranking.csv").is_file() and (sweep / "summary.md").is_file()


def test_cli_rejects_a_bad_threshold(sweep, capsys):
    assert main([str(sweep), "--min-accuracy", "1.5"]) == 2
    assert "min_accuracy must be in [0, 1]" in capsys.readouterr().err


def test_settings_name_the_key_that_splits_configurations(sweep):
    summary = aggregate(sweep)
    assert {r["settings"] for r in summary.rows if r["pe"] == "alibi"} == {
        "model.d_model=64",
        "model.d_model=128",
    }


def test_variants_of_one_pe_are_ranked_apart(tmp_path):
    write_run(
        tmp_path,
        "rope_small_base",
        pe="rope",
        accuracy={4: 1.0, 8: 0.5},
        overrides={"pe.base": 500.0},
    )
    write_run(
        tmp_path,
        "rope_large_base",
        pe="rope",
        accuracy={4: 1.0, 8: 0.3},
        overrides={"pe.base": 1e4},
    )
    write_run(tmp_path, "alibi", pe="alibi", accuracy={4: 1.0, 8: 0.4})
    ranking = {e["pe"]: e["position"] for e in aggregate(tmp_path).ranking}
    assert ranking == {"rope (pe.base=500.0)": 1, "alibi": 2, "rope (pe.base=10000.0)": 3}


def test_tag_mode_takes_the_learned_flag_from_the_training_run(sweep):
    # rope_seed2 did not learn; its re-evaluation holds no row at the training length
    write_run(
        sweep, "rope_seed2", pe="rope", seed=2, accuracy={8: 0.1}, results_file="results.far.json"
    )
    assert [run.name for run in aggregate(sweep, tag="far").not_learned] == ["rope_seed2"]


def test_failed_run_reason_comes_from_failed_json(tmp_path):
    run_dir = tmp_path / "0_copy_decoder_xpos_len8_seed0"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("seed: 0\npe: {name: xpos}\n")
    (run_dir / "failed.json").write_text(
        '{"error": "pe: XPos is defined for causal attention only"}'
    )
    main([str(tmp_path)])
    assert "pe: XPos is defined for causal attention only" in (tmp_path / "failed.csv").read_text()


def test_a_null_key_groups_with_an_absent_one():
    """Runs of a lengen version without a key (now null by default) are the same configuration."""
    from lengen.aggregate import config_hash

    old = {"seed": 0, "pe": {"name": "rope"}, "data": {"len": 16}}
    new = {**old, "init_from": None}
    assert config_hash(old) == config_hash(new)
    assert config_hash(old) != config_hash({**old, "init_from": "runs/a"})


def test_task_parameters_do_not_label_other_tasks(tmp_path):
    # copy has n_symbols, addition has base: neither splits anything within its own task
    for task, params in (("copy", {"n_symbols": 16}), ("addition", {"base": 10})):
        for seed in (0, 1):
            task_node = {"_target_": f"lengen.data.tasks.{task.title()}", **params}
            write_run(
                tmp_path,
                f"{task}_{seed}",
                seed=seed,
                accuracy={4: 1.0, 8: 0.5},
                overrides={"data.name": task, "data.task": task_node},
            )
    assert {r["settings"] for r in aggregate(tmp_path).rows} == {""}


def test_a_task_parameter_that_varies_within_the_task_is_named(tmp_path):
    for base in (2, 10):
        write_run(
            tmp_path,
            f"addition_base{base}",
            accuracy={4: 1.0, 8: 0.5},
            overrides={"data.name": "addition", "data.task": {"base": base}},
        )
    settings = {r["settings"] for r in aggregate(tmp_path).rows}
    assert settings == {"data.task.base=2", "data.task.base=10"}


def test_summary_table_has_the_summary_csv_columns(sweep):
    summary = aggregate(sweep)
    assert list(summary.table.columns) == list(SUMMARY_COLUMNS)
    assert len(summary.table) == len(summary.rows) == 6


# -- load_sweep --------------------------------------------------------------------------------
def test_load_sweep_has_the_documented_columns(sweep):
    columns = set(load_sweep(sweep).columns)
    assert {"run_dir", "seed", "status", "reason", "config_hash"} <= columns
    assert {"pe.name", "model.d_model", "data.len", "optim.lr", "eval.samples"} <= columns
    assert {"length", "protocol", "in_distribution", "max_position", "n_examples"} <= columns
    assert {"accuracy", "exact_match", "loss", "ppl", "chance_accuracy"} <= columns


def test_load_sweep_has_one_row_per_run_length_and_protocol(sweep):
    finished = load_sweep(sweep).dropna(subset=["length"])
    keys = list(zip(finished["run_dir"], finished["length"], finished["protocol"], strict=True))
    assert len(keys) == len(set(keys)) == 6 * 2  # 6 finished runs × lengths 4 and 8


def test_load_sweep_holds_each_results_row_value(sweep):
    frame = load_sweep(sweep).set_index(["run_dir", "length"])
    assert frame.loc[("rope_seed1", 8), "accuracy"] == 0.3
    assert frame.loc[("rope_seed1", 8), "exact_match"] == 0.15
    assert frame.loc[("rope_seed1", 8), "seed"] == 1


def test_load_sweep_config_key_is_a_dotted_column(sweep):
    frame = load_sweep(sweep)
    d_model = dict(zip(frame["run_dir"], frame["model.d_model"], strict=False))
    assert d_model["alibi_d64_seed0"] == 64
    assert d_model["alibi_seed0"] == 128


def test_load_sweep_lists_a_failed_run_with_its_status(sweep):
    frame = load_sweep(sweep)
    failed = frame[frame["run_dir"] == "alibi_seed2_failed"]
    assert len(failed) == 1
    assert failed["status"].item() == "failed"
    assert "no results.json" in failed["reason"].item()
    assert pd.isna(failed["length"].item()) and failed["pe.name"].item() == "alibi"


def test_load_sweep_flags_a_run_that_did_not_learn(sweep):
    frame = load_sweep(sweep)
    assert set(frame.loc[frame["run_dir"] == "rope_seed2", "status"]) == {"not_learned"}
    assert set(frame.loc[frame["run_dir"] == "rope_seed0", "status"]) == {"ok"}


def test_load_sweep_marks_a_duplicate_seed(sweep):
    write_run(sweep, "zz_alibi_seed0_again", pe="alibi", seed=0, accuracy={4: 0.95, 8: 0.5})
    frame = load_sweep(sweep)
    assert set(frame.loc[frame["run_dir"] == "zz_alibi_seed0_again", "status"]) == {"duplicate"}


def test_load_sweep_hashes_match_summary_csv(sweep):
    frame = load_sweep(sweep)
    summary_hashes = {r["config_hash"] for r in aggregate(sweep).rows}
    assert set(frame.loc[frame["status"] != "failed", "config_hash"]) == summary_hashes


def test_load_sweep_with_a_tag_reads_the_reevaluation_with_its_overrides(sweep):
    extra = {"overrides": ["model.d_model=32"], "tag": "near"}
    write_run(
        sweep, "alibi_seed0", accuracy={8: 0.4}, results_file="results.near.json", extra=extra
    )
    frame = load_sweep(sweep, tag="near").set_index("run_dir")
    assert frame.loc["alibi_seed0", "accuracy"] == 0.4
    assert frame.loc["alibi_seed0", "model.d_model"] == 32


def test_load_sweep_notebook_idiom_gives_the_hand_computed_means(sweep):
    frame = load_sweep(sweep)
    means = frame[frame["length"] == 8].groupby("pe.name")["accuracy"].mean()
    # alibi: 0.5, 0.7 and 0.9 (d_model 64); rope: 0.2, 0.3, 0.1 — nothing grouped or dropped
    assert means.to_dict() == pytest.approx({"alibi": 0.7, "rope": 0.2})


def test_load_sweep_has_the_result_columns_when_no_run_finished(tmp_path):
    write_run(tmp_path, "killed", finished=False)
    frame = load_sweep(tmp_path)
    assert {"length", "protocol", "accuracy", "ppl"} <= set(frame.columns)
    assert frame["length"].isna().all()


# -- headline metric ---------------------------------------------------------------------------
def test_default_metric_is_exact_match(sweep):
    row = the_row(lengen.aggregate.aggregate(sweep), "alibi", 8, "model.d_model=128")
    # exact match = accuracy / 2 in the fixture: 0.25 and 0.35
    assert (row["metric"], row["mean"]) == ("exact_match", pytest.approx(0.3))


def test_cli_default_metric_is_exact_match(sweep):
    main([str(sweep)])
    with open(sweep / "summary.csv") as handle:
        assert {row["metric"] for row in csv.DictReader(handle)} == {"exact_match"}


# -- ranking only where some encoding learned --------------------------------------------------
def unlearned_task_sweep(folder: Path) -> Path:
    """copy: A learned, B did not (still a comparison); reverse: neither PE learned."""
    write_run(folder, "copy_A", pe="A", accuracy={4: 0.95, 8: 0.6, 16: 0.2})
    write_run(folder, "copy_B", pe="B", accuracy={4: 0.5, 8: 0.3, 16: 0.4})
    for pe, at8 in (("A", 0.2), ("B", 0.4)):
        reverse = {"data.name": "reverse"}
        write_run(folder, f"reverse_{pe}", pe=pe, accuracy={4: 0.5, 8: at8}, overrides=reverse)
    return folder


def test_ranking_leaves_out_comparisons_in_which_no_encoding_learned(tmp_path):
    summary = aggregate(unlearned_task_sweep(tmp_path))
    # only copy's lengths 8 and 16 are ranked: A 1st then 2nd, B 2nd then 1st
    ranks = {e["pe"]: (e["mrr"], e["n_comparisons"]) for e in summary.ranking}
    assert ranks == {"A": (0.75, 2), "B": (0.75, 2)}
    assert [(e["task"], e["n_comparisons"]) for e in summary.left_out] == [("reverse", 1)]
    assert summary.left_out[0]["reason"] == "no encoding learned reverse in distribution"


def test_left_out_comparisons_are_listed_in_ranking_csv_and_summary_md(tmp_path):
    write_outputs(aggregate(unlearned_task_sweep(tmp_path)))
    with open(tmp_path / "ranking.accuracy.csv") as handle:
        left_out = [row for row in csv.DictReader(handle) if row["scope"] == "left out"]
    assert [(r["task"], r["model"], r["train_len"], r["protocol"]) for r in left_out] == [
        ("reverse", "decoder", "4", "teacher_forced")
    ]
    assert left_out[0]["n_comparisons"] == "1"
    text = (tmp_path / "summary.accuracy.md").read_text()
    assert "No encoding learned reverse in distribution: nothing to rank." in text
    assert "| reverse | decoder | 4 | teacher_forced | 1 | no encoding learned reverse" in text


def test_nothing_to_rank_when_no_encoding_learned(tmp_path):
    for pe, at8 in (("A", 0.2), ("B", 0.4)):
        write_run(tmp_path, pe, pe=pe, accuracy={4: 0.5, 8: at8})
    summary = aggregate(tmp_path)
    assert summary.ranking == []
    assert "No encoding learned copy in distribution: nothing to rank." in (
        lengen.aggregate.format_markdown(summary)
    )


# -- trivial baseline --------------------------------------------------------------------------
def baseline_sweep(folder: Path, at8: tuple[float, float] = (0.6, 0.7)) -> Path:
    """alibi, seeds 0 and 1, whose rows carry baselines (accuracy 0.5 / 0.3 at length 8)."""
    for seed, value in enumerate(at8):
        fields = {
            4: {"baseline_accuracy": 0.5, "baseline_exact_match": 0.0},
            8: {"baseline_accuracy": 0.5 - seed / 10, "baseline_exact_match": 0.1 + seed / 10},
        }
        write_run(folder, f"s{seed}", seed=seed, accuracy={4: 1.0, 8: value}, row_fields=fields)
    return folder


def test_baseline_is_the_seed_mean_of_the_metrics_baseline(tmp_path):
    baseline_sweep(tmp_path)
    assert the_row(aggregate(tmp_path), "alibi", 8)["baseline"] == pytest.approx(0.45)
    exact = lengen.aggregate.aggregate(tmp_path, metric="exact_match")
    assert the_row(exact, "alibi", 8)["baseline"] == pytest.approx(0.15)


def test_baseline_is_none_for_loss_and_for_rows_without_one(tmp_path, sweep):
    folder = baseline_sweep(tmp_path / "baselines")
    row = the_row(lengen.aggregate.aggregate(folder, metric="loss"), "alibi", 8)
    assert (row["baseline"], row["above_baseline"]) == (None, None)
    row = the_row(aggregate(sweep), "rope", 8)
    assert (row["baseline"], row["above_baseline"]) == (None, None)


def test_above_baseline_uses_the_mean_with_one_seed(tmp_path):
    fields = {8: {"baseline_accuracy": 0.5}}
    write_run(tmp_path, "above", pe="A", accuracy={4: 1.0, 8: 0.6}, row_fields=fields)
    write_run(tmp_path, "below", pe="B", accuracy={4: 1.0, 8: 0.4}, row_fields=fields)
    summary = aggregate(tmp_path)
    assert the_row(summary, "A", 8)["above_baseline"] is True
    assert the_row(summary, "B", 8)["above_baseline"] is False


def test_summary_md_marks_cells_not_above_the_baseline(tmp_path):
    write_outputs(aggregate(baseline_sweep(tmp_path, at8=(0.45, 0.35))))  # each below its own
    text = (tmp_path / "summary.accuracy.md").read_text()
    assert "| 0.400 ± 0.635 ≤b |" in text
    assert "≤b: not above the trivial baseline" in text


# -- training to a criterion -------------------------------------------------------------------
def criterion(reached: bool) -> dict:
    step = 300 if reached else None
    return {
        "criterion": {"metric": "val/accuracy", "target": 0.9, "checks": 2}
        | {"reached": reached, "reached_at_step": step}
    }


def criterion_sweep(folder: Path) -> Path:
    write_run(folder, "reached", seed=0, accuracy={4: 1.0, 8: 0.8}, extra=criterion(True))
    write_run(folder, "missed", seed=1, accuracy={4: 1.0, 8: 0.2}, extra=criterion(False))
    write_run(folder, "fixed_steps", seed=2, accuracy={4: 1.0, 8: 0.4})
    return folder


def test_reached_criterion_aggregates_only_runs_that_reached_it(tmp_path):
    summary = aggregate(criterion_sweep(tmp_path), reached_criterion=True)
    assert [run.name for run in summary.aggregated] == ["reached"]
    assert the_row(summary, "alibi", 8)["mean"] == pytest.approx(0.8)
    assert sorted(run.name for run in summary.excluded) == ["fixed_steps", "missed"]
    assert the_row(aggregate(tmp_path), "alibi", 8)["n_seeds"] == 3  # without the flag: all


def test_load_sweep_says_which_runs_reached_their_criterion(tmp_path):
    frame = load_sweep(criterion_sweep(tmp_path)).drop_duplicates("run_dir").set_index("run_dir")
    assert frame.loc["reached", "criterion_reached"] is True
    assert frame.loc["reached", "reached_at_step"] == 300
    assert frame.loc["missed", "criterion_reached"] is False
    assert pd.isna(frame.loc["fixed_steps", "criterion_reached"])  # trained without a criterion


def test_reached_criterion_counts_the_excluded_runs_in_summary_md(tmp_path):
    main([str(criterion_sweep(tmp_path)), "--reached-criterion"])
    text = (tmp_path / "summary.md").read_text()
    assert "2 run(s) excluded (1 trained without a criterion, 1 that did not reach it)" in text


def test_runs_csv_says_whether_and_when_the_criterion_was_reached(tmp_path):
    main([str(criterion_sweep(tmp_path))])
    with open(tmp_path / "runs.csv") as handle:
        runs = {row["run_dir"]: row for row in csv.DictReader(handle)}
    columns = ("criterion_reached", "reached_at_step")
    assert [runs["reached"][c] for c in columns] == ["True", "300"]
    assert [runs["missed"][c] for c in columns] == ["False", ""]
    assert [runs["fixed_steps"][c] for c in columns] == ["", ""]


# -- spread over position draws ----------------------------------------------------------------
def draws_sweep(folder: Path) -> Path:
    for seed, std in enumerate((0.02, 0.04)):
        fields = {8: {"position_draws": 4, "accuracy_draw_std": std, "exact_match_draw_std": 0.1}}
        write_run(folder, f"s{seed}", seed=seed, accuracy={4: 1.0, 8: 0.8}, row_fields=fields)
    return folder


def test_draw_std_is_the_seed_mean_of_the_metrics_draw_std(tmp_path):
    row = the_row(aggregate(draws_sweep(tmp_path)), "alibi", 8)
    assert (row["draw_std"], row["position_draws"]) == (pytest.approx(0.03), 4)
    assert the_row(aggregate(tmp_path), "alibi", 4)["draw_std"] is None  # older rows: none


def test_summary_md_shows_the_draw_std_beside_the_seed_interval(tmp_path):
    write_outputs(aggregate(draws_sweep(tmp_path)))
    assert "0.800 ± 0.000 [draws ±0.030]" in (tmp_path / "summary.accuracy.md").read_text()


# -- runs that did not learn, said where users look --------------------------------------------
def test_every_section_using_unlearned_runs_names_them(sweep):
    text = lengen.aggregate.format_markdown(aggregate(sweep))
    results = text.split("## Results")[1].split("## Ranking")[0]
    ranking = text.split("## Ranking")[1].split("## Runs that did not learn")[0]
    assert "† 1 run(s) in this table did not learn in distribution" in results
    assert "rope_seed2" in results and "rope_seed2" in ranking
    assert "Caveat: 1 run(s) in the ranked comparisons did not learn" in ranking


def test_warnings_name_the_runs_that_did_not_learn(sweep):
    (line,) = [w for w in warnings_for(aggregate(sweep)) if "did not learn" in w]
    assert line.endswith(": rope_seed2")


def test_warnings_name_left_out_comparisons(tmp_path):
    lines = warnings_for(aggregate(unlearned_task_sweep(tmp_path)))
    assert any("left out: no encoding learned reverse in distribution" in w for w in lines)


# -- settings ----------------------------------------------------------------------------------
def test_settings_show_only_keys_that_vary_within_the_table(tmp_path):
    # an ad-hoc folder: a text run (keys of its own) beside copy runs that differ in d_model
    text = {"data.name": "text", "data.files": {"train": "train.txt", "validation": None}}
    write_run(tmp_path, "text", ppl={4: 10.0, 8: 30.0}, overrides=text | {"data.tokenizer": "bpe"})
    for d_model in (64, 128):
        write_run(
            tmp_path,
            f"copy{d_model}",
            accuracy={4: 1.0, 8: 0.5},
            overrides={"model.d_model": d_model},
        )
    settings = {(r["task"], r["settings"]) for r in aggregate(tmp_path).rows}
    assert settings == {("copy", "model.d_model=64"), ("copy", "model.d_model=128"), ("text", "")}
