"""Where a result came from: the code's commit, the library versions, the machine and the
command, recorded in every results.json under ``provenance`` (see DESIGN.md)."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path


def git_commit() -> str:
    """HEAD of the lengen checkout (with ``-dirty`` for uncommitted changes), or 'unknown'."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what the platform module knows.

    Runs are bit-exact per CPU type, not across types: vectorised kernels differ (AVX2 vs
    AVX-512, Intel vs AMD), so numbers of a model between regimes can move in the second
    decimal (README, "Reproducibility across machines")."""
    try:
        with open("/proc/cpuinfo") as file:
            for line in file:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


#: the CPU instructions that make bf16 autocast pay on a CPU (docs/benchmarks.md, "bf16 on the CPU")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_bf16() -> list[str]:
    """Which of ``BF16_FLAGS`` this CPU has (Linux: /proc/cpuinfo; elsewhere none known).

    Recorded beside the run's precision (``trainer.precision`` in its config): a CPU run is
    fp32 whatever the CPU: on an AMX Xeon, which has them, default-size training under bf16
    autocast measured 0.77x fp32's speed (docs/benchmarks.md, "bf16 on the CPU")."""
    try:
        with open("/proc/cpuinfo") as file:
            words = set(file.read().split())
    except OSError:
        return []
    return [flag for flag in BF16_FLAGS if flag in words]


def provenance(device: str) -> dict:
    """The ``provenance`` record of a result computed in this process on ``device``."""
    import torch

    from lengen import __version__

    return {
        "git_commit": git_commit(),
        "lengen": __version__,
        "torch": torch.__version__.split("+")[0],
        "python": platform.python_version(),
        "device": device,
        "cpu": cpu_model(),
        "cpu_bf16": cpu_bf16(),
        "threads": torch.get_num_threads(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "overrides": hydra_overrides(),
    }


def hydra_overrides() -> list[str] | None:
    """This job's own overrides under Hydra (one job of a sweep, not the sweep's command)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else None
