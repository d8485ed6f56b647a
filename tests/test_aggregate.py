"""scripts/aggregate.py and lengen.aggregate: grouping, statistics, flags, ranking, outputs.

Every expected number is computed by hand in the test (the fixture is tests/sweep_fixture.py).
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

from lengen.aggregate import aggregate, average_ranks, main, t_quantile, write_outputs
from sweep_fixture import make_sweep, write_run

ROOT = Path(__file__).resolve().parents[1]


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
@pytest.mark.parametrize(
    ("df", "expected"),
    [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (math.inf, 1.95996)],
)
def test_t_quantile_matches_tables(df, expected):
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)


def test_t_quantile_df1_is_the_cauchy_closed_form():
    assert t_quantile(0.9, 1) == pytest.approx(math.tan(math.pi * 0.4), rel=1e-10)


def test_t_quantile_is_antisymmetric():
    assert t_quantile(0.025, 5) == pytest.approx(-t_quantile(0.975, 5), rel=1e-12)


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
    with open(sweep / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert {"config_hash", "pe", "task", "model", "train_len", "length", "protocol"} <= set(rows[0])
    assert {"in_distribution", "mean", "std", "ci95_low", "ci95_high", "n_seeds"} <= set(rows[0])
    assert {"best_of_seeds", "n_not_learned"} <= set(rows[0])
    assert len(rows) == 6


def test_summary_md_states_the_method_and_lists_flags(sweep):
    write_outputs(aggregate(sweep))
    text = (sweep / "summary.md").read_text()
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
    from lengen.aggregate import main

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
