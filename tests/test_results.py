"""results.json is strict JSON whatever the numbers."""

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


def test_provenance_records_the_cpu_model_and_threads():
    # runs are exact per CPU type only: a result must say which CPU and how many threads
    import torch

    from lengen.results import cpu_model, provenance

    record = provenance("cpu")
    assert record["cpu"] == cpu_model() != ""
    assert record["threads"] == torch.get_num_threads()


def test_cpu_model_is_the_cpuinfo_model_name():
    from pathlib import Path

    import pytest

    from lengen.results import cpu_model

    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        pytest.skip("no /proc/cpuinfo on this system")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")]  # fmt: skip
    assert cpu_model() == names[0]


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
