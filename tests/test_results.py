"""results.json is strict JSON whatever the numbers."""

from __future__ import annotations

import json

from lengen.results import REQUIRED_KEYS, write_results


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
