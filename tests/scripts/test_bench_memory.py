"""scripts/bench_memory.py: one fresh process per measurement, the JSON's rows, medians and
ratios to RoPE."""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers import CONFIG_DIR


@pytest.fixture(scope="module")
def bench_memory():
    path = CONFIG_DIR.parent / "scripts/bench_memory.py"
    spec = importlib.util.spec_from_file_location("bench_memory", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_medians_ranges_and_ratios_to_rope_per_length(bench_memory):
    rows = [
        {"pe": "fox", "length": 64, "rss_mib": 30.0, "live_mib": 9.0},
        {"pe": "rope", "length": 64, "rss_mib": 10.0, "live_mib": 6.0},
        {"pe": "fox", "length": 64, "rss_mib": 20.0, "live_mib": 9.0},
        {"pe": "rope", "length": 64, "rss_mib": 14.0, "live_mib": 6.0},
        {"pe": "fox", "length": 64, "rss_mib": 40.0, "live_mib": 9.0},
    ]
    rope, fox = bench_memory.summarise(rows)
    assert (rope["pe"], rope["repeats"], rope["rss_mib"]) == ("rope", 2, 12.0)
    assert fox["rss_mib"] == 30.0 and fox["rss_mib_range"] == [20.0, 40.0]
    assert fox["rss_mib_vs_rope"] == 2.5 and fox["live_mib_vs_rope"] == 1.5


def test_a_run_writes_one_row_per_fresh_process(bench_memory, tmp_path):
    out = tmp_path / "memory.json"
    arguments = ["--pes", "stick_breaking", "--lengths", "48", "--repeats", "2", "--threads", "1"]
    bench_memory.main([*arguments, "--json", str(out)])
    written = json.loads(out.read_text())
    assert [(r["pe"], r["length"], r["repeat"]) for r in written["rows"]] == [
        ("stick_breaking", 48, 0), ("stick_breaking", 48, 1),
    ]  # fmt: skip
    for row in written["rows"]:
        assert row["rss_mib"] >= 0 and row["live_mib"] > 0
    assert written["repeats"] == 2 and written["machine"]["threads"] == 1
    assert written["command"].startswith("python scripts/bench_memory.py --pes stick_breaking")
