"""A recipe of several multiruns (scripts/recipe_sweeps.sh) stops when one of them is stopped by
a signal (exit 130 or 143), instead of starting the next: a SIGTERM to #49's A5 sweep ended its
attention multirun, and the recipe went on to train the recurrent one (2026-12-02). A multirun
that fails otherwise still lets the others run (its report lists it)."""

from __future__ import annotations

import os
import subprocess

import pytest

from helpers import ROOT


def calls_with_exit(status: int, tmp_path) -> tuple[int, list[str], str]:
    log, fake = tmp_path / "calls", tmp_path / "python"
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> "{log}"\nexit {status}\n')
    fake.chmod(0o755)
    done = subprocess.run(
        [
            "bash",
            str(ROOT / "scripts" / "reproduce_encoding_or_recurrence.sh"),
            str(tmp_path / "s"),
        ],
        env={**os.environ, "PYTHON": str(fake), "TASKS": "flip_flop"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = log.read_text().splitlines() if log.exists() else []
    return done.returncode, [line for line in lines if line.startswith("train.py -m")], done.stderr


@pytest.mark.parametrize("status", [130, 143])
def test_a_multirun_stopped_by_a_signal_stops_the_recipe(status, tmp_path):
    code, sweeps, err = calls_with_exit(status, tmp_path)
    assert (code, len(sweeps)) == (status, 1)
    assert "recipe: stopped" in err


def test_a_multirun_that_fails_lets_the_others_run(tmp_path):
    code, sweeps, _ = calls_with_exit(1, tmp_path)
    assert (code, len(sweeps)) == (1, 3)
