"""The command line: what runs, what a sweep reports, and failures after the start (the table
of bad command lines: tests/test_bad_input.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers import ROOT, run_train


def train(*arguments: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return run_train(*arguments, cwd=cwd)


def test_train_cli_writes_run_dir_relative_to_cwd(tmp_path):
    result = train(
        "debug=fast", "data.len=4", "eval.factors=[1,2]", "hydra.run.dir=out/run", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "out/run/results.json").read_text())
    assert [row["length"] for row in results["eval"]] == [4, 8]
    assert results["provenance"]["command"].startswith("train.py debug=fast")
    assert not (tmp_path / "lightning_logs").exists() and not (tmp_path / "wandb").exists()


def test_eval_cli_rejects_missing_run(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "eval.py"), f"run={tmp_path}/nothing"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: run=")
    assert "Traceback" not in result.stderr


def test_a_failed_run_does_not_stop_the_sweep(tmp_path):
    """A learning rate of 1e30 diverges; 1e-3 does not. Both run, the failure is recorded and
    reported, and the sweep's report counts what each job did."""
    result = train(
        "-m",
        "optim.lr=1e-3,1e30",
        "trainer.gradient_clip_val=null",
        "debug=fast",
        "data.len=4",
        "eval.factors=[1]",
        "logger=none",
        f"hydra.sweep.dir={tmp_path}",
    )
    assert result.returncode == 1
    assert "sweep: 2 runs (1 trained, 1 failed)" in result.stdout
    assert "1 of 2 runs refused or failed" in result.stderr
    finished = [p for p in tmp_path.iterdir() if (p / "results.json").is_file()]
    failed = [p for p in tmp_path.iterdir() if (p / "failed.json").is_file()]
    assert len(finished) == len(failed) == 1
    failure = json.loads((failed[0] / "failed.json").read_text())
    assert failure["error"].startswith("training diverged") and "traceback" not in failure
    assert "Traceback" not in result.stderr


def test_divergence_is_one_line_and_exit_status_3(tmp_path):
    result = train(
        "debug=fast", "optim.lr=1e30", "trainer.gradient_clip_val=null", f"hydra.run.dir={tmp_path}"
    )
    assert result.returncode == 3
    assert result.stderr.strip().splitlines()[-1].startswith("error: training diverged at step")
    assert "Traceback" not in result.stderr
    failure = json.loads((tmp_path / "failed.json").read_text())
    assert failure["type"] == "TrainingDiverged" and "traceback" not in failure
