"""Who owns a run directory or a sweep folder: an exclusive ``flock`` per owner (``.lock`` in a
run directory, ``.jobs.lock`` in a sweep folder), taken with this process's pid written into the
file and dropped by the kernel when the process ends, so a killed run leaves no stale lock;
forked children (data-loader workers) let go of their copies at once."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

try:  # POSIX: run-directory locks; elsewhere runs go unlocked
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from lengen.checks import ConfigError

#: whether this platform locks run directories (POSIX flock)
LOCKING = fcntl is not None
LOCK = ".lock"
HELD: set[int] = set()  # descriptors of the locks this process holds
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
    while HELD:
        with contextlib.suppress(OSError):
            os.close(HELD.pop())
    while _SWEEPS:
        with contextlib.suppress(OSError):
            os.close(_SWEEPS.popitem()[1])


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited_locks)


def take_lock(path: Path) -> int | None:
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


def held_elsewhere(path: Path) -> bool:
    """Whether another open file holds ``path``'s lock (an existing file; nothing written)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(descriptor)


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
    if not held_elsewhere(path):  # a sweep that ended (or was killed) left its file
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
    if (descriptor := take_lock(sweep_dir / SWEEP_LOCK)) is None:  # taken since the look
        raise ConfigError(sweep_in_use_message(sweep_dir, ""))
    _SWEEPS[sweep_dir.resolve()] = descriptor


def release_sweep(sweep_dir: Path) -> None:
    if (descriptor := _SWEEPS.pop(Path(sweep_dir).resolve(), None)) is not None:
        os.close(descriptor)  # closing drops the flock
