"""Issue #51's leftovers: a bar that says a long length still runs, a pack bounded by
LENGEN_MAX_EVAL_HOURS as its solo runs are, results.json meeting a disk that stays full."""

from __future__ import annotations

import time

from lengen import heartbeat as beats
from lengen.progress import each


def test_a_long_item_says_it_is_still_running_on_the_bar(capsys, monkeypatch):
    """bar mode (a terminal) showed nothing within a length of hours; lines mode a line."""
    monkeypatch.setattr(beats, "FIRST_SECONDS", 0.05)
    for _ in each([30000], desc="evaluate", unit="length", mode="bar"):
        time.sleep(0.3)
    assert "length 30000 still running after " in capsys.readouterr().err
