"""The cluster path through a real SLURM scheduler: a sweep as a job array, DDP over two SLURM
tasks, preemption and the time limit's warning, each continued by itself to the uninterrupted
result, SLURM's own warning and the bound on requeueing, and the sweep's own process stopped
(docs/cluster.md).

Needs a SLURM with a partition ``cpu`` (scripts/slurm/start.sh starts a one-node one, as root
on Debian); skipped without one, a failure when LENGEN_REQUIRE_SLURM=1 (.ci/run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import ROOT

pytestmark = pytest.mark.slurm

# sacct's "accounting storage is disabled" (no slurmdbd on the test node) is submitit's noise
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.partition=cpu",
    "hydra.launcher.gpus_per_node=0",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1",
    "hydra.launcher.timeout_min=20",
]
TINY = ["debug=fast", "data.len=4", "eval.factors=[1,2]", "eval.diagnostics=false", "logger=csv"]
# long enough that a signal sent at the first checkpoint finds training still running
LONG = [
    "trainer.max_steps=200",
    "trainer.val_check_interval=50",
    "trainer.checkpoint_every_n_steps=5",
]


def slurm_missing() -> str | None:
    """Why no SLURM can run these tests here, or None."""
    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return "no SLURM client here (sinfo, sbatch)"
    try:
        import hydra_plugins.hydra_submitit_launcher  # noqa: F401
    except ImportError:
        return 'no submitit launcher (pip install -e ".[slurm]")'
    try:
        state = subprocess.run(
            ["sinfo", "-h", "-p", "cpu", "-o", "%T"], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 30 s"
    if not any(s.startswith(("idle", "mixed", "allocated")) for s in state.stdout.split()):
        said = (state.stderr or state.stdout).strip().splitlines() or ["no answer"]
        return f"no SLURM partition 'cpu' takes jobs ({said[-1]})"
    return None


@pytest.fixture(scope="module")
def slurm() -> None:
    reason = slurm_missing()
    if reason is None:
        return
    reason += "; scripts/slurm/start.sh starts one (root, Debian)"
    if os.environ.get("LENGEN_REQUIRE_SLURM") == "1":
        pytest.fail(reason + "; LENGEN_REQUIRE_SLURM=1 requires it")
    pytest.skip(reason)


def wait_for(condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.2)


def job_logs(sweep_dir: Path) -> str:
    """Every SLURM log of the sweep (submitit appends each attempt of a job to its log)."""
    return "".join(p.read_text(errors="replace") for p in sweep_dir.glob(".submitit/*/*_log.*"))


def slurm_job(run_dir: Path) -> str:
    """The SLURM job id of a run, as the run directory records it."""
    return (run_dir / ".slurm_job").read_text().strip().rpartition("/")[2]


def submit(sweep_dir: Path, *overrides: str) -> subprocess.Popen:
    """``train.py -m`` through SLURM, started (``finish`` waits for it)."""
    command = [sys.executable, str(ROOT / "train.py"), "-m", *SLURM, *TINY, *overrides]
    return subprocess.Popen(
        [*command, f"hydra.sweep.dir={sweep_dir}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def finish(process: subprocess.Popen, sweep_dir: Path, during=None) -> subprocess.CompletedProcess:
    """The sweep's outcome; ``during(sweep_dir)`` runs while it waits."""
    try:
        if during is not None:
            during(sweep_dir)
        stdout, stderr = process.communicate(timeout=900)
    finally:
        if process.poll() is None:  # a test that failed midway: no job or sweep left behind
            stop(process, sweep_dir)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def stop(process: subprocess.Popen, sweep_dir: Path) -> None:
    for record in sweep_dir.glob("*/.slurm_job"):
        subprocess.run(["scancel", slurm_job(record.parent)], check=False)
    process.kill()
    process.communicate()


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


# -- a sweep whose first run is preempted, then warned of its time limit ------------------------
def preempt_then_warn(sweep_dir: Path) -> None:
    """Run 0: ``scontrol requeue`` (preemption: SIGTERM, requeued by SLURM) at its first
    checkpoint; once the requeued job continues, the time limit's warning, sent as
    ``--signal=USR1@N`` sends it (SIGUSR1 to the job's steps) but at a chosen moment: SLURM's
    own comes up to a minute early (``unrequeued_sweep`` waits for it)."""
    run = sweep_dir / "0"
    wait_for(lambda: (run / "checkpoints" / "last.ckpt").is_file(), "the first checkpoint")
    subprocess.run(["scontrol", "requeue", slurm_job(run)], check=True)
    wait_for(lambda: "was requeued: continuing" in job_logs(sweep_dir), "the requeued job")
    subprocess.run(["scancel", "--signal=USR1", slurm_job(run)], check=True)


#: a run far longer than its 2-minute limit, warned by SLURM itself 30 s before it (SLURM may
#: send it up to a minute early), with max_num_timeout=0: the first warning is the last
UNREQUEUED = [
    "hydra.launcher.timeout_min=2",
    "hydra.launcher.signal_delay_s=30",
    "hydra.launcher.max_num_timeout=0",
    "trainer.max_steps=1000000",
]


#: one run over two SLURM tasks
DDP = ["hydra.launcher.tasks_per_node=2", "trainer=ddp", "trainer.accelerator=cpu"]


@pytest.fixture(scope="module")
def sweeps(slurm, tmp_path_factory):
    """The interrupted sweep, the unrequeued one, the DDP one and the stopped one (below), run at
    once: their jobs mostly wait (for a checkpoint, a requeued job's start, SLURM's own warning:
    up to 90 s), which one sweep after the other added to the suite's time.
    scripts/slurm/start.sh lets jobs share the node's CPUs (OverSubscribe), so no job queues for
    another's CPU; on a SLURM without it they queue, and the sweeps still finish.
    {name: (sweep_dir, result)}."""
    root = tmp_path_factory.mktemp("slurm")
    subdir = "hydra.sweep.subdir=${hydra.job.num}"
    plan = {  # name: (overrides, what runs while it waits)
        "interrupted": ([*LONG, "eval.plot_dpi=50,60", subdir], preempt_then_warn),
        "unrequeued": (UNREQUEUED, None),
        "ddp": ([*DDP, *LONG], warn_at_first_checkpoint),
        "stopped": (
            ["trainer.max_steps=100000"],
            lambda d: stop_once_started(started["stopped"], d),
        ),
    }
    started = {}
    try:
        for name, (overrides, _) in plan.items():
            started[name] = submit(root / name, *overrides)
        # a thread per sweep: each waits for its own jobs (finish stops a sweep that failed)
        with ThreadPoolExecutor(len(plan)) as pool:
            waits = {
                name: pool.submit(finish, started[name], root / name, during)
                for name, (_, during) in plan.items()
            }
            return {name: (root / name, wait.result()) for name, wait in waits.items()}
    except BaseException:
        for name, process in started.items():
            if process.poll() is None:
                stop(process, root / name)
        raise


@pytest.fixture(scope="module")
def interrupted_sweep(sweeps):
    """Two runs of one config and seed (they differ in eval.plot_dpi, which changes no number,
    each in its own directory): run 0 interrupted twice, run 1 not."""
    return sweeps["interrupted"]


def test_a_slurm_sweep_finishes_every_run(interrupted_sweep):
    sweep_dir, result = interrupted_sweep
    assert result.returncode == 0, result.stderr[-3000:]
    assert [(sweep_dir / n / "results.json").is_file() for n in "01"] == [True, True]


def test_the_report_counts_runs_that_ran_in_slurm_jobs(interrupted_sweep):
    _, result = interrupted_sweep
    assert "sweep: 2 runs (1 continued from a checkpoint, 1 trained)" in result.stdout


def test_a_preempted_run_continues_to_the_uninterrupted_result(interrupted_sweep):
    sweep_dir, _ = interrupted_sweep
    interrupted, whole = results(sweep_dir / "0"), results(sweep_dir / "1")
    assert interrupted["resumed"] and not whole["resumed"]
    assert interrupted["train_steps"] == whole["train_steps"] == 200
    for cut, full in zip(interrupted["eval"], whole["eval"], strict=True):
        assert cut["loss"] == pytest.approx(full["loss"], abs=1e-6)
        assert cut["accuracy"] == full["accuracy"] and cut["exact_match"] == full["exact_match"]


def test_the_time_limit_warning_requeues_the_job(interrupted_sweep):
    sweep_dir, _ = interrupted_sweep
    logs = job_logs(sweep_dir)
    assert "interrupted by SIGUSR1" in logs
    assert "requeued after the time limit (1 of 3); it continues" in logs


def test_jobs_ask_slurm_for_the_time_limit_warning(interrupted_sweep):
    sweep_dir, _ = interrupted_sweep
    [script] = sweep_dir.glob(".submitit/*/*_submission.sh")
    assert "#SBATCH --signal=USR1@120" in script.read_text().splitlines()


# -- SLURM's own time-limit warning, and the bound on requeueing -------------------------------
@pytest.fixture(scope="module")
def unrequeued_sweep(sweeps):
    """One run warned by SLURM's own time-limit warning past its requeue bound (UNREQUEUED)."""
    return sweeps["unrequeued"]


def test_a_job_past_its_requeue_bound_is_not_requeued(unrequeued_sweep):
    sweep_dir, _ = unrequeued_sweep
    logs = job_logs(sweep_dir)
    assert "not requeued after the time limit: requeued 0 times already" in logs
    assert logs.count("Starting with JobEnvironment") == 1  # one attempt, no requeue


def test_a_run_left_interrupted_fails_the_sweep_and_is_named(unrequeued_sweep):
    _, result = unrequeued_sweep
    assert result.returncode == 1
    assert "sweep: 1 run (1 interrupted)" in result.stdout
    named = result.stderr.split("did not finish):", 1)[1]
    assert ": interrupted: interrupted by SIGUSR1 at step" in named


# -- DDP over two SLURM tasks ----------------------------------------------------------------
@pytest.fixture(scope="module")
def ddp_sweep(sweeps):
    """One run over two SLURM tasks, warned of its time limit at its first checkpoint: both
    ranks stop at one step, rank 0 requeues the job, both continue."""
    return sweeps["ddp"]


def warn_at_first_checkpoint(sweep_dir: Path) -> None:
    wait_for(lambda: list(sweep_dir.glob("copy_*/checkpoints/last.ckpt")), "a checkpoint")
    [run] = list(sweep_dir.glob("copy_*"))
    subprocess.run(["scancel", "--signal=USR1", slurm_job(run)], check=True)


def test_ddp_over_two_slurm_tasks_writes_one_run(ddp_sweep):
    sweep_dir, result = ddp_sweep
    assert result.returncode == 0, result.stderr[-3000:]
    [run] = list(sweep_dir.glob("copy_*"))
    assert results(run)["world_size"] == 2


def test_a_ddp_run_continues_after_its_time_limit(ddp_sweep):
    _, result = ddp_sweep
    assert "sweep: 1 run (1 continued from a checkpoint)" in result.stdout


# -- the sweep's own process ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_sweep(sweeps):
    """A sweep whose own process got SIGTERM once its one job ran (``stop_once_started``)."""
    return sweeps["stopped"]


def stop_once_started(process: subprocess.Popen, sweep_dir: Path) -> None:
    """SIGTERM to the sweep's own process once its job runs; what squeue then says of the job
    goes to ``squeue.txt`` in the sweep folder, and the job is cancelled."""
    try:
        wait_for(lambda: list(sweep_dir.glob("copy_*/.slurm_job")), "the job to start")
        process.terminate()
        process.wait(timeout=60)
        [run] = list(sweep_dir.glob("copy_*"))
        running = subprocess.run(["squeue", "-h", "-j", slurm_job(run)], capture_output=True)
        (sweep_dir / "squeue.txt").write_bytes(running.stdout)
    finally:
        for record in sweep_dir.glob("copy_*/.slurm_job"):
            subprocess.run(["scancel", slurm_job(record.parent)], check=False)


def test_a_signal_stops_the_sweeps_waiting_not_its_jobs(stopped_sweep):
    sweep_dir, result = stopped_sweep
    assert result.returncode == 143
    assert "sweep: stopped waiting (SIGTERM); its SLURM jobs go on" in result.stderr
    assert (sweep_dir / "squeue.txt").read_text().strip()  # the job itself was left alone
