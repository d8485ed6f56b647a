"""Hydra's and Lightning's routine INFO lines stay out of output that is not a terminal
(lengen.logs, wired in configs/hydra/default.yaml), unless LENGEN_VERBOSE_LOGS=1 asks for them:
real ``train.py debug=fast`` runs with their output captured (a pipe: no terminal), and the
filter's rule on single records."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from helpers import ROOT

#: what the routine lines look like: Lightning's, and Hydra's launch lines in a sweep
LIGHTNING_LINE = "GPU available:"
LAUNCH_LINE = "[HYDRA] Launching"


def train(*overrides: str, verbose: bool = False) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "LENGEN_VERBOSE_LOGS"}
    env |= {"LENGEN_VERBOSE_LOGS": "1"} if verbose else {}
    return subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *overrides, "debug=fast"],
        capture_output=True, text=True, timeout=300, env=env, cwd=ROOT,
    )  # fmt: skip


@pytest.fixture(scope="module")
def quiet(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("logs") / "run"
    done = train(f"hydra.run.dir={run_dir}")
    assert done.returncode == 0, done.stderr
    return done, run_dir


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logs") / "sweep"
    done = train("-m", "seed=0", f"hydra.sweep.dir={folder}")
    assert done.returncode == 0, done.stderr
    return done


def test_lightning_info_lines_stay_out_of_captured_output(quiet):
    done, _ = quiet
    assert LIGHTNING_LINE not in done.stdout + done.stderr
    assert "][INFO] - " not in done.stdout + done.stderr


def test_lightning_info_lines_stay_out_of_train_log(quiet):
    _, run_dir = quiet
    assert "][INFO] - " not in (run_dir / "train.log").read_text()


def test_the_progress_and_results_lines_still_reach_captured_output(quiet):
    """(A guard that held before the filter: lengen's own lines are not filtered.)"""
    done, _ = quiet
    assert "estimate: ≈" in done.stdout and "results: " in done.stdout


def test_hydra_launch_lines_stay_out_of_a_sweeps_captured_output(sweep):
    assert LAUNCH_LINE not in sweep.stdout + sweep.stderr
    assert "#0 : " not in sweep.stdout + sweep.stderr


def test_lengen_verbose_logs_lets_them_through(tmp_path):
    """(Held before the filter too, when nothing was filtered: it guards the switch.)"""
    done = train("-m", "seed=0", f"hydra.sweep.dir={tmp_path / 'sweep'}", verbose=True)
    assert done.returncode == 0, done.stderr
    assert LAUNCH_LINE in done.stdout and LIGHTNING_LINE in done.stdout


# -- the rule, on single records ----------------------------------------------------------------
def record(name: str, level: int) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "message", None, None)


def test_warnings_of_routine_loggers_pass(monkeypatch):
    from lengen.logs import RoutineFilter

    monkeypatch.delenv("LENGEN_VERBOSE_LOGS", raising=False)
    warning = record("pytorch_lightning.utilities.rank_zero", logging.WARNING)
    assert RoutineFilter().filter(warning)


def test_info_of_other_loggers_passes(monkeypatch):
    from lengen.logs import RoutineFilter

    monkeypatch.delenv("LENGEN_VERBOSE_LOGS", raising=False)
    assert RoutineFilter().filter(record("hydrant", logging.INFO))


def test_a_terminal_keeps_routine_records(monkeypatch):
    from lengen.logs import RoutineFilter

    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("LENGEN_VERBOSE_LOGS", raising=False)
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert RoutineFilter("stdout").filter(record("hydra.core", logging.INFO))
