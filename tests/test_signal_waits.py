"""Waits that end: a run of several processes whose other ranks never start stops after a
deadline or on a signal, and launch variables that cannot start it are refused up front
(issue #51 item 2: SL06, SL06b). Rank 0 of ``trainer.num_nodes=2`` with torchrun variables
in the environment waited forever inside torch, deaf to SIGTERM and SIGINT."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import pytest

from helpers import ROOT

NODES = ["debug=fast", "eval.lengths=[8]", "trainer.num_nodes=2", "trainer.accelerator=cpu"]


def torchrun_variables(**extra: str) -> dict:
    """Rank 0 of two, as torchrun (or a copied job script) sets it, on a free port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    variables = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    return {**os.environ, **variables, "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", **extra}


@pytest.fixture
def train():
    """Start ``train.py`` on two nodes into a run directory, with an environment; a process
    still waiting when its test ends is killed (before the fix, they waited forever)."""
    started = []

    def start(run_dir, env: dict) -> subprocess.Popen:
        command = [sys.executable, str(ROOT / "train.py"), *NODES, f"hydra.run.dir={run_dir}"]
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_start_up_no_other_rank_joins_ends_at_its_deadline(tmp_path, train):
    run_dir = tmp_path / "run"
    process = train(run_dir, torchrun_variables(LENGEN_START_TIMEOUT="1"))
    _, err = process.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1
    assert lines[0].startswith("error: trainer.num_nodes=2: the run's 2 processes did not all")
    assert not run_dir.exists()  # what this command made is removed, as for a refusal


def test_sigterm_ends_a_start_up_wait_with_143(tmp_path, train):
    run_dir = tmp_path / "run"
    process = train(run_dir, torchrun_variables())
    for line in process.stdout:  # printed just before training starts its processes
        if line.startswith("estimate:"):
            break
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    lines = err.strip().splitlines()
    assert process.returncode == 143 and len(lines) == 1
    assert lines[0].startswith("interrupted by SIGTERM while the run's 2 processes were starting")
    assert "interrupted by SIGTERM" in (run_dir / "failed.json").read_text()


@pytest.mark.parametrize(
    "variables",
    [
        {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1"},  # SL06
        {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "2"},
    ],
)
def test_a_slurm_job_not_started_by_srun_is_refused_up_front(tmp_path, variables):
    # Lightning read SLURM_NODEID and crashed with a KeyError through Hydra, a folder left
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *NODES, f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=ROOT,
        env={**os.environ, **variables},
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "SLURM_NODEID" in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_world_size_the_trainer_does_not_count_is_refused_up_front(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *NODES, f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=ROOT,
        env=torchrun_variables(WORLD_SIZE="4"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.startswith("error: WORLD_SIZE=4 in the environment")
    assert not (tmp_path / "run").exists()


def test_a_start_timeout_that_is_no_number_of_seconds_is_refused(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *NODES, f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=ROOT,
        env=torchrun_variables(LENGEN_START_TIMEOUT="soon"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert (
        done.stderr.strip() == "error: LENGEN_START_TIMEOUT=soon: allowed: a number of seconds > 0"
    )


def test_a_wait_off_the_main_thread_runs_unwatched():
    # signal.set_wakeup_fd belongs to the main thread: a strategy starting its processes in
    # another thread must not fail for the watch
    import threading

    from lengen.process import signals_end_the_wait

    ran = []

    def body() -> None:
        with signals_end_the_wait(60, lambda signum: "", lambda: ("", 1)):
            ran.append(True)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert ran == [True]
