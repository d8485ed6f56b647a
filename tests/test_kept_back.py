"""Kept-back cases of issue #51's classes (docs/trials/kept-back-2026-12-02.md): each test is a
case the hostile trial of 2026-11-28 did not hold, for a class it did."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import zipfile

import pytest
from omegaconf import OmegaConf

from helpers import ROOT, compose_train, load_script
from lengen import preflight
from lengen.aggregate.load import load_runs
from lengen.checks import ConfigError
from lengen.preflight.launch import RANK_VARIABLES
from lengen.preflight.resources import check_memory, check_model_memory
from lengen.rundir.saved_config import load_config
from sweep_fixture import write_run

#: every variable a launcher sets that says how many processes a job has or which one this is
LAUNCH_VARIABLES = (*RANK_VARIABLES, *preflight.NODE_VARIABLES, "SLURM_JOB_NAME", "SLURM_JOB_ID")


@pytest.fixture
def launch_env(monkeypatch):
    """A clean launch environment, then the variables a case sets."""
    for name in LAUNCH_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def set_variables(**variables: str) -> None:
        for name, value in variables.items():
            monkeypatch.setenv(name, value)

    return set_variables


def one_process_run():
    return compose_train("debug=fast", "trainer.accelerator=cpu")


def test_kb45_a_stray_local_rank_on_a_one_process_run_is_refused(launch_env):
    # before: the run trained as rank 1, wrote results.json but no config.yaml, exit 0
    launch_env(LOCAL_RANK="1")
    with pytest.raises(ConfigError, match=r"^LOCAL_RANK=1 in the environment .* unset LOCAL_RANK"):
        preflight.check_launch(one_process_run(), sweeping=False, cluster=False)


def test_kb47_torchrun_two_processes_of_a_one_process_run_are_refused(launch_env):
    # before: each of torchrun's processes trained the run alone into one directory
    launch_env(WORLD_SIZE="2", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    with pytest.raises(ConfigError, match=r"^WORLD_SIZE=2 in the environment, but trainer"):
        preflight.check_launch(one_process_run(), sweeping=False, cluster=False)


def test_kb46_an_sbatch_script_of_four_tasks_running_one_process_is_refused(launch_env):
    # before: Lightning's RuntimeError ('--ntasks=4 … not supported') after the run dir
    launch_env(SLURM_JOB_ID="7", SLURM_NTASKS="4", SLURM_PROCID="0", SLURM_NODEID="0")
    with pytest.raises(ConfigError, match=r"^SLURM_NTASKS=4 in the environment, but trainer"):
        preflight.check_launch(one_process_run(), sweeping=False, cluster=False)


def test_a_one_process_job_of_a_launcher_still_runs(launch_env):
    # torchrun --nproc_per_node=1, or srun of one task: rank 0 of one
    launch_env(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", SLURM_NTASKS="1", SLURM_PROCID="0")
    preflight.check_launch(one_process_run(), sweeping=False, cluster=False)


def test_kb65_an_mplbackend_matplotlib_does_not_know_is_not_fatal():
    # before: every train.py run ended at matplotlib's import (Lightning imports it) with a
    # ValueError traceback, after its run directory was written
    entry = "from lengen.caches import use_lengen_caches; use_lengen_caches(); import matplotlib"
    done = subprocess.run(
        [sys.executable, "-c", entry],
        env={**os.environ, "MPLBACKEND": "no_such_backend"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture
def sixteen_gib(monkeypatch):
    """A machine with 16 GiB available, whatever this one has."""
    monkeypatch.setattr(
        "lengen.preflight.resources.available_memory", lambda cfg: (16 * 2**30, "CPU")
    )


def test_kb20_activations_sized_by_the_mlp_are_refused_naming_model_d_ff(sixteen_gib):
    # before: 'data.len=16: a training step needs at least 38,147.0 GiB of activations'
    cfg = compose_train("debug=fast", "model.d_ff=20000000000")
    with pytest.raises(ConfigError, match=r"^model\.d_ff=20000000000: a training step needs"):
        check_memory(cfg)


def test_kb24_activations_sized_by_the_loops_are_refused_naming_model_loops(sixteen_gib):
    # before: 'data.len=16: training this model needs about 75,388.0 GiB … sized by data.len'
    cfg = compose_train("debug=fast", "model.loops=10000000")
    with pytest.raises(ConfigError, match=r"^model\.loops=10000000: training .* by model\.loops"):
        check_model_memory(cfg)


def test_kb21_an_encodings_activations_sized_by_the_width_name_model_d_model(sixteen_gib):
    # LieRE's rotations are head_dim² per position: a 16384-wide head, not data.len=16
    cfg = compose_train("debug=fast", "pe=liere", "model.d_model=16384", "model.n_heads=1")
    with pytest.raises(ConfigError, match=r"^model\.d_model=16384: training .* by model\.d_model"):
        check_model_memory(cfg)


def test_a_long_training_length_is_still_refused_naming_data_len(sixteen_gib):
    cfg = compose_train("debug=fast", "data.len=100000")
    with pytest.raises(ConfigError, match=r"^data\.len=100000: training .* by data\.len"):
        check_model_memory(cfg)


def base_run(folder, *overrides: str):
    """A finished run's folder as init_from reads it: config.yaml and a checkpoint (a zip)."""
    OmegaConf.save(compose_train("debug=fast", *overrides), folder / "config.yaml")
    (folder / "checkpoints").mkdir()
    with zipfile.ZipFile(folder / "checkpoints" / "last.ckpt", "w") as archive:
        archive.writestr("archive/data.pkl", b"")
    return folder


def test_kb79_init_from_a_run_of_another_width_is_refused_before_torch(tmp_path):
    # before: refused by the checkpoint's load after ~15 s, in torch's 'size mismatch' words
    base = base_run(tmp_path)
    cfg = compose_train("debug=fast", f"init_from={base}", "model.d_model=64", "model.d_ff=128")
    with pytest.raises(ConfigError, match=r"^init_from=.*model\.d_model=128, this config model"):
        preflight.validate(cfg)


def test_init_from_a_run_of_another_encoding_passes_the_pre_check(tmp_path):
    # DroPE's route: the base run's RoPE dropped, the model's shape kept
    base = base_run(tmp_path)
    preflight.validate(compose_train("debug=fast", f"init_from={base}", "pe=nope"))


def damaged_run(folder, change):
    """A run of two rows (lengths 4 and 8) whose results.json ``change`` edits."""
    run_dir = write_run(folder, "r", accuracy={4: 1.0, 8: 0.5})
    path = run_dir / "results.json"
    results = json.loads(path.read_text())
    change(results)
    path.write_text(json.dumps(results))
    (run,) = load_runs(folder, None, 0.9)
    return run


@pytest.mark.parametrize(("key", "value"), [("length", -8), ("n_examples", -5)])
def test_kb89_a_count_under_one_fails_the_run_naming_it(tmp_path, key, value):
    # before: aggregated as a row like any other
    run = damaged_run(tmp_path, lambda results: results["eval"][1].update({key: value}))
    assert (run.status, run.reason) == ("failed", f"results.json: eval[1].{key}={value} is under 1")


def test_kb91_a_repeated_row_fails_the_run_naming_both(tmp_path):
    # before: the copy was counted as a second measurement of the same length
    run = damaged_run(tmp_path, lambda results: results["eval"].append(dict(results["eval"][0])))
    assert run.status == "failed" and "eval[2] repeats eval[0]" in run.reason


def test_kb107_aggregate_to_a_full_stdout_still_exits_0_with_its_tables(tmp_path):
    # before: OSError [Errno 28] traceback from its report's print, exit 1
    write_run(tmp_path / "sweep", "r", accuracy={4: 1.0, 8: 0.5})
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "aggregate.py"), str(tmp_path / "sweep"),
             "--out", str(tmp_path / "out")],
            stdout=full, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "summary.md").is_file()


def test_kb130_a_pack_refused_for_a_finished_member_counts_it_refused(tmp_path):
    # before: 'sweep: 2 runs (1 finished earlier, 1 refused)', the refused member named wrongly
    sweep = tmp_path / "sweep"
    finished = write_run(sweep, "s0", accuracy={8: 1.0})  # seed 0's folder, finished before
    assert finished == sweep / "s0"
    command = [sys.executable, str(ROOT / "train.py"), "-m", "debug=fast", "eval.lengths=[8]",
               "seed=0,1", "hydra.sweeper.pack=2", "hydra.sweep.subdir=s${seed}",
               f"hydra.sweep.dir={sweep}"]  # fmt: skip
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert done.returncode == 1
    assert "sweep: 2 runs (2 refused)" in done.stdout, done.stdout


def test_kb106_eval_py_given_hydra_run_dir_names_what_it_writes_into(tmp_path):
    # before: "hydra.run.dir: cannot apply … (Key 'hydra' is not in struct)", OmegaConf's words
    OmegaConf.save(compose_train("debug=fast"), tmp_path / "config.yaml")
    with pytest.raises(ConfigError, match=r"^hydra\.run\.dir: the run's config has no hydra \("):
        load_config(tmp_path, ["hydra.run.dir=/elsewhere"])


def test_kb143_plot_pe_analysis_on_a_disk_that_fills_up_is_one_line_and_exit_4(
    tmp_path, monkeypatch, capsys
):
    # before: the OSError [Errno 28] traceback of atomic_write, exit 1 (the sweep figures and
    # plot.py runs said it in one line with exit 4 already)
    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("lengen.atomic.atomic_write", full)
    status = load_script("plot").main(["pe-analysis", "--pe", "rope", "--out", str(tmp_path)])
    assert status == 4
    assert capsys.readouterr().err.startswith(f"error: writing into {tmp_path} failed (No space")


def test_kb153_a_pack_whose_one_member_cannot_fit_names_the_members_key(sixteen_gib):
    # before: 'hydra.sweeper.pack: a pack of 2 runs needs about 130.6 GiB …; allowed: a smaller
    # hydra.sweeper.pack', though one member alone (65 GiB) fits in no pack size
    from lengen.preflight.packs import check_pack_memory

    cfg = compose_train("debug=fast", "trainer.accelerator=cpu", "model.d_model=16384")
    with pytest.raises(ConfigError, match=r"^model\.d_model=16384: training this model needs"):
        check_pack_memory(cfg, 2)
