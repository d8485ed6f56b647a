"""Fake sweep folders for the aggregation and plot tests: run directories with config.yaml and
results.json following the schema (DESIGN.md), written directly; no training."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

BASE_CONFIG = {
    "seed": 0,
    "resume": False,
    "init_from": None,
    "optim": {"lr": 0.001, "weight_decay": 0.1, "warmup_steps": 100, "betas": [0.9, 0.98]},
    "pe": {"_target_": "lengen.pe.alibi.ALiBi", "_partial_": True, "name": "alibi"},
    "model": {"_target_": "lengen.model.DecoderOnly", "name": "decoder", "d_model": 128},
    "data": {"_target_": "lengen.data.datamodule.TaskData", "name": "copy", "len": 4},
    "trainer": {"name": "default", "max_steps": 100, "enable_progress_bar": False},
    "logger": {"_target_": "lengen.loggers.csv", "name": "csv"},
    "eval": {"name": "default", "lengths": None, "factors": [1, 2], "samples": 64, "seed": 1234},
}


def write_run(
    folder: Path,
    name: str,
    *,
    pe: str = "alibi",
    seed: int = 0,
    accuracy: dict[int, float] | None = None,
    ppl: dict[int, float] | None = None,
    overrides: dict | None = None,
    finished: bool = True,
    results_file: str = "results.json",
    extra: dict | None = None,
    row_fields: dict[int, dict] | None = None,
) -> Path:
    """A run directory: config.yaml always, results.json when ``finished``.

    ``accuracy``: {length: per-token accuracy}; ``ppl`` instead gives language-modelling rows
    (accuracy and exact match null). ``overrides``: {"model.d_model": 64, …} on the config.
    ``extra``: top-level results keys (``criterion``, …); ``row_fields``: {length: {field:
    value}} added to that length's row (``baseline_accuracy``, ``accuracy_draw_std``, …)."""
    config = copy.deepcopy(BASE_CONFIG)
    config["seed"] = seed
    config["pe"]["name"] = pe
    config["pe"]["_target_"] = f"lengen.pe.{pe}.X"
    for dotted, value in (overrides or {}).items():
        node = config
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    run_dir = folder / name
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    if not finished:
        return run_dir
    train_len = config["data"]["len"]
    values = accuracy if accuracy is not None else ppl
    rows = [
        {
            "length": length,
            "in_distribution": length <= train_len,
            "max_position": 2 * length + 1,
            "protocol": "teacher_forced",
            "n_examples": 64,
            "loss": 0.1,
            "accuracy": value if accuracy is not None else None,
            "exact_match": value / 2 if accuracy is not None else None,
            "ppl": value if ppl is not None else None,
            "chance_accuracy": 0.0625 if accuracy is not None else None,
            **(row_fields or {}).get(length, {}),
        }
        for length, value in sorted(values.items())
    ]
    results = {
        "pe": pe,
        "model": config["model"]["name"],
        "task": config["data"]["name"],
        "train_len": train_len,
        "seed": seed,
        "n_params": 1000,
        "train_tokens": 5000,
        "provenance": {"git_commit": "test", "torch": "2.13.0", "device": "cpu", "command": ""},
        "eval": rows,
        **(extra or {}),
    }
    (run_dir / results_file).write_text(json.dumps(results, indent=2))
    return run_dir


def make_sweep(folder: Path) -> Path:
    """2 PEs × 2 seeds × 2 lengths (train_len 4; lengths 4 and 8), plus:

    * ``rope_seed2``: RoPE did not learn (accuracy 0.6 at the training length);
    * ``alibi_seed2_failed``: config.yaml without results.json;
    * ``alibi_d64_seed0``: model.d_model=64, its own configuration (n=1);
    * ``alibi_seed1`` logs with wandb: the logger must not split its group;
    * ``alibi_seed0/.hydra/config.yaml``: Hydra's copy, not a run.

    Accuracy at length 8: alibi 0.5, 0.7 (mean 0.6); rope 0.2, 0.3, 0.1 (mean 0.2)."""
    alibi = write_run(folder, "alibi_seed0", pe="alibi", seed=0, accuracy={4: 0.95, 8: 0.5})
    (alibi / ".hydra").mkdir()  # Hydra's own copy: not a run directory
    (alibi / ".hydra" / "config.yaml").write_text((alibi / "config.yaml").read_text())
    write_run(
        folder,
        "alibi_seed1",
        pe="alibi",
        seed=1,
        accuracy={4: 0.99, 8: 0.7},
        overrides={"logger": {"_target_": "lengen.loggers.wandb", "name": "wandb"}},
    )
    write_run(folder, "rope_seed0", pe="rope", seed=0, accuracy={4: 0.98, 8: 0.2})
    write_run(folder, "rope_seed1", pe="rope", seed=1, accuracy={4: 0.97, 8: 0.3})
    write_run(folder, "rope_seed2", pe="rope", seed=2, accuracy={4: 0.6, 8: 0.1})
    write_run(folder, "alibi_seed2_failed", pe="alibi", seed=2, finished=False)
    write_run(
        folder,
        "alibi_d64_seed0",
        pe="alibi",
        seed=0,
        accuracy={4: 0.99, 8: 0.9},
        overrides={"model.d_model": 64},
    )
    return folder


def read_only(folder: Path, command: list[str]) -> list[str]:
    """``command`` seeing ``folder`` read-only, its files still readable: as root a read-only
    bind mount in a mount namespace of its own; otherwise the write permission removed."""
    if os.geteuid() != 0:
        for path in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
            path.chmod(0o555)
        return command
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode
    ):
        pytest.skip("root without mount namespaces: no way to make a read-only folder")
    mount = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    return ["unshare", "-m", "sh", "-c", mount, str(folder), *command]
