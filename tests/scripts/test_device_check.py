"""scripts/device_check.py: what it would run (checked here, on the CPU), its refusal where no
CUDA device is present, its dry run, and the verdicts of the timings, which fail when they miss
issue #46's targets. The checks themselves run on a GPU (docs/scaling.md, docs/benchmarks.md)."""

from __future__ import annotations

import json
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
        "error: --only must name checks of bf16, flash, flex, greedy, ddp, mfu, plain, "
        "profile, mechanisms, pack, cpu_precision; got 'fp8'\n"
    )


def test_jobs_below_one_is_refused_in_one_line(capsys):
    assert check.main(["--jobs", "0"]) == 2
    assert capsys.readouterr().err == (
        "error: --jobs must be ≥ 1 and --timeout > 0; got --jobs 0 --timeout 300\n"
    )


def test_the_timings_run_last_and_alone_whatever_the_jobs(tmp_path, monkeypatch):
    import threading

    order, running, overlapped = [], [0], []
    lock = threading.Lock()

    def is_timing(command):
        return any(part.endswith(".py") and "/scripts/" in part for part in command)

    def fake_case(command, timeout=None, log=None):
        with lock:
            running[0] += 1
            order.append(command)
        if is_timing(command):
            overlapped.append(running[0] > 1)
        with lock:
            running[0] -= 1
        return {"passed": True, "exit_status": 0, "seconds": 0.0, "error": None}

    monkeypatch.setattr(check, "run_case", fake_case)
    monkeypatch.setattr(check, "judge", lambda name, command, row: row)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "a test GPU")
    assert check.main(["--jobs", "4", "--out", str(tmp_path)]) == 0
    timings = [is_timing(command) for command in order]
    assert timings == sorted(timings) and sum(timings) == 7  # ladder, 2 plain, profile, …
    assert overlapped == [False] * 7
    report = (tmp_path / "report.md").read_text()
    assert report.index("| bf16 |") < report.index("| mfu |")  # the plan's order


def test_a_dry_run_writes_the_report_of_every_case_and_runs_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(check, "run_case", lambda *a, **k: pytest.fail("a case ran"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert check.main(["--dry-run", "--only", "mfu,plain,bf16", "--out", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "report.json").read_text())["checks"]
    assert sorted(report) == ["bf16", "mfu", "plain"]
    assert len(report["bf16"]) == len(yaml_choices("pe")) and len(report["plain"]) == 2
    rows = [row for cases in report.values() for row in cases.values()]
    assert all(row["passed"] is None and row["error"].startswith("dry run: ") for row in rows)


def test_merge_keeps_the_checks_of_an_earlier_stage(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    check.main(["--dry-run", "--only", "mfu", "--out", str(tmp_path)])
    check.main(["--dry-run", "--only", "pack", "--out", str(tmp_path), "--merge"])
    report = json.loads((tmp_path / "report.json").read_text())["checks"]
    assert sorted(report) == ["mfu", "pack"]


def test_an_absent_bench_script_is_not_available_not_a_failure(tmp_path):
    command = [sys.executable, str(tmp_path / "bench_pack.py"), "--json", str(tmp_path / "p.json")]
    row = check.run_case(command, timeout=10)
    assert row["passed"] is None and row["error"] == "not available: bench_pack.py is absent"


def ladder(best_mfu):
    rungs = [{"rung": "baseline", "mfu": 0.1, "mfu_vs_matmul_peak": 0.12},
             {"rung": "+fused", "mfu": best_mfu, "mfu_vs_matmul_peak": 0.5}]  # fmt: skip
    return {"ladder": {"rungs": rungs, "device_batch": 64, "flash": True, "best": "+fused",
                       "mfu": best_mfu}}  # fmt: skip


def verdict(check_name, data, tmp_path):
    path = tmp_path / "timing.json"
    path.write_text(json.dumps(data))
    row = {"passed": True, "exit_status": 0, "seconds": 1.0, "error": None}
    return check.judge(check_name, ["python", "x.py", "--json", str(path)], row)


def test_mfu_under_40_percent_fails_and_says_by_how_much(tmp_path):
    row = verdict("mfu", ladder(0.31), tmp_path)
    assert row["passed"] is False and row["error"] == "MFU 31.0% < 40% (best rung +fused)"
    assert row["values"]["+fused"] == 0.31 and row["values"]["batch"] == 64


def test_mfu_at_40_percent_passes(tmp_path):
    assert verdict("mfu", ladder(0.40), tmp_path)["passed"] is True


def test_lengen_under_0_9_of_the_plain_loop_fails_whatever_the_compiled_rows_say(tmp_path):
    speeds = {"lengen/rope": 80.0, "lengen-compile/rope": 120.0, "plain/rope": 100.0,
              "lengen/nope": 95.0, "plain/nope": 100.0}  # fmt: skip
    row = verdict("plain", {"train_tokens_per_s": speeds, "train_step_ms": {}}, tmp_path)
    assert row["passed"] is False and row["error"] == "lengen / plain < 0.9 or failed: rope 0.80"
    assert row["values"]["lengen-compile/rope"] == 1.2 and row["values"]["lengen/nope"] == 0.95


def test_a_pack_under_20_times_the_runs_per_hour_fails(tmp_path):
    data = {"runs_per_hour_ratio": 12.5, "runs_per_hour": {"pack": 250, "solo": 20},
            "memory_per_member_mib": {"pack": {"median": 30}}}  # fmt: skip
    row = verdict("pack", data, tmp_path)
    assert row["passed"] is False and row["error"] == "runs per hour, pack / solo = 12.5 < 20"
    assert verdict("pack", {**data, "runs_per_hour_ratio": 25.0}, tmp_path)["passed"] is True


def test_mechanisms_are_recorded_as_ratios_to_rope(tmp_path):
    data = {
        "train_step_ms": {"lengen/rope": 10.0, "lengen/fox": 15.0},
        "eval": [{"pe": "rope", "length": 8192, "seconds": 0.01, "peak_mem_mb": 48.0},
                 {"pe": "fox", "length": 8192, "seconds": 0.02, "peak_mem_mb": 96.0}],
    }  # fmt: skip
    row = verdict("mechanisms", data, tmp_path)
    assert row["passed"] is True
    assert (
        row["values"]["fox"]["step_vs_rope"] == 1.5
        and row["values"]["fox"]["eval_mib_vs_rope"] == 2.0
    )


def test_a_timing_whose_json_is_not_as_expected_fails(tmp_path):
    row = verdict("mfu", {"something": "else"}, tmp_path)
    assert row["passed"] is False and row["error"].startswith("timing.json: not as expected")


def test_the_profile_is_recorded_with_lengens_costliest_functions(tmp_path):
    top = [{"function": f"f{i}", "ms_per_step": 1.0, "calls_per_step": 1.0} for i in range(8)]
    side = {"host_ms": 9.0, "kernels": 300.0, "device_ms": 4.0, "top": top}
    row = verdict("profile", {"lengen": side, "plain": {**side, "host_ms": 5.0}}, tmp_path)
    assert row["passed"] is True and row["values"]["plain"]["host_ms"] == 5.0
    assert row["values"]["lengen"]["top"] == [f"1.0 ms f{i}" for i in range(6)]
