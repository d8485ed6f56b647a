"""Where a result came from: commit, versions, machine and command, as results.json records."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lengen.provenance import cpu_model, git_commit, hydra_overrides, provenance

ROOT = Path(__file__).resolve().parents[1]


def test_provenance_records_the_cpu_model_and_threads():
    # runs are exact per CPU type only: a result must say which CPU and how many threads
    import torch

    record = provenance("cpu")
    assert record["cpu"] == cpu_model() != ""
    assert record["threads"] == torch.get_num_threads()


def test_provenance_says_which_bf16_instructions_the_cpu_has(monkeypatch, tmp_path):
    import builtins

    import lengen.provenance

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu avx2 avx512f avx512_bf16 amx_tile\n")
    real_open = builtins.open
    monkeypatch.setattr(
        builtins,
        "open",
        lambda path, *a, **k: real_open(cpuinfo if path == "/proc/cpuinfo" else path, *a, **k),
    )
    assert lengen.provenance.cpu_bf16() == ["avx512_bf16"]
    assert provenance("cpu")["cpu_bf16"] == ["avx512_bf16"]


def test_cpu_model_is_the_cpuinfo_model_name():
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        pytest.skip("no /proc/cpuinfo on this system")
    names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
             if line.startswith("model name")]  # fmt: skip
    assert cpu_model() == names[0]


def test_git_commit_is_the_checkouts_head():
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    if not head:
        pytest.skip("not a git checkout")
    assert git_commit().removesuffix("-dirty") == head


def test_outside_hydra_there_are_no_overrides():
    assert hydra_overrides() is None
