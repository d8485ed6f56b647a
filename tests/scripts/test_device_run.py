"""scripts/device_run.sh (the one command of a GPU lease) and scripts/bench_precision.py, on the
CPU: the dry run goes through every stage and leaves the files the lease brings back."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import torch

from helpers import ROOT, load_script

precision = load_script("bench_precision")


@pytest.fixture
def no_bf16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: dict.fromkeys(precision.BF16_FLAGS, False))


def tiny(tmp_path, *extra) -> dict:
    out = tmp_path / "precision.json"
    precision.main(["--tiny", "--steps", "10", "--threads", "1", *extra, "--json", str(out)])
    return json.loads(out.read_text())


@pytest.mark.usefixtures("no_bf16")
def test_without_bf16_instructions_only_fp32_trains_and_the_json_says_why(tmp_path):
    result = tiny(tmp_path)
    assert result["train"]["bf16-mixed"] == [] and len(result["train"]["32-true"]) == 1
    assert result["skipped"].startswith("bf16-mixed: no amx_bf16 or avx512_bf16")
    assert "bf16_speedup" not in result


@pytest.mark.usefixtures("no_bf16")
def test_forced_bf16_trains_the_same_batches_to_a_close_loss(tmp_path):
    result = tiny(tmp_path, "--force")
    fp32, bf16 = result["train"]["32-true"][0], result["train"]["bf16-mixed"][0]
    assert len(fp32["losses"]) == len(bf16["losses"]) == 13  # 3 warm-up + 10 timed steps
    assert fp32["losses"] != bf16["losses"]  # bf16 autocast did run
    torch.testing.assert_close(bf16["final_loss"], fp32["final_loss"], atol=0.05, rtol=0)
    assert result["bf16_speedup"] > 0


def test_fewer_steps_than_the_loss_window_are_refused():
    with pytest.raises(SystemExit, match="--steps must be >= 10"):
        precision.main(["--steps", "5"])


@pytest.mark.slow
def test_a_width_not_a_multiple_of_32_is_refused():
    with pytest.raises(SystemExit, match="--d-model must be a multiple of 32"):
        precision.main(["--d-model", "100"])


def test_the_width_option_sizes_the_model_it_records(tmp_path, monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: dict.fromkeys(precision.BF16_FLAGS, False))
    out = tmp_path / "precision.json"
    precision.main(["--d-model", "64", "--steps", "10", "--warmup", "0", "--threads", "1",
                    "--json", str(out)])  # fmt: skip
    sizes = json.loads(out.read_text())["sizes"]
    assert (sizes["d_model"], sizes["d_ff"], sizes["n_heads"]) == (64, 256, 2)


def test_the_dry_run_goes_through_every_stage_and_brings_back_few_files(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
           "PYTHON": str(ROOT / ".venv" / "bin" / "python")}  # fmt: skip
    if not os.access(env["PYTHON"], os.X_OK):
        env["PYTHON"] = "python3"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "device_run.sh"), "--dry-run"],
                          capture_output=True, text=True, timeout=900, env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = tmp_path / "out"
    files = sorted(p.name for p in out.iterdir())
    assert files == ["device_run.tar.gz", "report.json", "report.md", "summary.txt"]
    checks = json.loads((out / "report.json").read_text())["checks"]
    assert set(checks) == {"plain", "profile", "mfu", "pack", "mechanisms", "cpu_precision",
                           "bf16", "flash", "flex", "greedy", "ddp"}  # fmt: skip
    for stage in ("env", "plain", "mfu", "cpu", "pack", "mechanisms", "functional"):
        assert f"stage {stage}: exit 0" in done.stdout
    assert done.stdout.rstrip().endswith("|")  # the report's table is printed last


def test_the_step_profile_reports_host_time_and_the_costliest_functions(tmp_path, monkeypatch):
    profile = load_script("profile_step")
    tiny_sizes = dict(vocab=32, d_model=16, n_layers=1, n_heads=2, d_ff=32, seq=8, batch=2)
    monkeypatch.setattr(profile.bench, "SIZES", tiny_sizes)
    result = profile.main(["--warmup", "1", "--steps", "2", "--json", str(tmp_path / "p.json")])
    for impl in ("lengen", "plain"):
        assert result[impl]["host_ms"] > 0 and len(result[impl]["top"]) == profile.TOP
        assert result[impl]["top"][0]["ms_per_step"] >= result[impl]["top"][-1]["ms_per_step"]
    assert "kernels" not in result["lengen"]  # no CUDA here: host time only
