"""A signal to a local sweep's own process stops the sweep: its running jobs (joblib's workers
too) save their checkpoints, no job starts after it, and the report says so and exits 128 +
the signal (issue #51 item 2: SN21, SN21b; SW2 for the sequential sweep). The workers trained to
the end and the sweep exited 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT
from test_cluster import report


@pytest.fixture
def listener():
    """A process that prints 'got <signal>' for each SIGTERM it receives."""
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda n, f: print(f'got {n}', flush=True))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    yield child
    child.kill()
    child.wait()


def started(sweep_dir, number: int, pid: int) -> None:
    """Job ``number``'s start record (no outcome yet), with its process id."""
    records = sweep_dir / ".jobs"
    records.mkdir(parents=True, exist_ok=True)
    entry = {"run_dir": str(sweep_dir / f"r{number}"), "outcome": None, "pid": pid}
    (records / f"{number}.json").write_text(json.dumps(entry))


def test_a_signal_to_the_sweep_process_is_sent_on_to_its_running_jobs(tmp_path, listener):
    from lengen.rundir.sweep_stop import ForwardSignals, stopped_by

    started(tmp_path, 0, listener.pid)
    with ForwardSignals(tmp_path):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)  # the handler runs in this (the main) thread
    assert listener.stdout.readline().strip() == f"got {signal.SIGTERM}"
    assert stopped_by(tmp_path) == signal.SIGTERM


def test_a_job_that_starts_after_the_signal_gets_it_too(tmp_path, listener):
    from lengen.rundir.sweep_stop import ForwardSignals

    with ForwardSignals(tmp_path, every_s=0.1):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        started(tmp_path, 0, listener.pid)  # a worker that had not started its job yet
        time.sleep(0.5)
    assert listener.stdout.readline().strip() == f"got {signal.SIGTERM}"


def test_the_report_of_a_stopped_sweep_lists_its_runs_and_exits_128_plus_the_signal(tmp_path):
    from lengen.rundir.sweep_stop import mark_stopped

    records = tmp_path / ".jobs"
    records.mkdir()
    (tmp_path / "a" / "checkpoints").mkdir(parents=True)
    (tmp_path / "a" / "checkpoints" / "last.ckpt").write_text("x")
    said = ["interrupted: interrupted by SIGTERM at step 3", "not started: the sweep was stopped"]
    for number, (folder, outcome) in enumerate(zip("ab", said, strict=True)):
        entry = {"run_dir": str(tmp_path / folder), "outcome": outcome}
        (records / f"{number}.json").write_text(json.dumps(entry))
    mark_stopped(tmp_path, signal.SIGTERM)
    status, out, err = report(tmp_path)
    assert status == 143 and "sweep: 2 runs (1 interrupted, 1 not started)" in out
    assert err.strip().endswith(
        "sweep: stopped by SIGTERM; continue it with the same command and resume=auto"
    )


def test_a_stopped_sweeps_report_does_not_send_the_user_to_aggregate(tmp_path):
    """A stopped sweep is continued first (resume=auto), not aggregated half done (trial
    SW2, SN21: "next: aggregate.py …" after a SIGTERM)."""
    from lengen.rundir.sweep_stop import mark_stopped

    records = tmp_path / ".jobs"
    records.mkdir()
    entry = {"run_dir": str(tmp_path / "a"), "outcome": "interrupted: by SIGTERM at step 3"}
    (records / "0.json").write_text(json.dumps(entry))
    mark_stopped(tmp_path, signal.SIGTERM)
    status, out, err = report(tmp_path)
    assert status == 143 and "aggregate.py" not in out + err


def sweep(sweep_dir, *arguments: str) -> subprocess.Popen:
    command = [
        sys.executable, str(ROOT / "train.py"), "-m", "debug=fast", "eval.lengths=[8]",
        "trainer.max_steps=5000", "trainer.checkpoint_every_n_steps=50", "seed=0,1",
        *arguments, f"hydra.sweep.dir={sweep_dir}",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its workers too can be killed, should the test fail
    )


def kill_all(process: subprocess.Popen) -> None:
    """The sweep's process and its workers, where they are still running."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for_pids(sweep_dir, count: int, process: subprocess.Popen) -> None:
    """Until ``count`` jobs have written their start record (their pid)."""
    from lengen.rundir.sweep_stop import running_jobs

    deadline = time.monotonic() + 120
    while len(running_jobs(sweep_dir)) < count:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)


def test_sigterm_to_a_parallel_local_sweep_stops_its_workers_with_checkpoints(tmp_path):
    sweep_dir = tmp_path / "sweep"
    process = sweep(sweep_dir, "hydra/launcher=local", "hydra.launcher.n_jobs=2")
    try:
        # both workers training: a job with its start record but no step yet is "not started"
        # when the signal comes first (CI's 2-core run, 2026-12-02)
        wait_for_pids(sweep_dir, 2, process)
        wait_for_checkpoints(sweep_dir, 2, process)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        kill_all(process)
    assert process.returncode == 143, err[-2000:]
    assert "sweep: 2 runs (2 interrupted)" in out
    runs = [p for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(runs) == 2
    for run in runs:  # each stopped at a step boundary with its checkpoint, no results
        assert (run / "checkpoints" / "last.ckpt").is_file() and not (run / "results.json").exists()


def test_sigterm_to_a_sequential_sweep_reports_and_starts_no_more_runs(tmp_path):
    # SW2: the sweep exited 143 with the run's own line only, no report
    sweep_dir = tmp_path / "sweep"
    process = sweep(sweep_dir)
    try:
        wait_for_checkpoints(sweep_dir, 1, process)  # the first run trains
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        kill_all(process)
    assert process.returncode == 143, err[-2000:]
    assert "sweep: 2 runs (1 interrupted, 1 not started)" in out
    assert "continue it with the same command and resume=auto" in err


def worker_handlers(_):
    return signal.getsignal(signal.SIGTERM).__name__, signal.getsignal(signal.SIGINT).__name__


def test_joblibs_workers_keep_lengens_handlers_from_their_start():
    # a SIGTERM to every process of the sweep killed the workers with no job yet (SIG_DFL),
    # and loky tore the sweep down with a TerminatedWorkerError traceback
    from joblib import Parallel, delayed

    from lengen.rundir.sweep_stop import workers_keep_signals

    with workers_keep_signals():
        handlers = Parallel(n_jobs=2)(delayed(worker_handlers)(i) for i in range(2))
    assert handlers == [("_remember", "_remember")] * 2


@pytest.mark.parametrize(
    ("target", "n_jobs", "expected"),
    [
        ("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", 2, True),
        ("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher", 1, False),
        ("hydra._internal.core_plugins.basic_launcher.BasicLauncher", None, False),
    ],
)
def test_signals_are_sent_on_wherever_joblib_runs_jobs_in_workers(target, n_jobs, expected):
    # one run with n_jobs=2 goes to a worker too: counting runs at once (1) left it unsignalled
    from omegaconf import OmegaConf

    from hydra_plugins.lengen_sweeper import in_workers

    assert in_workers(OmegaConf.create({"_target_": target, "n_jobs": n_jobs})) is expected


def test_a_signal_before_a_sequential_sweeps_first_run_starts_no_run(tmp_path):
    # remembered by the sweep's process before its first job: that job trained a step, saved
    # a checkpoint and stopped; now no run starts after the signal, as the docs say
    sweep_dir = tmp_path / "sweep"
    process = sweep(sweep_dir)
    try:
        for line in process.stdout:  # the sweeper's plan, before the first job
            if line.startswith("sweep: 2 runs"):
                break
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        kill_all(process)
    assert process.returncode == 143, err[-2000:]
    assert "sweep: 2 runs (2 not started)" in out
    assert not list(sweep_dir.glob("*/checkpoints"))


def wait_for_checkpoints(sweep_dir, count: int, process: subprocess.Popen) -> None:
    """Until ``count`` runs have saved a checkpoint (they train)."""
    deadline = time.monotonic() + 120
    while len(list(sweep_dir.glob("*/checkpoints/last.ckpt"))) < count:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
