"""scripts/bench_pack.py --member-threads: the pack's process trains its members that many at
once (lengen.pack.engine.MEMBER_THREADS), and the JSON says so (it times nothing here)."""

from __future__ import annotations

import json

from helpers import load_script

TINY = ["model.d_model=16", "model.n_layers=1", "model.n_heads=2", "model.d_ff=32", "data.len=4"]


def test_member_threads_reach_the_pack_and_are_recorded(tmp_path):
    path = tmp_path / "pack.json"
    arguments = ["--members", "2", "--steps", "2", "--repeats", "1", "--threads", "1"]
    arguments += ["--member-threads", "2", *(f"--set={o}" for o in TINY), "--json", str(path)]
    load_script("bench_pack").main(arguments)
    written = json.loads(path.read_text())
    assert written["member_threads"] == 2
    assert [r["member_threads"] for r in written["raw"]["pack"]] == [2]
    assert not written["raw"]["pack"][0]["unfinished"]
