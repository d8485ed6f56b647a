"""The results schema: results.json is strict JSON whatever the numbers; what lengths count."""

from __future__ import annotations

import json

import pytest

from lengen.results import REQUIRED_KEYS, length_unit, write_results


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
