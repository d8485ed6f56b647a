"""scripts/device_check.py: what it would run (checked here, on the CPU), and its refusal where
no CUDA device is present. The checks themselves run on a GPU (docs/scaling.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from helpers import ROOT, load_script, yaml_choices

check = load_script("device_check")


def test_bf16_training_covers_every_encoding(tmp_path):
    cases = dict(check.plan(tmp_path, devices=1)["bf16"])
    assert sorted(cases) == yaml_choices("pe")
    assert all("trainer.precision=bf16-mixed" in command for command in cases.values())


def test_flex_training_covers_the_bias_encodings(tmp_path):
    cases = dict(check.plan(tmp_path, devices=1)["flex"])
    assert all("model.attention=flex" in command for command in cases.values())
    assert set(cases) <= set(yaml_choices("pe"))


def test_ddp_runs_over_every_device_and_is_skipped_with_one(tmp_path):
    assert check.plan(tmp_path, devices=1)["ddp"] == []
    ((_, command),) = check.plan(tmp_path, devices=4)["ddp"]
    assert "trainer.devices=4" in command


def test_every_run_writes_under_the_report_folder(tmp_path):
    for cases in check.plan(tmp_path, devices=2).values():
        for _, command in cases:
            run_dirs = [arg for arg in command if arg.startswith("hydra.run.dir=")]
            assert all(arg.startswith(f"hydra.run.dir={tmp_path}") for arg in run_dirs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_without_cuda_it_refuses_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "device_check.py"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: no CUDA device") and done.stderr.count("\n") == 1
    assert not out.exists()


def test_an_unknown_check_is_refused_in_one_line(capsys):
    assert check.main(["--only", "bf16,fp8"]) == 2
    assert capsys.readouterr().err == (
        "error: --only must name checks of bf16, flash, flex, greedy, ddp, mfu; got 'fp8'\n"
    )


def test_jobs_below_one_is_refused_in_one_line(capsys):
    assert check.main(["--jobs", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: --jobs must be ≥ 1 and --timeout > 0; got --jobs 0 --timeout 300\n"
    )


def test_the_timing_runs_last_and_alone_whatever_the_jobs(tmp_path, monkeypatch):
    import threading

    order, running, overlapped = [], [0], []
    lock = threading.Lock()

    def fake_case(command, timeout=None):
        with lock:
            running[0] += 1
            order.append(command)
        mfu = any("bench.py" in part for part in command)
        if mfu:
            overlapped.append(running[0] > 1)
        with lock:
            running[0] -= 1
        return {"passed": True, "exit_status": 0, "seconds": 0.0, "error": None}

    monkeypatch.setattr(check, "run_case", fake_case)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "a test GPU")
    assert check.main(["--jobs", "4", "--out", str(tmp_path)]) == 0
    assert any("bench.py" in part for part in order[-1]) and overlapped == [False]
    report = (tmp_path / "report.md").read_text()
    assert report.index("| bf16 |") < report.index("| mfu |")  # the plan's order
