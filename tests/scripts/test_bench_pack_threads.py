"""scripts/bench_pack.py --member-threads 1,2: a pack's process per setting, each training its
members that many at once (lengen.pack.engine.MEMBER_THREADS), interleaved with the solo runs,
and the JSON says what each used (it times nothing here)."""

from __future__ import annotations

import json

import pytest

from helpers import load_script

TINY = ["model.d_model=16", "model.n_layers=1", "model.n_heads=2", "model.d_ff=32", "data.len=4"]


def test_each_member_threads_setting_reaches_its_pack_and_is_recorded(tmp_path):
    path = tmp_path / "pack.json"
    # one solo run: the solo process loops over its runs the same way for one as for two
    arguments = ["--members", "2", "--solo-runs", "1", "--steps", "2", "--repeats", "1"]
    arguments += ["--threads", "1"]
    arguments += ["--member-threads", "1,2", *(f"--set={o}" for o in TINY), "--json", str(path)]
    load_script("bench_pack").main(arguments)
    written = json.loads(path.read_text())
    raw = written["raw"]
    assert written["member_threads"] == 1 and sorted(raw) == ["pack", "pack_threads2", "solo"]
    assert [raw["pack"][0]["member_threads"], raw["pack_threads2"][0]["member_threads"]] == [1, 2]
    # at --threads 1 the engine uses no more member threads than torch's one
    assert raw["pack_threads2"][0]["member_threads_used"] == 1
    assert set(written["other_member_threads"]["2"]) == {"wall_s", "pack_total_ratio", "met"}


def test_member_threads_other_than_distinct_positive_integers_are_refused():
    with pytest.raises(SystemExit):
        load_script("bench_pack").main(["--member-threads", "2,2"])
