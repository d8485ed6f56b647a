"""lengen.heartbeat through lengen.progress.each: a long item of a loop in ``lines`` mode says
it is still running, at doubling waits (an evaluation length of hours printed nothing: O15)."""

from __future__ import annotations

import threading
import time

from lengen import heartbeat as beats
from lengen.progress import each


def test_a_long_item_says_it_is_still_running(capsys, monkeypatch):
    monkeypatch.setattr(beats, "FIRST_SECONDS", 0.05)
    for _ in each([30000], desc="evaluate", unit="length", mode="lines", label="run"):
        time.sleep(0.3)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[run] evaluate: length 30000 (1/1) still running after ")


def test_the_waits_double(capsys, monkeypatch):
    monkeypatch.setattr(beats, "FIRST_SECONDS", 0.1)
    with beats.heartbeat("x"):
        time.sleep(1.0)  # lines at 0.1, 0.3, 0.7 s (the next at 1.5): three, not ten
    assert capsys.readouterr().out.count("x still running") == 3


def test_a_short_item_prints_only_its_done_line(capsys):
    for _ in each([8, 16], desc="evaluate", unit="length", mode="lines"):
        pass
    assert "still running" not in capsys.readouterr().out


def test_the_thread_ends_with_its_item():
    with beats.heartbeat("x", first=10):
        pass
    assert not any(t.name == "lengen-heartbeat" for t in threading.enumerate())
