"""Loggers write inside the run directory; an offline wandb run is complete on disk.

wandb 0.31 has no Python reader for ``.wandb`` files: the tests check that the transaction log
exists, is not empty and sits in the folder that the printed ``wandb sync`` command names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from helpers import compose_train, run_train

WANDB_VARIABLES = ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR")


def _sync_paths(output: str) -> list[Path]:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", output)
    return [Path(p) for p in re.findall(r"wandb sync (\S+)", plain)]


def _run_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))


def test_wandb_offline_from_the_command_line_is_syncable(tmp_path, monkeypatch):
    """``python train.py logger=wandb`` with wandb's folders left to lengen (no WANDB_* dirs
    set): one folder, ``<run dir>/wandb/offline-run-*``, holds a non-empty ``run-*.wandb``,
    the printed ``wandb sync`` command names it, and nothing lands in the current directory or
    the home folder."""
    for variable in WANDB_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("LENGEN_CACHE_DIR", str(tmp_path / "lengen-cache"))
    home, cwd, run_dir = tmp_path / "home", tmp_path / "cwd", tmp_path / "run"
    monkeypatch.setenv("HOME", str(home))
    home.mkdir()
    cwd.mkdir()
    # one evaluation length, no attention diagnostics: the test is about wandb's files
    tiny_eval = ["eval.factors=[1]", "eval.diagnostics=false"]
    done = run_train("logger=wandb", "debug=fast", *tiny_eval, f"hydra.run.dir={run_dir}", cwd=cwd)
    assert done.returncode == 0, done.stderr[-3000:]

    files = _run_files(run_dir)
    assert len(files) == 1, sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    assert files[0].stat().st_size > 0
    assert _sync_paths(done.stdout + done.stderr) == [files[0].parent]
    assert not (run_dir / ".wandb").exists()  # nothing split off into a hidden folder
    assert list(cwd.iterdir()) == [] and list(home.iterdir()) == []
    debug_log = (files[0].parent / "logs" / "debug.log").read_text()
    assert "HandleAbandonedError" not in debug_log  # the run was finished, not cut off at exit


def test_each_run_of_a_sweep_process_ends_its_own_wandb_run(tmp_path, monkeypatch):
    """Two runs in one process (a local ``-m`` sweep): each gets its own complete wandb run
    and its own wandb folders, not the first run's."""
    from lengen.train import run

    for variable in WANDB_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")  # whatever a test before left in this process
    for name in ("first", "second"):
        cfg = compose_train(
            "logger=wandb", "data.len=4", "eval.factors=[1]", "eval.diagnostics=false"
        )
        run(cfg, run_dir=tmp_path / name)
        files = _run_files(tmp_path / name)
        assert len(files) == 1 and files[0].stat().st_size > 0, name
        assert not (tmp_path / name / ".wandb").exists()
    assert Path(os.environ["WANDB_DATA_DIR"]).is_relative_to(tmp_path / "second")


def test_wandb_keeps_folders_the_user_chose(tmp_path, monkeypatch):
    from lengen.loggers import wandb

    for variable in WANDB_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "mine"))
    wandb(str(tmp_path / "a"), mode="disabled")
    wandb(str(tmp_path / "b"), mode="disabled")
    assert os.environ["WANDB_CACHE_DIR"] == str(tmp_path / "mine")
    assert os.environ["WANDB_DATA_DIR"] == str(tmp_path / "b" / "wandb" / "data")
    assert os.environ["WANDB_DIR"] == str(tmp_path / "b")


def test_wandb_writes_wandb_even_beside_a_hidden_folder(tmp_path, monkeypatch):
    """wandb moves a run into ``<dir>/.wandb`` whenever that folder exists (a run directory
    made by an older lengen, resumed): lengen pins the run to ``<run dir>/wandb``."""
    from lengen.loggers import wandb

    for variable in WANDB_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    (tmp_path / ".wandb").mkdir()
    logger = wandb(str(tmp_path), mode="offline")
    logger.experiment.log({"x": 1.0})
    logger.experiment.finish()
    files = _run_files(tmp_path)
    assert len(files) == 1 and files[0].stat().st_size > 0
    assert list((tmp_path / ".wandb").iterdir()) == []


# -- the loggers' typed configs (lengen.options) ------------------------------------------------
@pytest.mark.parametrize("name", ["csv", "none", "wandb"])
def test_a_logger_factory_consumes_the_config_found_without_torch(name):
    import lengen.loggers
    from lengen.options import logger_options

    assert getattr(lengen.loggers, name).Options is logger_options(f"lengen.loggers.{name}")


def test_a_logger_of_the_users_is_not_known():
    from lengen.options import logger_options

    assert logger_options("mypackage.loggers.MyLogger") is None


def test_a_key_a_logger_does_not_take_is_named(tmp_path):
    from lengen.loggers import csv

    with pytest.raises(ValueError, match=r"^logger\.project: csv takes no options$"):
        csv(str(tmp_path), project="lengen")
