"""Resume and preemption: a run stopped by SIGTERM and resumed equals the uninterrupted run."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from helpers import CONFIG_DIR, compose_train
from lengen.config import ConfigError
from lengen.train import run

ROOT = CONFIG_DIR.parent
# tiny tensors: a second intra-op thread only waits for a busy core
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
# dropout and randomized positions: the step's randomness must repeat after a restart too
RUN = [
    "trainer=cpu",
    "logger=csv",
    "debug=fast",
    "data.len=8",
    "data.batch_size=64",
    "trainer.max_steps=30",
    "trainer.val_check_interval=10",
    "trainer.log_every_n_steps=1",
    "trainer.checkpoint_every_n_steps=3",
    "model.dropout=0.1",
    "pe.randomized=true",
    "pe.max_position=64",
    "eval.factors=[1,2]",
    # no attention statistics (they never change a row): their figures cost more than the run
    "eval.diagnostics=false",
]


def start(run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "train.py"), *RUN, *extra, f"hydra.run.dir={run_dir}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )


def losses(run_dir: Path) -> dict[int, float]:
    """train/loss per step from the CSV log (a step logged twice keeps its last value)."""
    with open(run_dir / "logs" / "metrics.csv") as file:
        return {
            int(row["step"]): float(row["train/loss"])
            for row in csv.DictReader(file)
            if row["train/loss"]
        }


@pytest.fixture(scope="module")
def interrupted_and_whole(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    whole, cut = root / "whole", root / "cut"
    interrupted = start(cut)
    deadline = time.monotonic() + 240
    while not (cut / "checkpoints" / "last.ckpt").exists():  # the step-3 checkpoint: training
        assert interrupted.poll() is None, interrupted.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    interrupted.send_signal(signal.SIGTERM)
    _, cut_stderr = interrupted.communicate(timeout=240)
    cut_status = interrupted.returncode
    cut_files = sorted(p.name for p in cut.iterdir())
    failure = (
        json.loads((cut / "failed.json").read_text()) if (cut / "failed.json").exists() else {}
    )
    stopped_at = torch.load(cut / "checkpoints" / "last.ckpt", weights_only=False)["global_step"]
    resumed = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *RUN, "resume=true", f"hydra.run.dir={cut}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    # the uninterrupted run in this process (lengen.train.run, what train.py calls), on one
    # thread as the others: only the signalled run needs a process of its own
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:  # compose_train adds debug=fast itself
        run(compose_train(*(o for o in RUN if o != "debug=fast")), run_dir=whole)
    finally:
        torch.set_num_threads(threads)
    return {
        "whole": whole,
        "cut": cut,
        "cut_status": cut_status,
        "cut_stderr": cut_stderr,
        "cut_files": cut_files,
        "failure": failure,
        "stopped_at": stopped_at,
        "resumed": resumed,
    }


def test_sigterm_stops_with_status_143_and_a_checkpoint(interrupted_and_whole):
    runs = interrupted_and_whole
    assert runs["cut_status"] == 128 + signal.SIGTERM, runs["cut_stderr"]
    assert "interrupted by SIGTERM at step" in runs["cut_stderr"]
    assert "Traceback" not in runs["cut_stderr"]
    assert "results.json" not in runs["cut_files"] and "extrapolation.png" not in runs["cut_files"]
    assert runs["failure"]["type"] == "Preempted"
    assert 3 <= runs["stopped_at"] < 30, "the signal must land mid-run for this test to mean much"


def test_resumed_run_has_the_uninterrupted_losses(interrupted_and_whole):
    runs = interrupted_and_whole
    assert runs["resumed"].returncode == 0, runs["resumed"].stderr
    whole, cut = losses(runs["whole"]), losses(runs["cut"])
    assert sorted(cut) == sorted(whole) == list(range(30))
    torch.testing.assert_close(
        torch.tensor([cut[s] for s in range(30)], dtype=torch.float64),
        torch.tensor([whole[s] for s in range(30)], dtype=torch.float64),
        rtol=0,
        atol=1e-6,
    )


def test_resumed_run_has_the_uninterrupted_results(interrupted_and_whole):
    runs = interrupted_and_whole
    whole = json.loads((runs["whole"] / "results.json").read_text())
    cut = json.loads((runs["cut"] / "results.json").read_text())
    assert cut["resumed"] and not whole["resumed"]
    assert cut["train_steps"] == whole["train_steps"] == 30
    assert cut["train_tokens"] == whole["train_tokens"]
    for mine, theirs in zip(cut["eval"], whole["eval"], strict=True):
        assert mine["length"] == theirs["length"]
        for key in ("loss", "accuracy", "exact_match"):
            assert mine[key] == pytest.approx(theirs[key], abs=1e-6)
    assert not (runs["cut"] / "failed.json").exists()


def test_resume_on_a_finished_run_does_nothing(interrupted_and_whole):
    cut = interrupted_and_whole["cut"]
    before = {p: p.stat().st_mtime_ns for p in cut.rglob("*")}
    cfg = compose_train(*RUN, "resume=true")  # the same run: its results answer it
    results = run(cfg, run_dir=cut)
    assert results == json.loads((cut / "results.json").read_text())
    assert {p: p.stat().st_mtime_ns for p in cut.rglob("*")} == before


def test_resume_without_checkpoint_names_resume(tmp_path):
    with pytest.raises(ConfigError, match=r"^resume=true: no checkpoint at"):
        run(compose_train("resume=true"), run_dir=tmp_path)


def test_resume_refuses_a_config_that_trains_something_else(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "last.ckpt").write_bytes(b"")
    from lengen.rundir import save_config

    save_config(compose_train(), run_dir / "config.yaml")
    cfg = compose_train("resume=true", "model.d_model=64", "eval.factors=[1]")
    with pytest.raises(ConfigError, match=r"^resume=true: .*model\.d_model \(128 -> 64\)") as error:
        run(cfg, run_dir=run_dir)
    assert "eval.factors" not in str(error.value)  # evaluation settings may change


def test_a_fresh_run_refuses_a_directory_with_an_interrupted_run(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"^hydra.run.dir=.* holds an interrupted run"):
        run(compose_train(), run_dir=tmp_path)


def test_resume_refuses_a_corrupt_checkpoint(tmp_path):
    from lengen.rundir import save_config

    save_config(compose_train(), tmp_path / "config.yaml")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match=r"^resume=.*cannot be read"):
        run(compose_train("resume=true"), run_dir=tmp_path)


def val_losses(run_dir: Path) -> dict[int, float]:
    with open(run_dir / "logs" / "metrics.csv") as file:
        return {
            int(row["step"]): float(row["val/loss"])
            for row in csv.DictReader(file)
            if row["val/loss"]
        }


def test_a_signal_before_validation_resumes_without_repeating_or_skipping_it(tmp_path, monkeypatch):
    """SIGTERM during step 19 of 30, validation every 10: the checkpoint is written after the
    validation that follows step 20, and the resumed run validates at 30 only, as the whole
    run does."""
    import lengen.lit
    from lengen.checks import Preempted

    settings = [*RUN[1:5], "trainer.max_steps=30", "trainer.val_check_interval=10"]
    settings += ["trainer.log_every_n_steps=1", "trainer.checkpoint_every_n_steps=null"]
    settings += ["model.dropout=0.1", "eval.factors=[1]", "eval.samples=4", RUN[-1]]
    torch.set_num_threads(1)
    run(compose_train(*settings), run_dir=tmp_path / "whole")

    real = lengen.lit.LitModel.training_step

    def signalling(self, batch, batch_idx):
        if self.global_step == 19:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(self, batch, batch_idx)

    monkeypatch.setattr(lengen.lit.LitModel, "training_step", signalling)
    with pytest.raises(Preempted, match=r"^interrupted by SIGTERM at step 20"):
        run(compose_train(*settings), run_dir=tmp_path / "cut")
    monkeypatch.setattr(lengen.lit.LitModel, "training_step", real)
    run(compose_train(*settings, "resume=true"), run_dir=tmp_path / "cut")

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert sorted(val_losses(cut)) == sorted(val_losses(whole)) == [9, 19, 29]
    for step in val_losses(whole):
        assert val_losses(cut)[step] == pytest.approx(val_losses(whole)[step], abs=1e-6)
    assert sorted(losses(cut)) == list(range(30))
    for step in range(30):
        assert losses(cut)[step] == pytest.approx(losses(whole)[step], abs=1e-6)


def test_eval_refuses_an_interrupted_run(tmp_path):
    """A run stopped mid-training has a checkpoint but no results: eval.py must not score it."""
    from lengen.reeval import evaluate_run
    from lengen.rundir import save_config

    save_config(compose_train(), tmp_path / "config.yaml")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"^run=.*never finished \(no results.json\)"):
        evaluate_run([f"run={tmp_path}"])


def test_divergence_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    import lengen.lit
    from lengen.checks import TrainingDiverged

    real, calls = lengen.lit.batch_stats, []

    def diverging(logits, targets, **kwargs):
        calls.append(1)
        stats = real(logits, targets, **kwargs)
        return {**stats, "loss_sum": float("nan")} if len(calls) == 8 else stats

    monkeypatch.setattr(lengen.lit, "batch_stats", diverging)
    cfg = compose_train(
        "data.len=4",
        "eval.factors=[1]",
        "logger=none",
        "trainer.max_steps=10",
        "trainer.val_check_interval=100",
        "trainer.checkpoint_every_n_steps=3",
    )
    with pytest.raises(TrainingDiverged, match=r"^training diverged at step 7"):
        run(cfg, run_dir=tmp_path)
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)
    assert checkpoint["global_step"] == 6  # the last multiple of 3 before the bad step
    assert all(torch.isfinite(v).all() for v in checkpoint["state_dict"].values())
    assert not (tmp_path / "results.json").exists()
    assert not list((tmp_path / "checkpoints").glob(".*.tmp"))


def test_resume_on_a_finished_run_from_the_command_line_touches_nothing(interrupted_and_whole):
    cut = interrupted_and_whole["cut"]
    before = {p: p.stat().st_mtime_ns for p in cut.rglob("*")}
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), *RUN, "resume=true", f"hydra.run.dir={cut}"],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert result.returncode == 0
    assert result.stdout.startswith(f"resume=true: {cut} already finished")
    assert {p: p.stat().st_mtime_ns for p in cut.rglob("*")} == before
