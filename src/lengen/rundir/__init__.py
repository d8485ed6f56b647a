"""The rules of a run directory, in one object.

* A directory holding a finished ``results.json`` is never written into again: a fresh run is
  refused; ``resume=true`` or ``auto`` says it is done and returns its results when they answer
  the request: the same training (``config_differences``) and the same evaluation
  (``evaluation_differences``, the lengths asked for among those evaluated); otherwise it is
  refused, naming the keys (``eval.py`` evaluates a finished run otherwise).
* A fresh run starts only in a new or empty directory (Hydra's own files aside), or in one a
  run started before (it holds ``.lock``): a user's own files are never written over.
* ``checkpoints/last.ckpt`` without results is an interrupted run: only ``resume=true`` or
  ``auto`` (with the same config, ``RunDirectory.resume_point``) continues it; ``auto``
  starts a directory without a checkpoint afresh.
* A SLURM job that is requeued (preemption, the time limit) runs its command again, which
  does not say ``resume=true``: a run directory holding an interrupted run that *this* SLURM job
  started (``.slurm_job``) is continued when the job runs again (``SLURM_RESTART_COUNT`` > 0),
  as ``resume=auto`` would, config check included; any other job or process is still refused.
* One process owns a run directory: ``start`` takes an exclusive lock (``.lock``, released when
  the process ends; processes it forks, such as data-loader workers, do not keep it), and a
  second run there is refused.
* ``config.yaml`` is written when a fresh run starts (so failed runs are diagnosable), and the
  data card beside it; a resumed run removes the interruption's ``failed.json``.
* A failure writes ``failed.json`` (the error; the traceback for crashes), unless finished.
* Only rank 0 of a multi-process run writes.

The refusals live in ``.rules``, the locks in ``.locks``, config.yaml in ``.saved_config``;
``RunDirectory`` puts them together.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path

from omegaconf import DictConfig

from lengen.atomic import atomic_write
from lengen.checks import ConfigError, Preempted, TrainingDiverged
from lengen.errors import RunDirectoryWriteError
from lengen.identity import config_differences
from lengen.rundir.locks import (
    HELD,
    LOCK,
    LOCKING,
    SWEEP_LOCK,
    held_elsewhere,
    hold_sweep,
    in_use_message,
    release_sweep,
    sweep_holder,
    sweep_in_use_message,
    take_lock,
)
from lengen.rundir.rules import (
    FAILED,
    HYDRA_FILES,
    SLURM_JOB,
    finished_refusal,
    foreign_refusal,
    requeued_job,
    resume_label,
    resume_mode,
    resume_refusal,
    run_state,
    slurm_job,
    stored_config_refusal,
)
from lengen.rundir.saved_config import (
    encodings_with_option,
    load_config,
    resolve_run_dir,
    resolved_config,
    save_config,
)

#: the names importers use (``from lengen.rundir import …``): the rules live in .rules, the
#: locks in .locks, config.yaml in .saved_config; RunDirectory puts them together
__all__ = [
    "FAILED",
    "HYDRA_FILES",
    "LOCK",
    "SLURM_JOB",
    "SWEEP_LOCK",
    "RunDirectory",
    "encodings_with_option",
    "finished_refusal",
    "foreign_refusal",
    "hold_sweep",
    "in_use_message",
    "is_rank_zero",
    "load_config",
    "release_sweep",
    "requeued_job",
    "resolve_run_dir",
    "resolved_config",
    "resume_label",
    "resume_mode",
    "resume_refusal",
    "run_state",
    "save_config",
    "slurm_job",
    "stored_config_refusal",
    "sweep_holder",
    "sweep_in_use_message",
]


def is_rank_zero() -> bool:
    """Whether this process is the first of a multi-process run (or the only one), read from
    the variables Lightning, torchrun and SLURM set, so that it is known before any import."""
    import os

    for variable in ("RANK", "SLURM_PROCID"):
        if os.environ.get(variable, "").isdigit():
            return int(os.environ[variable]) == 0
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


class RunDirectory:
    """One run's directory: what it holds decides what a run may do there."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.results = self.path / "results.json"
        self.checkpoint = self.path / "checkpoints" / "last.ckpt"
        self.rank_zero = is_rank_zero()
        self._lock: int | None = None

    def finished(self, cfg: DictConfig) -> dict | None:
        """A finished run's results under ``resume=true``; a fresh run there is refused."""
        if not self.results.exists():
            return None
        if resume_mode(cfg, self.path):
            results = self.readable_results()
            refusal = finished_refusal(cfg, self.path)
            if refusal is not None:
                raise ConfigError(refusal)
            mode = resume_label(cfg, self.path)
            print(f"resume={mode}: {self.path} already finished (results.json); nothing to do")
            return results
        raise ConfigError(
            f"hydra.run.dir={self.path} already holds a finished run (results.json); "
            f"allowed: resume=auto (a finished run is left as it is, an interrupted one "
            f"continues: how a sweep is re-run), a new hydra.run.dir, or remove that directory "
            f"yourself"
        )

    def readable_results(self) -> dict:
        """results.json as a JSON object; ConfigError when it is cut short or no object: a
        sweep's job met it with a JSONDecodeError traceback (SW8), where the pre-check refuses
        a single run's in one line (``lengen.preflight.check_results_file``)."""
        try:
            results = json.loads(self.results.read_text())
            if not isinstance(results, dict):
                raise ValueError("no JSON object")
        except (OSError, ValueError) as error:  # UnicodeDecodeError and JSON's are ValueErrors
            raise ConfigError(
                f"hydra.run.dir: {self.results} cannot be read ({type(error).__name__}), so the "
                f"run is neither finished nor resumable; allowed: another hydra.run.dir, or move "
                f"that file away yourself"
            ) from None
        return results

    def check_start(self, cfg: DictConfig) -> None:
        """Whether ``cfg`` may start or continue here, read without writing or importing
        torch (the entry point asks before Hydra creates anything); ConfigError if not."""
        if self.path.is_symlink() and not self.path.exists():  # Hydra's mkdir: a traceback
            raise ConfigError(
                f"hydra.run.dir={self.path} is a symbolic link to {os.readlink(self.path)}, "
                f"which does not exist (or loops); allowed: a directory path, or a link to an "
                f"existing directory"
            )
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(foreign_refusal(self.path))
        if self.path.exists() and not os.access(self.path, os.W_OK):
            raise ConfigError(
                f"hydra.run.dir={self.path}: the directory is not writable; allowed: a "
                f"writable directory"
            )
        if self.in_use():
            raise ConfigError(in_use_message(self.path))
        refusal = resume_refusal(cfg, self.path, self.rank_zero)
        if refusal is None and self.rank_zero and not self.checkpoint.exists():  # a fresh run
            refusal = foreign_refusal(self.path)
        if refusal is not None:
            raise ConfigError(refusal)

    def start(self, cfg: DictConfig) -> tuple[Path, int, dict | None] | None:
        """Create and lock the directory; -> what ``resume_point`` returns (None: fresh)."""
        resumed = self.resume_point(cfg)
        if resumed is None and self.rank_zero and (refusal := foreign_refusal(self.path)):
            raise ConfigError(refusal)  # the entry point asked already; run() from Python not
        try:  # a disk with no room fails here, before anything runs (a 25-line traceback)
            self.path.mkdir(parents=True, exist_ok=True)
            if self.rank_zero:
                self.lock()
                if (job := slurm_job()) is not None:  # its requeue may continue this run
                    atomic_write(self.path / SLURM_JOB, job + "\n")
            if self.rank_zero and resumed is None:
                save_config(cfg, self.path / "config.yaml")
        except OSError as error:
            raise RunDirectoryWriteError(
                f"hydra.run.dir={self.path}: its first files (.lock, config.yaml) could not be "
                f"written ({error.strerror or error}), so nothing was trained; allowed: free "
                f"space on its disk (or make it writable), or another hydra.run.dir"
            ) from None
        if self.rank_zero:  # the earlier attempt's record no longer applies: resumed, or
            # started again (resume=auto without a checkpoint kept it beside the new results: S08c)
            (self.path / FAILED).unlink(missing_ok=True)
        return resumed

    def resume_point(self, cfg: DictConfig) -> tuple[Path, int, dict | None] | None:
        """The checkpoint to continue from, its step and the training row logged last
        (``resume=true``, or ``auto`` where a checkpoint exists), or None for a fresh run: the directory's rules
        (``resume_refusal``), then the checkpoint itself — a truncated or foreign file, or one
        whose stored config is not the directory's, is refused before Lightning reads it."""
        refusal = resume_refusal(cfg, self.path, self.rank_zero)
        if refusal is not None:
            raise ConfigError(refusal)
        if not resume_mode(cfg, self.path) or not self.checkpoint.is_file():
            return None
        from lengen.checkpoints import load_checkpoint

        state = load_checkpoint(self.checkpoint, "resume")
        if "global_step" not in state or "state_dict" not in state:
            raise ConfigError(
                f"resume: {self.checkpoint} is not a Lightning checkpoint of a lengen run"
            )
        stored = state.get("lengen", {}).get("config")
        changed = config_differences(stored, resolved_config(cfg)) if stored else []
        if changed:
            raise ConfigError(
                f"resume: {self.checkpoint} was written by another config than this run's "
                f"({', '.join(changed[:3])}); allowed: the run directory it belongs to"
            )
        if self.rank_zero and (job := requeued_job(self.path)) and not cfg.resume:
            job_id = job.rpartition("/")[2]
            print(
                f"slurm: job {job_id} was requeued: continuing its run in {self.path} from step "
                f"{state['global_step']}"
            )
        return self.checkpoint, state["global_step"], state.get("lengen", {}).get("last_logged")

    # -- ownership -------------------------------------------------------------------------------
    def lock(self) -> None:
        """Own the directory until ``release`` or the process ends (an exclusive ``flock`` on
        ``.lock``, which the kernel drops with the process, so a killed run leaves no stale
        lock); a second process is refused."""
        if not LOCKING or self._lock is not None:
            return
        if (descriptor := take_lock(self.path / LOCK)) is None:
            raise ConfigError(in_use_message(self.path))
        self._lock = descriptor
        HELD.add(descriptor)

    @contextlib.contextmanager
    def owned(self, cfg: DictConfig):
        """``start`` for the length of a with-block: the directory stays locked until it ends
        (raised or not); yields what ``start`` returns."""
        resumed = self.start(cfg)
        try:
            yield resumed
        finally:
            self.release()

    def release(self) -> None:
        if self._lock is not None:
            HELD.discard(self._lock)
            os.close(self._lock)  # closing drops the flock
            self._lock = None

    @staticmethod
    def release_all() -> None:
        """Drop every lock this process holds (the end of a sweep's job)."""
        while HELD:
            os.close(HELD.pop())  # closing drops the flock

    def in_use(self) -> bool:
        """Whether another process holds the directory's lock (checked before Hydra writes)."""
        if not LOCKING or not (self.path / LOCK).is_file():
            return False
        return held_elsewhere(self.path / LOCK)

    def write_data_card(self, data, lengths: list[int]) -> None:
        card = data.card(lengths)
        if self.rank_zero and card is not None:
            text = json.dumps(card, indent=2, ensure_ascii=False) + "\n"
            atomic_write(self.path / "data_card.json", text)

    def record_failure(self, error: BaseException) -> None:
        """Write failed.json, unless the directory is missing or holds finished results."""
        if not self.rank_zero or not self.path.is_dir() or self.results.exists():
            return  # rank 0 writes for all the processes of a multi-process run
        report = {
            "error": str(error).splitlines()[0] if str(error) else type(error).__name__,
            "type": type(error).__name__,
        }
        if not isinstance(error, ConfigError | TrainingDiverged | Preempted):
            report["traceback"] = traceback.format_exception(error)
        try:
            atomic_write(self.path / FAILED, json.dumps(report, indent=2) + "\n")
        except OSError as write_error:  # a full or read-only disk: the error itself still counts
            print(
                f"note: {self.path / FAILED} could not be written "
                f"({write_error.strerror or write_error}); the error follows",
                file=sys.stderr,
            )
