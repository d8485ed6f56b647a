"""scripts/show_results.py: a run's table, and a path that is not a results file refused in one
line (exit 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers import ROOT
from sweep_fixture import write_run

SHOW = [sys.executable, str(ROOT / "scripts" / "show_results.py")]


def test_a_run_directory_prints_its_table(tmp_path):
    run = write_run(tmp_path, "rope", pe="rope", accuracy={4: 1.0, 8: 0.5})
    done = subprocess.run([*SHOW, str(run)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "pe=rope" in done.stdout


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "No such file or directory"),
        ("{bad", "cannot be read as results"),
        ("[1]", "not a results file"),
    ],  # fmt: skip
    ids=["missing", "not json", "not an object"],
)
def test_a_bad_results_file_is_refused_in_one_line(tmp_path, content, reason):
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    done = subprocess.run([*SHOW, str(path)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr.count("\n")) == (2, 1)
    assert done.stderr.startswith(f"error: {path}: ") and reason in done.stderr
