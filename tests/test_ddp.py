"""Two CPU processes (DDP over gloo) train one run: one complete run directory, the same data
and results as one device. Starting the second process costs ~10 s, so this is one run."""

from __future__ import annotations

import json
import subprocess

import pytest

from helpers import CONFIG_DIR, compose_train, run_train
from lengen.train import run

ROOT = CONFIG_DIR.parent
# no attention statistics: rank 0 evaluates alone (lengen.train.run), and their figures would
# be most of each run's time
SETTINGS = [
    "debug=fast",
    "data.len=4",
    "eval.factors=[1,2]",
    "logger=csv",
    "eval.diagnostics=false",
]


def train(*arguments: str) -> subprocess.CompletedProcess:
    return run_train(*arguments, timeout=400, one_thread=True)


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("ddp") / "run"
    result = train("trainer=ddp", "trainer.accelerator=cpu", *SETTINGS, f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def test_ddp_writes_one_complete_run_directory(ddp_run):
    results = json.loads((ddp_run / "results.json").read_text())
    assert results["world_size"] == 2
    assert [row["length"] for row in results["eval"]] == [4, 8]
    assert sorted(p.name for p in (ddp_run / "checkpoints").iterdir()) == ["last.ckpt"]
    assert len(list(ddp_run.rglob("results*.json"))) == 1
    assert len(list(ddp_run.rglob("config.yaml"))) == 1  # ours: Hydra writes no .hydra/ copy
    assert not (ddp_run / "failed.json").exists()


def test_ddp_matches_one_device(ddp_run, tmp_path):
    """data.batch_size is the global batch: the two ranks share it, so training sees the
    same data as one device and ends at the same numbers (up to the order of float sums)."""
    import torch

    torch.set_num_threads(1)
    single = run(compose_train(*SETTINGS, "trainer=cpu", "logger=none"), run_dir=tmp_path)
    ddp = json.loads((ddp_run / "results.json").read_text())
    assert set(ddp) == set(single) and ddp["provenance"].keys() == single["provenance"].keys()
    assert ddp["train_tokens"] == single["train_tokens"]
    for mine, theirs in zip(ddp["eval"], single["eval"], strict=True):
        assert mine.keys() == theirs.keys()
        assert mine["loss"] == pytest.approx(theirs["loss"], abs=1e-4)
        assert mine["accuracy"] == pytest.approx(theirs["accuracy"], abs=1e-6)
    assert ddp["validation"]["val/loss"] == pytest.approx(
        single["validation"]["val/loss"], abs=1e-4
    )


def test_local_ddp_inside_a_sweep_is_refused(tmp_path):
    result = train("-m", "trainer=ddp", "seed=0,1", *SETTINGS, f"hydra.sweep.dir={tmp_path}")
    assert result.returncode == 2
    first = result.stderr.strip().splitlines()[0]
    assert first.startswith("error: trainer.devices=2") and "hydra/launcher=slurm" in first
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("results.json"))
