"""scripts/bench_options.py's bookkeeping (its timings are a benchmark's, not a test's)."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import load_script

options = load_script("bench_options")


def test_paired_ratios_are_the_row_over_its_baseline_step_by_step():
    summary = options.paired_ratios([2.0, 3.0, 4.0, 100.0], [1.0, 1.0, 2.0, 1.0])
    assert summary["pairs"] == 4
    assert summary["ratio_median"] == 2.5  # ratios 2, 3, 2, 100: one burst does not move it


def test_tensor_bytes_counts_a_shared_storage_once():
    base = torch.zeros(10, 4)
    state = {"a": base[:2], "b": (base[5:], None), "c": [torch.zeros(3)]}
    assert options.tensor_bytes(state) == 10 * 4 * 4 + 3 * 4


def test_an_unknown_row_is_refused_naming_the_allowed_ones():
    with pytest.raises(SystemExit, match="--rows / --eval-rows: unknown nosuch; allowed: gla"):
        options.main(["--rows", "nosuch"])


def test_every_row_builds_a_model_and_its_baseline_from_the_configs():
    for name, (overrides, baseline) in options.ROWS.items():
        model, vocab = options.build_model(overrides)
        assert vocab > 0 and sum(p.numel() for p in model.parameters()) > 0, name
        options.build_model(baseline)


def test_a_tiny_run_writes_a_row_per_option_and_the_decoding_state(tmp_path):
    out = tmp_path / "options.json"
    options.main(["--rows", "qk_norm,lstm", "--steps", "2", "--warmup", "0", "--batch", "2",
                  "--tokens", "5", "--threads", "1", "--decode-lengths", "4,16",
                  "--json", str(out)])  # fmt: skip
    result = json.loads(out.read_text())
    assert [row["row"] for row in result["train"]] == ["qk_norm", "lstm"]
    decoded = {row["row"]: row["bytes"] for row in result["decode"]}
    assert decoded["lstm"]["4"] == decoded["lstm"]["16"]  # a recurrent state: fixed size
    assert decoded["attention"]["16"] > decoded["attention"]["4"]  # keys and values grow
