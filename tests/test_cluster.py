"""The SLURM launcher config composes into a submitit launcher (nothing is submitted)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from helpers import CONFIG_DIR


def test_slurm_launcher_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "train",
            overrides=["hydra/launcher=slurm", "hydra.launcher.partition=gpu"],
            return_hydra_config=True,
        )
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.partition == "gpu" and launcher.gpus_per_node == 1


# -- the sweep's report: counts from the run directories, whichever process ran the jobs ------
# (a real joblib sweep's report: tests/scripts/test_recipes.py, beside the sweep it shares)
def job(sweep_dir, number: int, name: str, outcome: str | None, **files: str):
    """A job's record under <sweep>/.jobs and its run directory holding ``files``."""
    import json

    from lengen.cli import SweepReport

    run_dir = sweep_dir / name
    run_dir.mkdir(parents=True)
    for file, text in files.items():
        path = run_dir / file.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    records = sweep_dir / SweepReport.RECORDS
    records.mkdir(exist_ok=True)
    record = {"run_dir": str(run_dir), "outcome": outcome}
    (records / f"{number}.json").write_text(json.dumps(record))


def report(sweep_dir) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of the report at the sweep's end."""
    import contextlib
    import io

    from omegaconf import OmegaConf

    from lengen.cli import SweepReport

    out, err, status = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            SweepReport().on_multirun_end(
                OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}})
            )
        except SystemExit as stop:
            status = stop.code
    return status, out.getvalue(), err.getvalue()


def test_the_report_counts_jobs_whose_return_it_never_saw(tmp_path):
    # SLURM jobs and joblib workers return elsewhere: results.json is what counts
    job(tmp_path, 0, "a", None, **{"results.json": '{"resumed": false}'})
    job(tmp_path, 1, "b", None, **{"results.json": '{"resumed": true}'})
    status, out, _ = report(tmp_path)
    assert status == 0 and "sweep: 2 runs (1 trained, 1 continued from a checkpoint)" in out


def test_a_run_without_results_fails_the_sweep_whatever_its_job_returned(tmp_path):
    job(tmp_path, 0, "a", "trained", **{"checkpoints__last.ckpt": "x"})
    status, out, err = report(tmp_path)
    assert status == 1 and "sweep: 1 run (1 interrupted)" in out
    assert "  a: interrupted: a checkpoint and no results" in err


def test_an_interrupted_run_is_named_with_its_recorded_reason(tmp_path):
    failed = '{"type": "Preempted", "error": "interrupted by SIGUSR1 at step 12: state saved"}'
    job(tmp_path, 0, "a", None, **{"checkpoints__last.ckpt": "x", "failed.json": failed})
    _, _, err = report(tmp_path)
    assert "  a: interrupted: interrupted by SIGUSR1 at step 12" in err


def test_a_refusal_is_counted_from_the_jobs_word(tmp_path):
    # a refusal writes nothing into the run directory: only the job's record tells
    job(tmp_path, 0, "a", "refused: pe.base must be > 1")
    status, out, err = report(tmp_path)
    assert status == 1 and "(1 refused)" in out and "  a: refused: pe.base must be > 1" in err


def test_a_job_that_left_no_word_and_no_results_is_a_failure(tmp_path):
    job(tmp_path, 0, "a", None)  # killed before it wrote anything
    status, out, _ = report(tmp_path)
    assert status == 1 and "(1 failed)" in out


def test_a_sweep_no_job_reported_back_from_is_not_a_success(tmp_path):
    status, _, err = report(tmp_path)
    assert status == 1 and "no job of the sweep reported back" in err


def test_a_packs_job_leaves_one_record_per_member_and_each_counts_by_its_own_directory(tmp_path):
    # a SLURM job of a pack that ended without Python's word for each member (lengen's
    # launcher records one outcome for the job): each member is counted from its directory
    import json

    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from lengen.cli import SweepReport

    SweepReport.write_plan(tmp_path, runs=2, workers=1, skipped=[], jobs=[2])
    members = [{"values": {"seed": s}, "subdir": f"m{s}"} for s in (0, 1)]
    hydra = OmegaConf.create(
        {
            "mode": RunMode.MULTIRUN,
            "sweep": {"dir": str(tmp_path)},
            "sweeper": {"pack_members": json.dumps(members)},
            "job": {"num": 0},
            "runtime": {"output_dir": str(tmp_path / "m0")},
        }
    )
    (tmp_path / "m0").mkdir()
    (tmp_path / "m0" / "results.json").write_text('{"resumed": false}')  # finished
    (tmp_path / "m1" / "checkpoints").mkdir(parents=True)
    (tmp_path / "m1" / "checkpoints" / "last.ckpt").write_text("x")  # stopped mid-pack
    SweepReport.record(hydra, None)
    SweepReport.record(hydra, "failed: exited with status 137 before finishing", launcher=True)
    status, out, err = report(tmp_path)
    assert status == 1 and "sweep: 2 runs (1 trained, 1 interrupted)" in out
    assert "  m1: interrupted: " in err and "  m0:" not in err


# -- one sweep at a time into a folder: every sweep numbers its job records from 0 -------------
@pytest.fixture
def held_sweep(tmp_path):
    """A sweep folder that another process's sweep holds (its lock taken, a record written);
    -> (the folder, that process's pid)."""
    import subprocess
    import sys

    sweep_dir = tmp_path / "sweep"
    code = (
        "import sys, pathlib; from lengen.rundir import hold_sweep; p = pathlib.Path(sys.argv[1])"
        "; hold_sweep(p); (p / '.jobs').mkdir(); (p / '.jobs' / '0.json').write_text('{}')"
        "; print('held', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(sweep_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield sweep_dir, holder.pid
    finally:
        holder.stdin.close()  # its end of input ends it, and the kernel drops the lock
        holder.wait(timeout=30)


def listing(folder):
    return sorted((str(p), p.stat().st_mtime_ns) for p in folder.rglob("*"))


def test_a_second_sweep_into_a_held_folder_is_refused_naming_the_key(held_sweep):
    from helpers import run_train

    sweep_dir, pid = held_sweep
    before = listing(sweep_dir)
    done = run_train("-m", "seed=1", f"hydra.sweep.dir={sweep_dir}", "trainer.max_steps=1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: hydra.sweep.dir={sweep_dir} is in use by another running sweep (pid {pid}); "
        "allowed: another hydra.sweep.dir, or wait until that sweep ends (runs meant to run at "
        "once go in one command: -m seed=1,2 hydra/launcher=local hydra.launcher.n_jobs=2)"
    ]
    assert listing(sweep_dir) == before  # the other sweep's records untouched


def test_a_sweep_started_without_the_pre_check_is_refused_at_its_start(held_sweep):
    # (a sweep composed from Python or another entry point: Hydra's callback asks)
    from omegaconf import OmegaConf

    from lengen.cli import SweepReport

    sweep_dir, _ = held_sweep
    before = listing(sweep_dir)
    with pytest.raises(SystemExit) as stop:
        SweepReport().on_multirun_start(OmegaConf.create({"hydra": {"sweep": {"dir": sweep_dir}}}))
    assert stop.value.code == 2 and listing(sweep_dir) == before


def test_a_sweep_lets_go_of_its_folder_at_its_end(tmp_path):
    import fcntl
    import os

    from omegaconf import OmegaConf

    from lengen.cli import SweepReport
    from lengen.rundir import SWEEP_LOCK

    config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
    SweepReport().on_multirun_start(config)
    job(tmp_path, 0, "a", None, **{"results.json": "{}"})
    report(tmp_path)  # the end of the sweep
    descriptor = os.open(tmp_path / SWEEP_LOCK, os.O_RDWR)
    try:  # another open file of the lock: refused while the sweep still held it
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(descriptor)
