"""lengen.preflight.launchers: a -m sweep whose launcher, sweeper or records folder cannot work
is refused by the pre-check, one line naming the key, before the sweep folder is written
(issue #51 item 5: SN17, SL04, SN14, SN08; SN19's message)."""

from __future__ import annotations

import pytest

from helpers import run_train
from lengen import preflight
from lengen.config import CONFIG_DIR
from lengen.errors import ConfigError
from lengen.preflight import launchers

SWEEP = ["-m", "debug=fast", "seed=0,1"]


def refusal(*arguments: str) -> str:
    with pytest.raises(ConfigError) as refused:
        preflight.precheck([*SWEEP, *arguments])
    return str(refused.value)


def test_joblib_with_no_jobs_at_once_is_refused(tmp_path):
    message = refusal(
        "hydra/launcher=local", "hydra.launcher.n_jobs=0", f"hydra.sweep.dir={tmp_path}/s"
    )
    assert message.startswith("hydra.launcher.n_jobs=0: how many runs at once; allowed: a ")


def test_joblib_with_a_negative_count_passes_the_launch_check():
    overrides = ["hydra/launcher=local", "hydra.launcher.n_jobs=-2"]
    launchers.check_launcher(launchers.hydra_config(overrides, [CONFIG_DIR], "train").launcher)


def test_a_slurm_launcher_without_slurm_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(launchers.shutil, "which", lambda name: None)
    message = refusal("hydra/launcher=slurm", f"hydra.sweep.dir={tmp_path}/s")
    assert message.startswith("hydra/launcher=slurm: no SLURM here (srun is not on PATH)")


def test_a_slurm_launcher_with_srun_on_path_passes_the_launch_check(monkeypatch):
    monkeypatch.setattr(launchers.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(launchers, "slurm_controller_refusal", lambda: None)  # one answers
    hydra = launchers.hydra_config(["hydra/launcher=slurm"], [CONFIG_DIR], "train")
    launchers.check_launcher(hydra.launcher)


@pytest.mark.parametrize("name", [".jobs", ".jobs.lock", "multirun.yaml"])
def test_a_sweep_path_of_the_wrong_kind_is_refused(tmp_path, name):
    sweep = tmp_path / "s"
    sweep.mkdir()
    if name == ".jobs":
        (sweep / name).write_text("")
    else:
        (sweep / name).mkdir()
    message = refusal(f"hydra.sweep.dir={sweep}")
    assert message.startswith(f"hydra.sweep.dir={sweep}: {sweep / name} is in the way")


def test_a_sweeper_batch_size_below_one_is_refused(tmp_path):
    message = refusal("hydra.sweeper.max_batch_size=-1", f"hydra.sweep.dir={tmp_path}/s")
    assert message.startswith("hydra.sweeper.max_batch_size=-1: how many jobs are launched per")


def test_a_hydra_value_of_the_wrong_type_says_why(tmp_path):
    message = refusal(
        "hydra/launcher=local", "hydra.launcher.n_jobs=abc", f"hydra.sweep.dir={tmp_path}/s"
    )
    assert message == (
        "hydra.launcher.n_jobs=abc: Value 'abc' of type 'str' could not be converted to "
        "Integer; allowed: an integer"
    )


def test_the_records_folder_is_the_sweep_reports():
    from lengen.cli import SweepReport

    assert launchers.SWEEP_RECORDS == SweepReport.RECORDS


def test_a_refused_launch_writes_nothing(tmp_path):
    done = run_train(
        *SWEEP,
        "hydra/launcher=local",
        "hydra.launcher.n_jobs=0",
        f"hydra.sweep.dir={tmp_path}/s",
        cwd=tmp_path,
        timeout=120,
        one_thread=True,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("error: hydra.launcher.n_jobs=0: ")
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("launcher", ["slurm", "local"])
def test_a_launcher_without_a_sweep_is_refused(tmp_path, launcher):
    # SL05: hydra/launcher=slurm without -m trained on the machine the command ran on
    with pytest.raises(ConfigError) as refused:
        preflight.precheck(
            ["debug=fast", f"hydra/launcher={launcher}", f"hydra.run.dir={tmp_path}/r"]
        )
    assert str(refused.value).startswith(f"hydra/launcher={launcher}: a launcher runs the jobs")


def fake_scontrol(tmp_path, monkeypatch, script: str) -> None:
    """SLURM's commands on PATH, ``scontrol`` a shell script of ``script``."""
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\n{script}\n")
    scontrol.chmod(0o755)
    monkeypatch.setattr(
        launchers.shutil, "which", lambda name: str(scontrol) if name == "scontrol" else name
    )


def test_a_slurm_launcher_whose_controller_does_not_answer_is_refused(tmp_path, monkeypatch):
    fake_scontrol(
        tmp_path, monkeypatch,
        'echo "scontrol: fatal: Could not establish a configuration source" >&2; exit 1',
    )  # fmt: skip
    hydra = launchers.hydra_config(["hydra/launcher=slurm"], [CONFIG_DIR], "train")
    with pytest.raises(ConfigError) as refused:
        launchers.check_launcher(hydra.launcher)
    assert str(refused.value).startswith(
        "hydra/launcher=slurm: SLURM's controller does not answer here (scontrol ping: "
        "scontrol: fatal: Could not establish a configuration source)"
    )


def test_a_slurm_launcher_whose_controller_is_up_passes(tmp_path, monkeypatch):
    fake_scontrol(tmp_path, monkeypatch, 'echo "Slurm controller slurmctld is UP"; exit 0')
    hydra = launchers.hydra_config(["hydra/launcher=slurm"], [CONFIG_DIR], "train")
    launchers.check_launcher(hydra.launcher)
