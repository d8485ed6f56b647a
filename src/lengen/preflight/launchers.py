"""A sweep's launcher, sweeper and records folder, asked before the sweep writes anything:
Hydra's launchers check their own settings only when they launch, after the sweep folder,
multirun.yaml and the job records exist, and then fail with a traceback (issue #51 item 5:
``hydra.launcher.n_jobs=0`` in joblib, ``hydra/launcher=slurm`` where there is no SLURM,
``.jobs`` a file, ``hydra.sweeper.max_batch_size=-1`` that launches nothing)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from lengen.errors import ConfigError


def check_sweep_launch(
    overrides: Sequence[str], config_dirs: Sequence[Path], config_name: str, sweep_dir: str | None
) -> None:
    """Every refusal of a -m sweep's launch that needs Hydra's own config (``hydra.launcher``,
    ``hydra.sweeper``) or the sweep folder: one ConfigError naming the key, before anything is
    written."""
    hydra = hydra_config(overrides, config_dirs, config_name)
    check_launcher(hydra.launcher)
    check_sweeper(hydra.sweeper)
    if sweep_dir:
        check_sweep_records(sweep_dir)


def check_launcher_choice(choice: str | None, sweeping: bool) -> None:
    """A launcher runs the jobs of a -m sweep; without -m Hydra ignores it and the run trains
    here, on the machine the command runs on (SL05: ``hydra/launcher=slurm`` trained on the
    login node)."""
    if choice is not None and not sweeping:
        raise ConfigError(
            f"hydra/launcher={choice}: a launcher runs the jobs of a -m sweep, and without -m "
            f"the run would train here; allowed: -m … hydra/launcher={choice} (a sweep, of one "
            f"run or more), or no hydra/launcher"
        )


def hydra_config(overrides: Sequence[str], config_dirs: Sequence[Path], config_name: str):
    """The ``hydra`` node of the sweep's first job, composed as Hydra will (the pre-check's
    other compositions leave it out)."""
    from hydra import compose

    from lengen.preflight.command import _first_value, parse_overrides
    from lengen.preflight.hydra_private import composing

    kept = [a for a in overrides if not a.startswith("-") and ("=" in a or a[:1] == "~")]
    trial = [_first_value(override) for override in parse_overrides(kept)]
    with composing(list(config_dirs)):
        return compose(config_name, overrides=trial, return_hydra_config=True).hydra


def check_launcher(launcher: DictConfig) -> None:
    """joblib's ``n_jobs`` (0 means nothing to joblib: "n_jobs == 0 in Parallel has no
    meaning"), and a SLURM launcher where no SLURM is (submitit looks for ``srun`` only when
    the sweep launches)."""
    target = str(launcher.get("_target_", ""))
    if "n_jobs" in launcher and target.endswith("JoblibLauncher"):
        n_jobs = launcher.n_jobs
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0:
            raise ConfigError(
                f"hydra.launcher.n_jobs={n_jobs}: how many runs at once; allowed: a positive "
                "integer, or -1 (one per CPU core; -2 all but one, …)"
            )
    if _slurm_launcher(target) and shutil.which("srun") is None:
        raise ConfigError(
            "hydra/launcher=slurm: no SLURM here (srun is not on PATH), so no job could be "
            "submitted; allowed: the same command on a SLURM login node, or hydra/launcher=local "
            "(docs/cluster.md)"
        )
    if _slurm_launcher(target) and (refusal := slurm_controller_refusal()) is not None:
        raise ConfigError(refusal)


#: seconds SLURM's controller gets to answer ``scontrol ping`` before the sweep is written
CONTROLLER_TIMEOUT_S = 10.0


def slurm_controller_refusal() -> str | None:
    """Why no job could be submitted where SLURM's commands exist but no controller answers
    (sbatch then failed inside submitit, a 45-line traceback after the sweep folder was
    written: SL04 through another door), or None. ``scontrol ping`` decides: a controller
    reported UP passes; one that cannot be asked in time (or no scontrol) is left to sbatch."""
    import subprocess

    scontrol = shutil.which("scontrol")
    if scontrol is None:
        return None
    try:
        done = subprocess.run(
            [scontrol, "ping"], capture_output=True, text=True, timeout=CONTROLLER_TIMEOUT_S
        )
    except (subprocess.TimeoutExpired, OSError):
        return None
    if done.returncode == 0 or " is UP" in done.stdout:
        return None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    said = (lines[-1] if lines else f"exit status {done.returncode}")[:200]
    return (
        f"hydra/launcher=slurm: SLURM's controller does not answer here (scontrol ping: {said}), "
        f"so no job could be submitted; allowed: the same command where a controller answers "
        f"(a SLURM login node), or hydra/launcher=local (docs/cluster.md)"
    )


def _slurm_launcher(target: str) -> bool:
    """Whether the launcher class submits SLURM jobs (submitit's slurm executor, lengen's
    launcher built on it); submitit's ``local`` launcher runs here and needs no SLURM."""
    if "submitit" not in target:
        return False
    from hydra.utils import get_class

    try:
        return getattr(get_class(target), "_EXECUTOR", None) == "slurm"
    except Exception:  # noqa: BLE001 - the plugin missing: Hydra names it when it launches
        return False


def check_sweeper(sweeper: DictConfig) -> None:
    """``hydra.sweeper.max_batch_size``: null (every job at once) or a positive integer; a
    negative one launched nothing and the sweep then said no job reported back."""
    if "max_batch_size" not in sweeper:
        return
    size = sweeper.max_batch_size
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
        raise ConfigError(
            f"hydra.sweeper.max_batch_size={size}: how many jobs are launched per batch; "
            "allowed: a positive integer, or null (every job in one batch)"
        )


#: the folder of a sweep's job records: ``lengen.cli.SweepReport.RECORDS``, which sits above
#: this layer (the entry points import the pre-check); tests/test_faults_round3.py keeps them one
SWEEP_RECORDS = ".jobs"


def check_sweep_records(sweep_dir: str) -> None:
    """The sweep's own paths in ``hydra.sweep.dir``: its job records (a folder) and its lock
    and multirun.yaml (files); something else of that name is not the sweep's to replace."""
    from lengen.rundir import SWEEP_LOCK

    folder = Path(sweep_dir).expanduser()
    kinds = (
        (SWEEP_RECORDS, True, "its job records, a folder"),
        (SWEEP_LOCK, False, "its lock, a file"),
        ("multirun.yaml", False, "its command's config, a file"),
    )
    for name, directory, what in kinds:
        path = folder / name
        if not (path.exists() or path.is_symlink()):
            continue
        if path.is_dir() != directory or (not directory and not path.is_file()):
            raise ConfigError(
                f"hydra.sweep.dir={sweep_dir}: {path} is in the way (the sweep keeps {what}, "
                "there); allowed: another hydra.sweep.dir, or move that path away yourself"
            )
