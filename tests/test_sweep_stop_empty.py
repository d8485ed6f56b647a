"""A stopped local sweep's jobs that never started leave no folder (issue #51 leftover): Hydra
makes each job's folder and its empty train.log before the job learns that the sweep was
stopped, and the stop removes exactly those (``lengen.rundir.sweep_stop.remove_unstarted``),
never a folder with anything else in it or one that was there before the sweep; the report
still lists the jobs as not started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT


@pytest.fixture
def sweep_dir(tmp_path):
    """A sweep folder whose launch ``remember_folders`` has noted (it held ``earlier/``)."""
    from lengen.rundir.sweep_stop import remember_folders

    (tmp_path / "earlier").mkdir()
    remember_folders(tmp_path)
    return tmp_path


def job_folder(sweep_dir, name: str, *files: str):
    """A job's folder as Hydra makes it (an empty train.log), with ``files`` in it too."""
    folder = sweep_dir / name
    folder.mkdir(exist_ok=True)
    (folder / "train.log").touch()
    for file in files:
        (folder / file).write_text("x")
    return folder


def test_a_folder_holding_only_hydras_empty_log_is_removed(sweep_dir):
    from lengen.rundir.sweep_stop import remove_unstarted

    remove_unstarted(sweep_dir, job_folder(sweep_dir, "new"))
    assert not (sweep_dir / "new").exists()


def test_a_folder_with_anything_else_in_it_is_kept(sweep_dir):
    from lengen.rundir.sweep_stop import remove_unstarted

    remove_unstarted(sweep_dir, job_folder(sweep_dir, "new", "config.yaml"))
    assert sorted(p.name for p in (sweep_dir / "new").iterdir()) == ["config.yaml", "train.log"]


def test_a_folder_whose_log_holds_lines_is_kept(sweep_dir):
    from lengen.rundir.sweep_stop import remove_unstarted

    folder = job_folder(sweep_dir, "new")
    (folder / "train.log").write_text("a line\n")
    remove_unstarted(sweep_dir, folder)
    assert (folder / "train.log").read_text() == "a line\n"


def test_a_folder_that_was_there_before_the_sweep_is_kept(sweep_dir):
    from lengen.rundir.sweep_stop import remove_unstarted

    remove_unstarted(sweep_dir, job_folder(sweep_dir, "earlier"))
    assert (sweep_dir / "earlier" / "train.log").is_file()


def test_without_the_sweeps_note_nothing_is_removed(tmp_path):
    # another sweeper launched the jobs: which folders were there before is not known
    from lengen.rundir.sweep_stop import remove_unstarted

    remove_unstarted(tmp_path, job_folder(tmp_path, "new"))
    assert (tmp_path / "new" / "train.log").is_file()


def test_a_sequential_sweep_stopped_in_its_first_run_leaves_no_folder_for_the_others(tmp_path):
    sweep_dir = tmp_path / "sweep"
    command = [
        sys.executable, str(ROOT / "train.py"), "-m", "debug=fast", "eval.lengths=[8]",
        "trainer.max_steps=5000", "trainer.checkpoint_every_n_steps=50", "seed=0,1,2",
        f"hydra.sweep.dir={sweep_dir}",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not list(sweep_dir.glob("*/checkpoints/last.ckpt")):  # the first run trains
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 143, err[-2000:]
    assert "sweep: 3 runs (1 interrupted, 2 not started)" in out
    runs = [path for path in sweep_dir.iterdir() if path.is_dir() and path.name[0] != "."]
    assert [run.name.split("_seed")[1][0] for run in runs] == ["0"]  # one folder: seed 0
    assert (runs[0] / "checkpoints" / "last.ckpt").is_file()
