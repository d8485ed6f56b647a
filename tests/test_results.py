"""The results schema: results.json is strict JSON whatever the numbers; what lengths count."""

from __future__ import annotations

import json

import pytest

from lengen.results import (
    REQUIRED_KEYS,
    below,
    format_ratios,
    learning_message,
    length_ratio,
    length_ratios,
    length_unit,
    write_results,
)


def test_non_finite_numbers_are_written_as_null(tmp_path):
    results = {key: None for key in REQUIRED_KEYS}
    results["eval"] = [
        {"length": 8, "protocol": "nonoverlap", "loss": 800.0, "ppl": float("inf")},
        {"length": 4, "protocol": "nonoverlap", "loss": float("nan"), "ppl": 2.0},
    ]
    path = tmp_path / "results.json"
    write_results(path, results)
    text = path.read_text()
    rows = json.loads(text, parse_constant=_reject)["eval"]
    assert [(r["length"], r["loss"], r["ppl"]) for r in rows] == [(4, None, 2.0), (8, 800.0, None)]


def _reject(name):
    raise AssertionError(f"results.json holds the non-JSON constant {name}")


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"length": 16, "accuracy": 0.5, "ppl": None}, ("length", "input symbols")),
        ({"length": 128, "accuracy": None, "ppl": 30.0}, ("length", "tokens")),
        ({"length": 8, "grid_shape": [8, 8], "accuracy": 1.0}, ("side", "cells")),
        ({"length": 16, "grid_shape": [8, 8], "accuracy": 1.0}, ("side", "pixels")),
    ],
)
def test_length_unit_names_what_a_rows_length_counts(row, expected):
    assert length_unit(row) == expected


# -- the length-generalisation ratio ρ_τ ------------------------------------------------------
def rows_of(values: dict[int, float | None], metric: str = "exact_match", protocol="greedy"):
    """Results rows at these lengths holding ``metric`` (the others null)."""
    return [{"length": n, "protocol": protocol, metric: v} for n, v in values.items()]


@pytest.mark.parametrize(
    ("values", "threshold", "expected"),
    [
        ({16: 1.0, 32: 0.95, 64: 0.6, 128: 0.1}, 0.9, 2.0),  # falling: the last length ≥ τ
        ({16: 1.0, 32: 0.95, 64: 0.6, 128: 0.1}, 0.5, 4.0),
        ({16: 1.0, 32: 0.4, 64: 0.95, 128: 0.95}, 0.9, 1.0),  # a dip stops it: no recovery
        ({16: 0.8, 32: 0.95}, 0.9, 0.0),  # the training length itself fails τ
        ({16: 1.0, 32: 1.0, 64: 1.0, 128: 0.9}, 0.9, 8.0),  # ≥ τ everywhere: the longest, 8×
        ({8: 0.2, 16: 1.0, 32: 0.95}, 0.9, 2.0),  # shorter lengths are not part of ρ
        ({12: 1.0, 32: 0.95, 64: 0.2}, 0.9, 2.0),  # no row at 16: the longest below anchors
        ({16: 1.0, 24: 0.9, 32: 0.5}, 0.9, 1.5),  # ≥ τ includes τ itself; lengths not powers
        ({16: 1.0, 32: None, 64: 1.0}, 0.5, 1.0),  # a missing value is a failure
    ],
)
def test_length_ratio_of_constructed_rows(values, threshold, expected):
    assert length_ratio(rows_of(values), 16, threshold, "exact_match") == expected


def test_length_ratio_is_none_without_a_row_at_or_below_the_training_length():
    assert length_ratio(rows_of({32: 1.0, 64: 1.0}), 16, 0.9, "exact_match") is None


def test_length_ratio_of_perplexity_is_relative_to_the_training_length():
    rows = rows_of({64: 40.0, 128: 20.0, 256: 21.0, 512: 30.0}, "ppl", "nonoverlap")
    # 20 / 21 = 0.952 ≥ 0.9, 20 / 30 = 0.667 < 0.9 (the shorter window's 40 is not part of it)
    assert length_ratio(rows, 128, 0.9, "ppl") == 2.0
    assert length_ratio(rows, 128, 0.5, "ppl") == 4.0


def test_length_ratios_are_per_protocol_on_the_headline_metric():
    rows = rows_of({16: 1.0, 32: 0.95, 64: 0.3}, protocol="greedy")
    rows += rows_of({16: 1.0, 32: 0.5, 64: 0.3}, protocol="teacher_forced")
    ratios = length_ratios(rows, 16, (0.9, 0.5))
    assert ratios == {
        "metric": "exact_match",
        "relative": False,
        "thresholds": [0.9, 0.5],
        "by_protocol": {
            "greedy": {"0.9": 2.0, "0.5": 2.0},
            "teacher_forced": {"0.9": 1.0, "0.5": 2.0},
        },
    }


def test_length_ratios_of_language_modelling_rows_use_perplexity():
    rows = rows_of({128: 20.0, 256: 30.0}, "ppl", "nonoverlap")
    for row in rows:
        row["exact_match"] = None
    ratios = length_ratios(rows, 128, (0.9,))
    assert (ratios["metric"], ratios["relative"]) == ("ppl", True)
    assert ratios["by_protocol"] == {"nonoverlap": {"0.9": 1.0}}


def test_format_ratios_marks_a_lower_bound_and_a_failure_at_the_training_length():
    ratios = length_ratios(rows_of({16: 0.95, 32: 0.95}), 16, (0.99, 0.9))
    line = format_ratios(ratios, 16, longest=32).splitlines()[1]
    assert line == "  greedy: ρ_0.99 = 0 (fails at the training length), ρ_0.9 ≥ 2"


@pytest.mark.parametrize(
    ("value", "text"), [(0.8983, "0.898"), (0.89999, "0.89999"), (0.06, "0.06"), (0.5, "0.50")]
)
def test_a_value_below_the_threshold_is_never_written_as_reaching_it(value, text):
    assert below(value, 0.9) == text


def verdict(value: float, **extra) -> dict:
    return {"learned": {"metric": "accuracy", "threshold": 0.9, "value": value,
                        "learned": value >= 0.9, **extra}}  # fmt: skip


def test_a_run_below_the_threshold_is_told_to_train_longer():
    message = learning_message(verdict(0.8983))
    assert message.startswith("not learned in distribution: per-token accuracy 0.898 at the")
    assert "trainer.max_steps" in message


def test_a_reevaluation_that_moves_a_learned_run_is_not_told_to_train_longer():
    message = learning_message(verdict(0.99, this_evaluation=0.41))
    assert message.startswith("this evaluation's per-token accuracy at the training length is 0.41")
    assert "max_steps" not in message


def test_a_learned_run_gets_no_warning():
    assert learning_message(verdict(0.99, this_evaluation=0.95)) is None
