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
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from pathlib import Path

try:  # POSIX: run-directory locks; elsewhere runs go unlocked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from omegaconf import DictConfig, OmegaConf

from lengen.atomic import atomic_write
from lengen.checks import ConfigError, Preempted, TrainingDiverged
from lengen.identity import (
    RESUME_ALSO_MAY_CHANGE,
    RESUME_MAY_CHANGE,
    config_differences,
    evaluation_differences,
)

FAILED = "failed.json"
LOCK = ".lock"
#: the SLURM job (cluster/job id) that started or last continued the run: a requeue of that job
#: continues the run by itself (``requeued_job``)
SLURM_JOB = ".slurm_job"
#: what Hydra writes into a run's directory before the run starts (its record of the command,
#: the job's log); everything else there comes after the run took its lock (``LOCK``)
HYDRA_FILES = (".hydra", "train.log")
_HELD: set[int] = set()  # descriptors of the locks this process holds
#: held by a -m sweep's own process while it runs (``hold_sweep``): the sweep's job records
#: (``lengen.cli.SweepReport``) are numbered from 0 by every sweep, so a second sweep into the
#: same folder would clear the first's and report the other's runs as its own
SWEEP_LOCK = ".jobs.lock"
_SWEEPS: dict[Path, int] = {}  # sweep folder -> descriptor of its lock, in this process


def _forget_inherited_locks() -> None:
    # A forked child (a data-loader worker) shares the parent's open lock: were it to keep the
    # descriptor, a SIGKILLed run's orphaned workers would hold the lock for seconds after it
    # died, and SLURM's immediate requeue would be refused as "in use". Closing the child's copy
    # leaves the parent's lock in place (flock belongs to the open file, which the parent holds).
    while _HELD:
        with contextlib.suppress(OSError):
            os.close(_HELD.pop())
    while _SWEEPS:
        with contextlib.suppress(OSError):
            os.close(_SWEEPS.popitem()[1])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_locks)


def _take_lock(path: Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (created if missing), this process's pid written into
    it -> its descriptor; None when another open file holds it. The kernel drops the lock when
    the descriptor is closed or the process ends, so a killed process leaves none."""
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        return None
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()}\n".encode())
    return descriptor


def _held_elsewhere(path: Path) -> bool:
    """Whether another open file holds ``path``'s lock (an existing file; nothing written)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(descriptor)


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
    except OSError:
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


def is_rank_zero() -> bool:
    """Whether this process is the first of a multi-process run (or the only one), read from
    the variables Lightning, torchrun and SLURM set, so that it is known before any import."""
    import os

    for variable in ("RANK", "SLURM_PROCID"):
        if os.environ.get(variable, "").isdigit():
            return int(os.environ[variable]) == 0
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"


def resolve_run_dir(cfg: DictConfig, run_dir: str | Path | None) -> Path:
    if run_dir is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            run_dir = HydraConfig.get().runtime.output_dir
        elif "hydra" in cfg:
            run_dir = cfg.hydra.run.dir
        else:
            raise ConfigError("hydra.run.dir is unknown: pass run_dir= to run() outside Hydra")
    return Path(run_dir)


def resolved_config(cfg: DictConfig) -> dict:
    """The config as written to config.yaml and checkpoints: resolved, without ``hydra``."""
    container = OmegaConf.to_container(cfg, resolve=True)
    container.pop("hydra", None)
    return container


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
    if saved_path.is_file():
        try:
            saved = OmegaConf.to_container(OmegaConf.load(saved_path), resolve=True)
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


def in_use_message(path: Path) -> str:
    return (
        f"hydra.run.dir={path} is in use by another running process; allowed: a new "
        f"hydra.run.dir, or wait until that run ends"
    )


def sweep_in_use_message(sweep_dir: Path, pid: str) -> str:
    return (
        f"hydra.sweep.dir={sweep_dir} is in use by another running sweep (pid {pid or '?'}); "
        f"allowed: another hydra.sweep.dir, or wait until that sweep ends (runs meant to run "
        f"at once go in one command: -m seed=1,2 hydra/launcher=local hydra.launcher.n_jobs=2)"
    )


def sweep_holder(sweep_dir: Path) -> str | None:
    """The pid (as written, maybe '') of another process's sweep running into ``sweep_dir``;
    None when none is (checked before anything is written)."""
    path = Path(sweep_dir) / SWEEP_LOCK
    if fcntl is None or Path(sweep_dir).resolve() in _SWEEPS or not path.is_file():
        return None
    if not _held_elsewhere(path):  # a sweep that ended (or was killed) left its file
        return None
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")[:32].strip()
    return ""


def hold_sweep(sweep_dir: Path) -> None:
    """Own ``sweep_dir`` for this process's sweep, until ``release_sweep`` or the process ends
    (an exclusive ``flock`` on ``.jobs.lock``: a killed sweep leaves no stale lock). Raises
    ConfigError when another process's sweep holds it; that refusal writes nothing."""
    sweep_dir = Path(sweep_dir)
    if fcntl is None or sweep_dir.resolve() in _SWEEPS:  # a later sweep of this process
        return
    if (pid := sweep_holder(sweep_dir)) is not None:
        raise ConfigError(sweep_in_use_message(sweep_dir, pid))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if (descriptor := _take_lock(sweep_dir / SWEEP_LOCK)) is None:  # taken since the look
        raise ConfigError(sweep_in_use_message(sweep_dir, ""))
    _SWEEPS[sweep_dir.resolve()] = descriptor


def release_sweep(sweep_dir: Path) -> None:
    if (descriptor := _SWEEPS.pop(Path(sweep_dir).resolve(), None)) is not None:
        os.close(descriptor)  # closing drops the flock


def save_config(cfg: DictConfig, path: Path) -> None:
    atomic_write(path, OmegaConf.to_yaml(resolved_config(cfg)))


def encodings_with_option(option: str) -> list[str]:
    """The shipped encodings (configs/pe) whose yaml holds ``option``."""
    import yaml

    from lengen.pe.config import pe_config_dir

    return [path.stem for path in sorted(pe_config_dir().glob("*.yaml"))
            if option in (yaml.safe_load(path.read_text()) or {})]  # fmt: skip


def load_config(run_dir: Path, overrides: list[str] | tuple = ()) -> DictConfig:
    """A run's config.yaml with ``key=value`` overrides applied (keys must already exist)."""
    import yaml
    from omegaconf.errors import OmegaConfBaseException

    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ConfigError(f"run={run_dir}: no config.yaml there; allowed: a lengen run directory")
    try:
        cfg = OmegaConf.load(config_path)
        if not isinstance(cfg, DictConfig) or "pe" not in cfg:
            raise ValueError("not a lengen config")
    except Exception as error:  # noqa: BLE001 - any parse failure: a damaged record
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConfigError(
            f"run={run_dir}: config.yaml cannot be read ({first}); allowed: a lengen run "
            f"directory with its config.yaml intact"
        ) from None
    from lengen.pe.config import config_of

    options = config_of(cfg.pe.get("_target_"))
    if options is not None and options.bias_of_distance and "randomized_relative" not in cfg.pe:
        # written before pe.randomized_relative existed: such runs drew distances of random
        # positions, which null means (lengen.pe.base); the configs' default is distances
        cfg.pe.randomized_relative = None
    OmegaConf.set_struct(cfg, True)
    for override in overrides:
        key = override.partition("=")[0]
        if key.startswith(("~", "+")):  # Hydra's prefixes: from_dotlist reads them as names
            raise ConfigError(
                f"{key}: a re-evaluation changes keys the run's config has; allowed: "
                f"{key.lstrip('~+')}=<value>, without Hydra's ~, + or ++"
            )
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist([override]))
        except (OmegaConfBaseException, yaml.YAMLError) as error:  # yaml: a value cut short
            first = str(error).splitlines()[0]
            section, _, option = key.partition(".")
            if section == "pe" and option and option not in cfg.pe:  # the common case: say whose
                owners = encodings_with_option(option.partition(".")[0])
                raise ConfigError(
                    f"{key} is not an option of this run's encoding (pe={cfg.pe.get('name')}); "
                    f"allowed: {key} with runs of "
                    + (", ".join(f"pe={name}" for name in owners) or "no encoding")
                ) from None
            raise ConfigError(
                f"{key}: cannot apply {override!r} to this run's config ({first})"
            ) from None
    return cfg


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
            refusal = finished_refusal(cfg, self.path)
            if refusal is not None:
                raise ConfigError(refusal)
            mode = resume_label(cfg, self.path)
            print(f"resume={mode}: {self.path} already finished (results.json); nothing to do")
            return json.loads(self.results.read_text())
        raise ConfigError(
            f"hydra.run.dir={self.path} already holds a finished run (results.json); "
            f"allowed: resume=auto (a finished run is left as it is, an interrupted one "
            f"continues: how a sweep is re-run), a new hydra.run.dir, or remove that directory "
            f"yourself"
        )

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
        self.path.mkdir(parents=True, exist_ok=True)
        if self.rank_zero:
            self.lock()
            if (job := slurm_job()) is not None:  # its requeue may continue this run
                atomic_write(self.path / SLURM_JOB, job + "\n")
        if self.rank_zero and resumed is None:
            save_config(cfg, self.path / "config.yaml")
        if self.rank_zero and resumed is not None:  # the interruption's record no longer applies
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
        if fcntl is None or self._lock is not None:
            return
        if (descriptor := _take_lock(self.path / LOCK)) is None:
            raise ConfigError(in_use_message(self.path))
        self._lock = descriptor
        _HELD.add(descriptor)

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
            _HELD.discard(self._lock)
            os.close(self._lock)  # closing drops the flock
            self._lock = None

    @staticmethod
    def release_all() -> None:
        """Drop every lock this process holds (the end of a sweep's job)."""
        while _HELD:
            os.close(_HELD.pop())  # closing drops the flock

    def in_use(self) -> bool:
        """Whether another process holds the directory's lock (checked before Hydra writes)."""
        if fcntl is None or not (self.path / LOCK).is_file():
            return False
        return _held_elsewhere(self.path / LOCK)

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
