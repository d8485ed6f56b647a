"""What a run directory allows: whether a command may start, continue or answer with a finished
run there (each refusal one line naming the key), what a requeued SLURM job may continue, and
what the directory says about its run for a sweep's report. Reads files only: no torch, nothing
written."""

from __future__ import annotations

import json
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lengen.checks import ConfigError
from lengen.identity import (
    RESUME_ALSO_MAY_CHANGE,
    RESUME_MAY_CHANGE,
    config_differences,
    evaluation_differences,
)
from lengen.rundir.locks import LOCK
from lengen.rundir.saved_config import resolved_config

FAILED = "failed.json"
#: the SLURM job (cluster/job id) that started or last continued the run: a requeue of that job
#: continues the run by itself (``requeued_job``)
SLURM_JOB = ".slurm_job"
#: what Hydra writes into a run's directory before the run starts (its record of the command,
#: the job's log); everything else there comes after the run took its lock (``LOCK``)
HYDRA_FILES = (".hydra", "train.log")


def slurm_job() -> str | None:
    """This process's SLURM job as ``cluster/job id`` (None outside a SLURM job)."""
    job = os.environ.get("SLURM_JOB_ID")
    return f"{os.environ.get('SLURM_CLUSTER_NAME', '')}/{job}" if job else None


def requeued_job(run_dir: Path) -> str | None:
    """The SLURM job, when this process is that job run again after a requeue and the run in
    ``run_dir`` was started (or last continued) by it; else None. Only then may a command
    without ``resume=true`` continue an interrupted run: a new job, a second command in the same
    job's first run, or another process never does."""
    job, restarts = slurm_job(), os.environ.get("SLURM_RESTART_COUNT", "0")
    if job is None or not restarts.isdigit() or int(restarts) == 0:
        return None
    try:
        recorded = (run_dir / SLURM_JOB).read_text().strip()
    except (OSError, UnicodeDecodeError):  # unreadable or damaged: not this job's record
        return None
    return job if recorded == job else None


def resume_mode(cfg: DictConfig, run_dir: Path) -> bool | str:
    """``cfg.resume``, or ``"auto"`` when a requeued SLURM job comes back to the run it started
    (``requeued_job``): its checkpoint is continued, a run without one starts again, a finished
    one is done, and the config must be the run's, as for ``resume=auto``."""
    if not cfg.resume and requeued_job(run_dir) is not None:
        return "auto"
    return cfg.resume


def resume_label(cfg: DictConfig, run_dir: Path) -> str:
    """How messages name the resume mode in force."""
    if resume_mode(cfg, run_dir) == cfg.resume:
        return str(cfg.resume).lower()
    return "auto (a requeued SLURM job)"


def resume_refusal(cfg: DictConfig, run_dir: Path, rank_zero: bool = True) -> str | None:
    """Why ``cfg`` may not start or continue in ``run_dir`` (one line naming the key), or None.

    Reads only config.yaml and whether files exist (no torch): the entry point asks this before
    Hydra writes anything. A fresh run refuses an interrupted run's directory; ``resume=true``
    refuses a directory without a checkpoint and a config that would train something else."""
    checkpoint = run_dir / "checkpoints" / "last.ckpt"
    resume, mode = resume_mode(cfg, run_dir), resume_label(cfg, run_dir)
    if resume == "auto" and not checkpoint.exists():
        return None  # nothing to continue: a fresh run
    if not resume:
        if rank_zero and checkpoint.exists():
            return (
                f"hydra.run.dir={run_dir} holds an interrupted run (checkpoints/last.ckpt, no "
                f"results.json); allowed: resume=true to continue it, or a new hydra.run.dir"
            )
        return None
    if not checkpoint.is_file():
        return (
            f"resume=true: no checkpoint at {checkpoint}; allowed: resume=true with "
            f"hydra.run.dir=<the interrupted run's directory>, resume=auto, or resume=false"
        )
    saved_path = run_dir / "config.yaml"
    if not saved_path.is_file():
        # a checkpoint comes after config.yaml; resuming without it finished a run that
        # eval.py and aggregate.py then refused, and nothing checked what it trains (RS06)
        return (
            f"resume={mode}: {run_dir} holds a checkpoint but no config.yaml, the record of "
            f"what the run trains, so the config cannot be checked against it; allowed: put "
            f"the run's config.yaml back, or a new hydra.run.dir"
        )
    if saved_path.is_file():
        try:
            saved = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True)
            if not isinstance(saved, dict) or not saved:  # an emptied file (RS09)
                raise ValueError("empty, or no mapping of keys")
        except Exception as error:  # noqa: BLE001 - any parse failure: a damaged record
            first = (
                str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            )
            return f"resume: {saved_path} cannot be read ({first}); allowed: a new hydra.run.dir"
        changed = config_differences(saved, resolved_config(cfg))
        if changed:
            return (
                f"resume={mode}: the config differs from the run's config.yaml in "
                f"{', '.join(changed)}; allowed: the same config, changing only "
                f"{', '.join(RESUME_MAY_CHANGE[1:] + RESUME_ALSO_MAY_CHANGE)}"
            )
    return None


def foreign_refusal(run_dir: Path) -> str | None:
    """Why a fresh run may not start in ``run_dir``: a file, or a directory holding files that
    no run wrote (no ``LOCK``, and more than ``HYDRA_FILES``), or None."""
    if run_dir.exists() and not run_dir.is_dir():
        return f"hydra.run.dir={run_dir} is a file; allowed: a directory path"
    if not run_dir.is_dir():
        return None
    names = {entry.name for entry in run_dir.iterdir()}
    entries = sorted(names - set(HYDRA_FILES))
    if LOCK in names or not entries:
        return None
    shown = ", ".join(entries[:3]) + (", …" if len(entries) > 3 else "")
    return (
        f"hydra.run.dir={run_dir} holds files that no lengen run wrote ({shown}); allowed: a new "
        f"or empty directory, or a lengen run directory"
    )


def finished_refusal(cfg: DictConfig, run_dir: Path) -> str | None:
    """Why the finished run in ``run_dir`` does not answer ``cfg`` (``resume=true``/``auto``):
    it trained something else, or evaluated otherwise; None when its results are the answer."""
    from lengen.config import eval_lengths

    mode = resume_label(cfg, run_dir)
    saved_path = run_dir / "config.yaml"
    try:
        saved = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True)
        if not isinstance(saved, dict):
            raise ValueError("not a mapping")
    except Exception as error:  # noqa: BLE001 - a missing or damaged record
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return (
            f"resume={mode}: {saved_path} cannot be read ({first}), so the finished run there "
            f"cannot be compared with this config; allowed: a new hydra.run.dir"
        )
    current = resolved_config(cfg)
    changed = config_differences(saved, current)
    if changed:
        return (
            f"resume={mode}: hydra.run.dir={run_dir} holds a finished run of another config "
            f"({', '.join(changed[:3])}); allowed: a new hydra.run.dir"
        )
    measured = evaluation_differences(saved, current)
    try:
        missing = sorted(set(eval_lengths(cfg)) - set(eval_lengths(OmegaConf.create(saved))))
    except (ConfigError, KeyError, AttributeError):  # an old record without the keys: compare keys
        missing = []
    if missing:
        measured.append(f"eval lengths {missing} not evaluated")
    if not measured:
        return None
    return (
        f"resume={mode}: hydra.run.dir={run_dir} finished with other evaluation settings "
        f"({', '.join(measured[:3])}); allowed: python eval.py run={run_dir} with those eval.* "
        f"settings (results.<tag>.json beside the run's), or the run's own eval settings"
    )


def stored_config_refusal(run_dir: Path, checkpoint: dict) -> str | None:
    """Why a checkpoint may not be evaluated as this directory's run: the config stored in it
    differs from the directory's config.yaml in what was trained (two runs that shared one
    directory), or None."""
    stored = checkpoint.get("lengen", {}).get("config")
    saved_path = run_dir / "config.yaml"
    if not stored or not saved_path.is_file():
        return None
    saved = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True)
    changed = config_differences(stored, saved)
    if not changed:
        return None
    return (
        f"run={run_dir}: checkpoints/last.ckpt was trained with another config than config.yaml "
        f"({', '.join(changed[:3])}); allowed: a run directory whose checkpoint is its own"
    )


def run_state(run_dir: Path) -> tuple[str, str]:
    """What a run directory says about its run, for a sweep's report -> (state, detail):
    ``finished`` (detail ``continued`` when the run went on from a checkpoint, else ``""``),
    ``interrupted`` (a checkpoint and no results: why it stopped, from failed.json),
    ``failed`` (failed.json's error, no checkpoint) or ``empty`` (none of these)."""
    failure = ""
    try:
        record = json.loads((run_dir / FAILED).read_text())
        failure = f"{record.get('type', 'Error')}: {record.get('error', '')}"
        if record.get("type") == "Preempted":
            failure = record.get("error", "")
    except (OSError, ValueError, AttributeError):  # none, or unreadable: the other files tell
        pass
    if (run_dir / "results.json").is_file():
        try:
            resumed = json.loads((run_dir / "results.json").read_text()).get("resumed")
        except (OSError, ValueError, AttributeError):
            return "failed", f"{run_dir / 'results.json'} cannot be read"
        return "finished", "continued" if resumed else ""
    if (run_dir / "checkpoints" / "last.ckpt").is_file():
        return "interrupted", failure or "a checkpoint and no results (killed?)"
    if failure:
        return "failed", failure
    return "empty", ""
