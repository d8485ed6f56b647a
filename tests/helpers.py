"""Compose the real configs the way train.py does, without Hydra's runtime."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def compose_train(*overrides: str, fast: bool = True) -> DictConfig:
    """configs/train.yaml with overrides (and debug=fast unless fast=False)."""
    extra = ["debug=fast"] if fast else []
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=[*extra, *overrides])


def yaml_choices(group: str) -> list[str]:
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def pe_supports(pe: str, model: str) -> bool:
    """Causal-only encodings (xPos, …) cannot serve a model with a bidirectional stack."""
    from hydra.utils import get_class

    causal_only = get_class(compose_train(f"pe={pe}").pe._target_).causal_only
    return model == "decoder" or not causal_only


def run_train(
    *arguments: str, cwd: Path | None = None, timeout: int = 300, one_thread: bool = False
) -> subprocess.CompletedProcess:
    """``python train.py arguments…`` as a user runs it, output captured."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"} if one_thread else os.environ.copy()
    return subprocess.run(
        [sys.executable, str(CONFIG_DIR.parent / "train.py"), *arguments],
        cwd=cwd or CONFIG_DIR.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
