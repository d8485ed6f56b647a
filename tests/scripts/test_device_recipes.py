"""scripts/device_recipes.sh (the recipe runs of a lent GPU) and scripts/device_unpack.sh, on the
CPU, with stand-in recipes (shell scripts that write run folders as lengen's do, in a second and
without torch): the caps, the counts, the tarball and its unpacking. The real recipes' commands
are checked through their own dry runs."""

from __future__ import annotations

import os
import subprocess
import tarfile

import pytest

from helpers import ROOT

# a finished run: what train.py leaves (results.json last), figures and a checkpoint included
FINISHED = """mkdir -p "$1/sweep/$2/checkpoints"
touch "$1/sweep/$2/.lock" "$1/sweep/$2/extrapolation.png" "$1/sweep/$2/extrapolation.pdf"
echo seed: 0 >"$1/sweep/$2/config.yaml"; echo log >"$1/sweep/$2/train.log"
echo ckpt >"$1/sweep/$2/checkpoints/last.ckpt"; echo '{"eval": []}' >"$1/sweep/$2/results.json"
"""
QUICK = f"""#!/usr/bin/env bash
run() {{
{FINISHED}}}
run "$1" quick_seed0
echo "DRY=${{DRY-unset}} args: $*"
"""
# one run finished, the next one training when the cap's SIGTERM comes: it saves its checkpoint
# and the recipe exits 143, as train.py does
SLOW = f"""#!/usr/bin/env bash
run() {{
{FINISHED}}}
run "$1" slow_seed0
mkdir -p "$1/sweep/slow_seed1"; touch "$1/sweep/slow_seed1/.lock"
echo seed: 1 >"$1/sweep/slow_seed1/config.yaml"
trap 'mkdir -p "$1/sweep/slow_seed1/checkpoints"; touch "$1/sweep/slow_seed1/checkpoints/last.ckpt"; exit 143' TERM
sleep 60 & wait
"""


def python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if os.access(venv, os.X_OK) else "python3"


def recipes(tmp_path, lines: str, limit: int = 60, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "quick.sh").write_text(QUICK)
    (tmp_path / "slow.sh").write_text(SLOW)
    (tmp_path / "list.txt").write_text(lines.format(dir=tmp_path))
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
           "PYTHON": python(), "RECIPE_LIST": str(tmp_path / "list.txt"), "LIMIT": str(limit),
           "DRY": "0"}  # fmt: skip
    return subprocess.run(["bash", str(ROOT / "scripts" / "device_recipes.sh"), *args],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip


TWO = "quick - {dir}/quick.sh\nslow 2 {dir}/slow.sh SLOW=1\n"


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("recipes")
    done = recipes(tmp_path, TWO, 60, "--dry-run")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return tmp_path, done


def test_the_tarball_holds_the_run_folders_without_checkpoints_or_figures(two):
    tmp_path, _ = two
    with tarfile.open(tmp_path / "out" / "recipes.tar.gz") as tar:
        names = tar.getnames()
    assert "runs/quick/sweep/quick_seed0/results.json" in names
    assert "runs/slow/sweep/slow_seed1/config.yaml" in names and "logs/slow.log" in names
    assert not [n for n in names if n.endswith((".png", ".pdf", ".ckpt")) or "checkpoints" in n]


def test_a_recipe_stopped_at_its_cap_is_reported_with_its_finished_runs(two):
    tmp_path, _ = two
    lines = (tmp_path / "out" / "recipes.txt").read_text().splitlines()
    slow = next(line for line in lines if line.startswith("slow:"))
    assert "stopped at its cap (exit 124)" in slow
    assert slow.endswith("runs: 1 finished, 1 interrupted, 0 failed")
    quick = next(line for line in lines if line.startswith("quick:"))
    assert "exit 0" in quick and quick.endswith("runs: 1 finished, 0 interrupted, 0 failed")


def test_the_recipes_run_with_device_runs_dry_flag_cleared_and_the_overrides_last(two):
    tmp_path, _ = two
    log = (tmp_path / "work" / "device_recipes" / "logs" / "quick.log").read_text()
    assert "DRY=unset" in log  # device_run.sh's DRY=0 would make a recipe print only
    assert "trainer.accelerator=cpu hydra.sweeper.pack=3" in log


def test_only_two_files_are_added_to_out(two):
    tmp_path, _ = two  # device_run.sh writes four: six of the eight files that come back
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["recipes.tar.gz", "recipes.txt"]


def test_recipes_are_skipped_when_the_time_is_spent(tmp_path):
    done = recipes(tmp_path, TWO, 20, "--dry-run")  # 20 s: less than the grace and the tail
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "recipes.txt").read_text()
    assert "quick: skipped: no time left" in text and "slow: skipped: no time left" in text
    assert not (tmp_path / "work" / "device_recipes" / "runs" / "quick").exists()


def test_a_malformed_recipe_line_is_refused_in_one_line(tmp_path):
    done = recipes(tmp_path, "quick soon {dir}/quick.sh\n")
    assert done.returncode == 2 and not (tmp_path / "out").exists()
    assert done.stderr.count("\n") == 1 and "recipe list: 'quick soon" in done.stderr


def test_device_run_skips_the_recipe_stage_when_its_budget_is_spent(tmp_path):
    env = {**os.environ, "OUT": str(tmp_path / "out"), "WORK": str(tmp_path / "work"),
           "PYTHON": python(), "BUDGET": "5", "RECIPES": "1"}  # fmt: skip
    done = subprocess.run(["bash", str(ROOT / "scripts" / "device_run.sh"), "--dry-run"],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert "stage recipes: skipped" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    assert len(list((tmp_path / "out").iterdir())) <= 8


def test_the_real_recipes_print_their_commands_with_the_gpu_overrides(tmp_path):
    env = {**os.environ, "WORK": str(tmp_path), "PYTHON": python()}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "device_recipes.sh"), "--commands"],
                          capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    commands = [line for line in done.stdout.splitlines() if line.startswith("+ python train.py")]
    assert len(commands) == 3 + 2 + 3  # depths 1, 2, 4; rates 1e-3, 3e-3; A5's three arms
    for line in commands:
        assert "hydra/launcher=local" in line and "resume=auto" in line and "seed=0,1,2" in line
        assert line.endswith("trainer.accelerator=gpu hydra.sweeper.pack=3 hydra.launcher.n_jobs=4")
    assert done.stdout.count("runs") >= 3  # each script's estimate line


def test_unpacking_puts_the_finished_runs_beside_the_cpu_runs_and_keeps_existing_ones(two):
    tmp_path, _ = two
    dest = tmp_path / "multiruns"
    (dest / "quick" / "sweep" / "quick_seed0").mkdir(parents=True)
    (dest / "quick" / "sweep" / "quick_seed0" / "results.json").write_text("{}")  # a CPU run
    env = {**os.environ, "MULTIRUNS": str(dest), "SUMMARIZE": "echo summarize"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "device_unpack.sh"),
                           str(tmp_path / "out" / "recipes.tar.gz")],
                          capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (dest / "quick" / "sweep" / "quick_seed0" / "results.json").read_text() == "{}"
    assert (dest / "slow" / "sweep" / "slow_seed0" / "results.json").is_file()
    assert not (dest / "slow" / "sweep" / "slow_seed1").exists()  # interrupted: not unpacked
    assert "summarize " + str(dest / "slow" / "sweep") in done.stdout
