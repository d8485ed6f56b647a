"""The "above the trivial baseline" verdict of summary rows (``above_baseline``, summary.md's
``≤b``) on constructed numbers: seeds that agree decide with any n, even 2, whose t-interval
(±12.7 standard errors) cannot; seeds that disagree are decided by the interval (many seeds, as before) or not at all."""

from __future__ import annotations

import lengen.aggregate
from sweep_fixture import write_run


def verdict(tmp_path, at8: list[float], baselines: list[float]):
    """above_baseline of the length-8 row of one configuration whose seed i scores at8[i]
    against a row baseline of baselines[i]."""
    for seed, (value, baseline) in enumerate(zip(at8, baselines, strict=True)):
        fields = {8: {"baseline_accuracy": baseline}}
        write_run(tmp_path, f"s{seed}", seed=seed, accuracy={4: 1.0, 8: value}, row_fields=fields)
    summary = lengen.aggregate.aggregate(tmp_path, metric="accuracy")
    (row,) = [r for r in summary.rows if r["length"] == 8]
    return row


def test_two_seeds_both_ten_times_the_baseline_are_above_it(tmp_path):
    row = verdict(tmp_path, [0.45, 0.95], [0.04, 0.04])
    assert row["ci95_low"] < row["baseline"]  # the t-interval alone cannot say so with n = 2
    assert row["above_baseline"] is True


def test_one_seed_within_the_margin_of_the_baseline_is_not_above_it(tmp_path):
    assert verdict(tmp_path, [0.405], [0.40])["above_baseline"] is False


def test_a_seed_within_the_margin_of_the_baseline_is_not_above_it(tmp_path):
    # 0.405 beats 0.40 by less than BASELINE_MARGIN (0.01): the seeds disagree, n = 2 decides nothing
    assert verdict(tmp_path, [0.90, 0.405], [0.40, 0.40])["above_baseline"] is None


def test_two_seeds_that_disagree_get_no_verdict(tmp_path):
    assert verdict(tmp_path, [0.95, 0.02], [0.04, 0.04])["above_baseline"] is None


def test_each_seed_is_compared_with_its_own_rows_baseline(tmp_path):
    # 0.5 beats the mean baseline 0.35 but not its own row's 0.6: the seeds disagree
    assert verdict(tmp_path, [0.9, 0.5], [0.1, 0.6])["above_baseline"] is None


def test_summary_md_marks_no_cell_whose_seeds_disagree(tmp_path):
    folder = tmp_path / "sweep"
    verdict(folder, [0.95, 0.02], [0.04, 0.04])
    summary = lengen.aggregate.aggregate(folder, metric="accuracy")
    assert "≤b" not in lengen.aggregate.format_markdown(summary)
