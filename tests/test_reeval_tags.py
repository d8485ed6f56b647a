"""lengen.reeval's tag reservations: held by a lock that dies with its process, so an eval.py
that crashed without unwinding leaves its tag free, not taken for good (issue #51 item 7:
E13c), while a live evaluation's tag stays taken."""

from __future__ import annotations

import subprocess
import sys

from lengen.reeval import release_tag, reservation, reserve_tag


def test_a_reservation_left_by_a_dead_process_frees_its_tag(tmp_path):
    reservation(tmp_path, "x").write_text("")  # what a crashed eval.py leaves
    assert reserve_tag(tmp_path, "x") == "x"
    release_tag(tmp_path, "x")


def test_a_killed_holder_frees_its_tag(tmp_path):
    code = (
        "import os, sys; from pathlib import Path; from lengen.reeval import reserve_tag\n"
        f"reserve_tag(Path({str(tmp_path)!r}), 'x'); os._exit(1)\n"  # no unwinding, no finally
    )
    subprocess.run([sys.executable, "-c", code], check=False, timeout=120)
    assert reservation(tmp_path, "x").exists()
    assert reserve_tag(tmp_path, "x") == "x"
    release_tag(tmp_path, "x")


def test_a_live_holders_tag_stays_taken(tmp_path):
    assert reserve_tag(tmp_path, "x") == "x"
    assert reserve_tag(tmp_path, "x") == "x-1"
    release_tag(tmp_path, "x")
    release_tag(tmp_path, "x-1")
    assert not reservation(tmp_path, "x").exists()


def test_a_written_results_file_keeps_its_tag_taken(tmp_path):
    (tmp_path / "results.x.json").write_text("{}")
    reservation(tmp_path, "x").write_text("")
    assert reserve_tag(tmp_path, "x") == "x-1"
    release_tag(tmp_path, "x-1")
