"""Run-directory rules: one owner, stable names per configuration, resume=auto, and refusals
that happen before anything is written."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, compose_train, run_train
from lengen.checks import ConfigError
from lengen.rundir import LOCK, RunDirectory, resume_refusal
from lengen.train import run

#: no attention statistics: no test here reads them, and drawing their figures costs more than
#: a debug=fast run's training (their tests: tests/evaluation/test_diagnostics.py)
FAST = ["debug=fast", "eval.factors=[1]", "logger=none", "eval.diagnostics=false"]


def test_a_second_process_is_refused_a_locked_directory(tmp_path):
    holder = os.open(tmp_path / LOCK, os.O_CREAT | os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process's run (flock locks are per open file)
    try:
        with pytest.raises(ConfigError, match=r"^hydra.run.dir=.* is in use by another"):
            RunDirectory(tmp_path).lock()
    finally:
        os.close(holder)


def test_a_lock_is_dropped_when_released(tmp_path):
    RunDirectory(tmp_path).lock()
    RunDirectory.release_all()
    assert not RunDirectory(tmp_path).in_use()


def test_resume_true_without_a_checkpoint_is_refused_without_reading_torch(tmp_path):
    refusal = resume_refusal(compose_train("resume=true"), tmp_path)
    assert refusal.startswith("resume=true: no checkpoint at")


def test_resume_auto_starts_a_directory_without_a_checkpoint(tmp_path):
    assert resume_refusal(compose_train("resume=auto"), tmp_path) is None


def test_resume_auto_on_a_finished_run_returns_its_results(tmp_path):
    first = run(compose_train(*FAST), run_dir=tmp_path)
    again = run(compose_train(*FAST, "resume=auto"), run_dir=tmp_path)
    assert again["eval"] == first["eval"]


def test_eval_refuses_a_checkpoint_trained_with_another_config(tmp_path, finished_dir):
    import shutil

    from lengen.reeval import evaluate_run

    # a copy of the module's finished run (the same command): its config is changed below
    tmp_path = Path(shutil.copytree(finished_dir, tmp_path / "run"))
    config = (tmp_path / "config.yaml").read_text()
    (tmp_path / "config.yaml").write_text(config.replace("name: rope", "name: alibi", 1))
    with pytest.raises(ConfigError, match=r"^run=.*trained with another config"):
        evaluate_run([f"run={tmp_path}"])


@pytest.mark.parametrize("override", ["pe=alibi", "model._target_=lengen.model.EncoderOnly"])
def test_eval_refuses_to_swap_the_model_or_encoding(tmp_path, override):
    from lengen.reeval import evaluate_run

    with pytest.raises(
        ConfigError, match=rf"^{override.split('=')[0]}=.*re-evaluates the run's own"
    ):
        evaluate_run([f"run={tmp_path}", override])


def test_a_refused_command_creates_no_directory(tmp_path):
    target = tmp_path / "run"
    result = run_train("pe=xpos", "model=encoder", f"hydra.run.dir={target}")
    assert result.returncode == 2
    assert result.stderr.startswith("error: pe: XPos") and "Traceback" not in result.stderr
    assert not target.exists()


def test_a_refused_command_leaves_a_finished_run_untouched(finished_dir):
    # the module's finished run (run(compose_train(*FAST)), as this test trained its own)
    before = {p: p.read_bytes() for p in finished_dir.rglob("*") if p.is_file()}
    result = run_train(*FAST, "pe=alibi", f"hydra.run.dir={finished_dir}")
    assert result.returncode == 2 and "already holds a finished run" in result.stderr
    assert {p: p.read_bytes() for p in finished_dir.rglob("*") if p.is_file()} == before


def test_resume_true_into_a_missing_directory_creates_nothing(tmp_path):
    target = tmp_path / "never"
    result = run_train(*FAST, "resume=true", f"hydra.run.dir={target}")
    assert result.returncode == 2 and result.stderr.startswith("error: resume=true: no checkpoint")
    assert not target.exists()


def test_an_empty_run_dir_is_refused(tmp_path):
    result = run_train("hydra.run.dir=", cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error: hydra.run.dir: empty")
    assert list(tmp_path.iterdir()) == []


def test_a_seed_beyond_32_bits_names_the_key():
    result = run_train("seed=4294967296")
    assert result.returncode == 2 and result.stderr.startswith("error: seed must be")


def test_a_sweep_reruns_only_what_is_missing(tmp_path):
    from lengen.identity import run_id

    sweep = ["-m", *FAST, "trainer.max_steps=2", f"hydra.sweep.dir={tmp_path}", "resume=auto"]
    # seed 0 finished before: trained in this process (lengen.train.run, what train.py calls)
    # into the folder the sweep names its job (configs/hydra/default.yaml's sweep.subdir), one
    # train.py start fewer; were the name or the config not the sweep's, seed 0 would train again
    cfg = compose_train(*FAST, "trainer.max_steps=2", "resume=auto", "seed=0")
    name = f"{cfg.data.name}_{cfg.model.name}_{cfg.pe.name}_len{cfg.data.len}_seed0_{run_id(cfg)}"
    run(cfg, run_dir=tmp_path / name)
    grown = run_train(*sweep, "seed=0,1")
    assert grown.returncode == 0, grown.stderr[-2000:]
    assert "2 runs (1 finished earlier, 1 trained)" in grown.stdout
    assert len([p for p in tmp_path.iterdir() if (p / "results.json").is_file()]) == 2
    assert f"next: python scripts/aggregate.py {tmp_path}" in grown.stdout


def test_two_default_runs_in_one_second_get_two_directories(tmp_path):
    command = [sys.executable, str(ROOT / "train.py"), *FAST, "trainer.max_steps=2"]
    runs = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL) for _ in range(2)]  # fmt: skip
    assert [p.wait(timeout=300) for p in runs] == [0, 0]
    finished = list((tmp_path / "results" / "runs").glob("*/results.json"))
    assert len(finished) == 2
    assert len({json.loads(p.read_text())["seed"] for p in finished}) == 1


def wait_for_handler(pid: int, signum: int, timeout: float = 120.0) -> None:
    """Until process ``pid`` has a handler for ``signum`` (Linux: the SigCgt mask of
    /proc/<pid>/status). Before that a signal kills the interpreter itself, whatever lengen
    does, and how soon that is depends on the machine's load; elsewhere: wait 1 s."""
    import time

    status = Path(f"/proc/{pid}/status")
    deadline = time.monotonic() + timeout
    while status.is_file() and time.monotonic() < deadline:
        caught = next(
            (
                line.split()[1]
                for line in status.read_text().splitlines()
                if line.startswith("SigCgt")
            ),
            "0",
        )
        if int(caught, 16) >> (signum - 1) & 1:
            return
        time.sleep(0.01)
    if not status.is_file():
        time.sleep(1.0)


@pytest.mark.parametrize("delay", [0.0, 3.5])
def test_an_early_sigterm_stops_with_a_checkpoint_and_a_record(tmp_path, delay):
    # 0 s after train.py installs its handlers: during imports and the command-line checks;
    # 3.5 s later: around Hydra's and Lightning's start-up, where Lightning's own handler used
    # to bypass the signal (exit 0, nothing saved)
    import signal
    import time

    command = [sys.executable, str(ROOT / "train.py"), "debug=fast",
               "trainer.max_steps=200", "logger=none", f"hydra.run.dir={tmp_path}"]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wait_for_handler(process.pid, signal.SIGTERM)
    time.sleep(delay)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert json.loads((tmp_path / "failed.json").read_text())["type"] == "Preempted"
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_a_kill_after_a_checkpoint_loses_no_logged_row(tmp_path, monkeypatch):
    # the checkpoint's own step is logged just after it is written: a SIGKILL in between used
    # to lose that row for good (the resumed run starts at the next step)
    import csv
    import signal

    import lengen.lit
    from lengen.checks import Preempted

    settings = ["debug=fast", "trainer.max_steps=6", "trainer.log_every_n_steps=1",
                "trainer.checkpoint_every_n_steps=null", "eval.factors=[1]", "logger=csv"]  # fmt: skip
    real = lengen.lit.LitModel.training_step

    def signalling(self, batch, batch_idx):
        if self.global_step == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, batch, batch_idx)

    monkeypatch.setattr(lengen.lit.LitModel, "training_step", signalling)
    with pytest.raises(Preempted, match="at step 4"):
        run(compose_train(*settings), run_dir=tmp_path)
    monkeypatch.setattr(lengen.lit.LitModel, "training_step", real)
    log = tmp_path / "logs" / "metrics.csv"
    with open(log, newline="") as file:  # as if the kill came before the row of step 3 was saved
        rows = [row for row in csv.DictReader(file) if int(row["step"]) < 3]
        keys = list(rows[0])
    with open(log, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    run(compose_train(*settings, "resume=true"), run_dir=tmp_path)
    with open(log, newline="") as file:
        steps = sorted({int(r["step"]) for r in csv.DictReader(file) if r.get("train/loss")})
    assert steps == list(range(6))


def test_a_run_killed_while_evaluating_resumes_with_its_validation(tmp_path, monkeypatch):
    import lengen.train

    def killed(*args, **kwargs):
        raise SystemExit(137)  # as if SIGKILLed during the final evaluation

    settings = [*FAST, "trainer.max_steps=4"]
    whole = run(compose_train(*settings), run_dir=tmp_path / "whole")
    monkeypatch.setattr(lengen.train, "evaluate_and_write", killed)
    with pytest.raises(SystemExit):
        run(compose_train(*settings), run_dir=tmp_path / "cut")
    monkeypatch.undo()
    resumed = run(compose_train(*settings, "resume=true"), run_dir=tmp_path / "cut")
    assert resumed["validation"] == whole["validation"] != {}


def test_a_size_that_cannot_fit_is_refused_before_anything_runs(tmp_path):
    result = run_train("data.len=1000000000", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 2
    assert result.stderr.startswith("error: data.len=1000000000: a training step needs")
    assert not (tmp_path / "run").exists()


def test_out_of_memory_at_one_instance_keeps_the_rows_measured(tmp_path, monkeypatch):
    import lengen.evaluation.tasks as tasks
    from lengen.checks import EvaluationOutOfMemory

    real = tasks.measured_with_oom_halving

    def short_of_memory(score, batch_size, device):
        if score.__defaults__[0].shape[1] > 16:  # the inputs of lengths past 16
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory")
        return real(score, batch_size, device)

    monkeypatch.setattr(tasks, "measured_with_oom_halving", short_of_memory)
    with pytest.raises(EvaluationOutOfMemory, match=r"^eval.lengths: length 32 does not fit"):
        run(compose_train(*FAST, "eval.factors=[1,2,4]"), run_dir=tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert [row["length"] for row in results["eval"]] == [16]
    assert any("length 32 does not fit" in w for w in results["warnings"])


# -- a finished run answers only the request it ran (issue #34) ------------------------------------
@pytest.fixture(scope="module")
def finished_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("finished")
    run(compose_train(*FAST), run_dir=path)
    return path


def _files(path: Path) -> dict:
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_resume_on_a_finished_run_of_another_encoding_is_refused(finished_dir):
    with pytest.raises(ConfigError, match=r"^resume=true: .* finished run of another config \(pe"):
        RunDirectory(finished_dir).finished(compose_train(*FAST, "pe=alibi", "resume=true"))


def test_resume_on_a_run_finished_with_other_decoding_is_refused(finished_dir):
    cfg = compose_train(*FAST, "eval.decoding=greedy", "resume=auto")
    with pytest.raises(ConfigError, match=r"other evaluation settings \(eval.decoding"):
        RunDirectory(finished_dir).finished(cfg)


def test_resume_asking_for_a_length_not_evaluated_is_refused(finished_dir):
    cfg = compose_train(*FAST, "eval.factors=[1,2]", "resume=auto")
    with pytest.raises(ConfigError, match=r"eval lengths \[\d+\] not evaluated"):
        RunDirectory(finished_dir).finished(cfg)


def test_resume_with_only_the_plot_resolution_changed_returns_the_results(finished_dir):
    cfg = compose_train(*FAST, "eval.plot_dpi=100", "resume=auto")
    assert RunDirectory(finished_dir).finished(cfg) is not None


def test_a_refused_resume_leaves_the_finished_run_untouched(finished_dir):
    before = _files(finished_dir)
    result = run_train(*FAST, "pe=alibi", "resume=true", f"hydra.run.dir={finished_dir}")
    assert result.returncode == 2 and "finished run of another config" in result.stderr
    assert _files(finished_dir) == before


def test_a_fresh_run_is_refused_a_directory_of_the_users_files(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "config.yaml").write_text("mine\n")
    with pytest.raises(ConfigError, match=r"holds files that no lengen run wrote \(config.yaml"):
        run(compose_train(*FAST), run_dir=tmp_path)
    assert _files(tmp_path) == {tmp_path / "config.yaml": b"mine\n"}


def test_a_run_directory_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(ConfigError, match=r"^hydra.run.dir=.* is a file; allowed: a directory"):
        RunDirectory(target).check_start(compose_train(*FAST))


def test_a_sweep_whose_jobs_would_share_a_directory_is_refused_before_writing(tmp_path):
    result = run_train(
        "-m", *FAST, "eval.decoding=teacher_forced,greedy", f"hydra.sweep.dir={tmp_path / 's'}"
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: eval.decoding: the sweep's jobs for its values")
    assert not (tmp_path / "s").exists()


def test_two_evaluations_asking_for_one_tag_get_two_names(tmp_path):
    from lengen.reeval import reserve_tag

    assert [reserve_tag(tmp_path, "long") for _ in range(2)] == ["long", "long-1"]


def test_a_finished_evaluation_frees_its_reservation(finished_dir):
    from lengen.reeval import evaluate_run

    results = evaluate_run([f"run={finished_dir}", "tag=again"])
    assert results["tag"] == "again" and (finished_dir / "results.again.json").is_file()
    assert not list(finished_dir.glob(".results.*.reserved"))


def test_a_figure_that_cannot_be_drawn_does_not_lose_the_results(tmp_path, monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise MemoryError("a figure of 100,000 dpi")

    monkeypatch.setattr("lengen.plots.plot_extrapolation", out_of_memory)
    results = run(compose_train(*FAST), run_dir=tmp_path)
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["eval"] == results["eval"] and written["eval"]
    assert any("extrapolation.png not written (MemoryError" in w for w in written["warnings"])


# -- a requeued SLURM job continues its own run, and only its own --------------------------------
def interrupted_run_of_job(run_dir: Path, job: str) -> Path:
    """A directory as a SLURM job's interrupted run leaves it: config, checkpoint, job record."""
    from lengen.rundir import SLURM_JOB, save_config

    save_config(compose_train(*FAST), run_dir / "config.yaml")
    (run_dir / "checkpoints").mkdir()
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"a checkpoint")
    (run_dir / SLURM_JOB).write_text(f"lengen/{job}\n")
    return run_dir


@pytest.fixture
def in_slurm_job(monkeypatch):
    def enter(job: str, restarts: int) -> None:
        monkeypatch.setenv("SLURM_CLUSTER_NAME", "lengen")
        monkeypatch.setenv("SLURM_JOB_ID", job)
        monkeypatch.setenv("SLURM_RESTART_COUNT", str(restarts))

    return enter


def test_a_requeued_slurm_job_continues_its_interrupted_run(tmp_path, in_slurm_job):
    in_slurm_job("17", restarts=1)
    assert resume_refusal(compose_train(*FAST), interrupted_run_of_job(tmp_path, "17")) is None


def test_a_requeued_slurm_job_is_held_to_the_runs_config(tmp_path, in_slurm_job):
    in_slurm_job("17", restarts=1)
    refusal = resume_refusal(
        compose_train(*FAST, "pe=alibi"), interrupted_run_of_job(tmp_path, "17")
    )
    assert refusal.startswith("resume=auto (a requeued SLURM job): the config differs")


def test_another_slurm_job_is_refused_an_interrupted_run(tmp_path, in_slurm_job):
    in_slurm_job("18", restarts=1)
    refusal = resume_refusal(compose_train(*FAST), interrupted_run_of_job(tmp_path, "17"))
    assert "holds an interrupted run" in refusal


def test_the_first_attempt_of_a_slurm_job_is_refused_an_interrupted_run(tmp_path, in_slurm_job):
    in_slurm_job("17", restarts=0)  # the same job id, not requeued: a second command in it
    refusal = resume_refusal(compose_train(*FAST), interrupted_run_of_job(tmp_path, "17"))
    assert "holds an interrupted run" in refusal


def test_a_run_records_the_slurm_job_that_started_it(tmp_path, in_slurm_job):
    in_slurm_job("21", restarts=0)
    with RunDirectory(tmp_path).owned(compose_train(*FAST)):
        assert (tmp_path / ".slurm_job").read_text() == "lengen/21\n"


# -- the lock dies with its owner, whatever the owner forked -------------------------------------
def test_a_killed_runs_forked_workers_do_not_keep_its_lock(tmp_path):
    """A data-loader worker is a fork of the run: SIGKILL the run, and the directory is free at
    once while the worker still lives (SLURM requeues a job within seconds)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", FORKING_OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    worker = int(owner.stdout.readline())
    try:
        owner.kill()
        owner.wait(timeout=30)
        os.kill(worker, 0)  # the orphaned worker is alive
        assert not RunDirectory(tmp_path).in_use()
    finally:
        os.kill(worker, 9)


FORKING_OWNER = """
import os, sys, time
from lengen.rundir import RunDirectory
RunDirectory(sys.argv[1]).lock()
if os.fork() == 0:  # the worker: holds every other descriptor it inherited, for a minute
    # printed by the worker, so the test reads it only once fork's child hooks have run (under
    # load the child may not have run at all when the parent could print)
    print(os.getpid(), flush=True)
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""
