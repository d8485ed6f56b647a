"""A local sweep that a signal stops (SIGTERM, SIGINT, SIGUSR1 to the sweep's own process).

Its jobs may run in other processes (``hydra/launcher=local``: joblib's workers), which the
signal does not reach: they trained to the end while the sweep's process only remembered it,
and the sweep exited 0 (issue #51, SN21). So:

* the sweep's process marks the sweep stopped (``<sweep dir>/.jobs/stopped.json``, the signal's
  number) and sends the signal on to every job that is running, and to any that starts while
  it launches (``ForwardSignals``: each job's start record carries its pid);
* a job stopped by a signal saves its checkpoint (``lengen.checkpoints.StepCheckpoint``),
  marks the sweep stopped (a job in the sweep's own process, with the basic launcher, is the
  one that sees it) and returns ``interrupted: …`` for its record instead of exiting, so the
  other workers are not torn down mid-checkpoint;
* a job that starts in a stopped sweep does not train (``not started: …``), the sweeper
  launches nothing more, and the report lists both and exits 128 + the signal. Hydra made
  that job's folder and its empty train.log before the job could look: the job removes them
  (``remove_unstarted``), only a folder the sweep's launch did not find (``remember_folders``).

SLURM jobs are their own processes on other machines, stopped by SLURM (the submitit
launcher's waiting ends on the signal, ``hydra_plugins.lengen_submitit_launcher``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path

from lengen.atomic import atomic_write

#: beside the jobs' records (``lengen.cli.SweepReport.RECORDS``)
RECORDS = ".jobs"
STOP_MARK = "stopped.json"
#: the folders the sweep folder held before its jobs were launched (``remember_folders``)
FOLDERS_BEFORE = "folders_before.json"
#: the signals that stop a sweep, as they stop a run (``lengen.process``; SIGINT: Ctrl-C)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)


def mark_stopped(sweep_dir: str | Path, signum: int) -> None:
    """Mark the sweep stopped by ``signum`` (the first signal's mark stays)."""
    path = Path(sweep_dir) / RECORDS / STOP_MARK
    if not stopped_by(sweep_dir):
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({"signal": int(signum)}) + "\n")


def stopped_by(sweep_dir: str | Path) -> int:
    """The signal that stopped the sweep, 0 while none has."""
    try:
        value = json.loads((Path(sweep_dir) / RECORDS / STOP_MARK).read_text()).get("signal")
    except (OSError, ValueError, AttributeError):
        return 0
    return value if isinstance(value, int) and value > 0 else 0


def remember_folders(sweep_dir: str | Path) -> None:
    """Note the folders ``sweep_dir`` holds before the sweep launches its jobs (an earlier
    sweep's runs): a job that does not start removes its folder only where it is not one of
    them (``remove_unstarted``)."""
    sweep_dir = Path(sweep_dir)
    names = sorted(path.name for path in sweep_dir.iterdir() if path.is_dir())
    (sweep_dir / RECORDS).mkdir(parents=True, exist_ok=True)
    atomic_write(sweep_dir / RECORDS / FOLDERS_BEFORE, json.dumps({"folders": names}) + "\n")


def remove_unstarted(sweep_dir: str | Path, run_dir: str | Path) -> None:
    """Remove the folder Hydra made for a job that will not start (its sweep was stopped):
    ``run_dir`` and its empty parents up to the sweep folder, only where the folder under the
    sweep folder is not one that ``remember_folders`` found there (nothing is removed without
    its note) and ``run_dir`` holds nothing but Hydra's empty train.log."""
    sweep_dir, run_dir = Path(sweep_dir).absolute(), Path(run_dir).absolute()
    try:
        before = json.loads((sweep_dir / RECORDS / FOLDERS_BEFORE).read_text())["folders"]
        top = sweep_dir / run_dir.relative_to(sweep_dir).parts[0]
        entries = list(run_dir.iterdir())
    except (OSError, ValueError, IndexError, KeyError, TypeError):  # no note or no folder
        return
    log = run_dir / "train.log"
    if not isinstance(before, list) or top.name in before or entries != [log]:
        return
    with contextlib.suppress(OSError):
        if log.is_file() and not log.is_symlink() and log.stat().st_size == 0:
            log.unlink()
            for folder in (run_dir, *run_dir.parents):
                if folder == sweep_dir:
                    break
                folder.rmdir()  # OSError once a folder holds something: kept with it


def running_jobs(sweep_dir: str | Path) -> dict[str, int]:
    """{record file: pid} of the jobs that started and have not ended (their start record)."""
    running = {}
    for path in (Path(sweep_dir) / RECORDS).glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        pid = record.get("pid") if isinstance(record, dict) else None
        if record.get("outcome") is None and isinstance(pid, int) and pid != os.getpid():
            running[path.name] = pid
    return running


def workers_keep_signals():
    """A context in which joblib's default (loky) workers install lengen's signal handlers as
    they start: a worker with no job yet died of a SIGTERM sent to every process of the sweep
    (a scheduler stopping the job, ``kill -- -<pgid>``), and its death tore down the sweep
    with loky's ``TerminatedWorkerError`` traceback, the busy workers' runs with it. Only for
    Hydra's joblib launcher with its default backend (``hydra.launcher.backend`` null)."""
    import joblib

    from lengen.process import install_preemption_handlers

    return joblib.parallel_config(
        backend="loky", initializer=install_preemption_handlers, initargs=(signal.SIGINT,)
    )


class ForwardSignals:
    """Around the launching in the sweep's own process, when its jobs run in other processes:
    a stop signal marks the sweep stopped and is sent on to each running job, and, until the
    launching returns, to each job that starts after it (checked every ``every_s`` seconds)."""

    def __init__(self, sweep_dir: str | Path, every_s: float = 0.5) -> None:
        self.sweep_dir = Path(sweep_dir)
        self.every_s = every_s
        self.signum = 0
        self._sent: set[tuple[str, int]] = set()
        self._previous: dict[int, object] = {}
        self._done = threading.Event()
        self._forwarder: threading.Thread | None = None

    def __enter__(self) -> ForwardSignals:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._stop)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._done.set()
        if self._forwarder is not None:
            self._forwarder.join()

    def _stop(self, signum, frame) -> None:
        self.signum = self.signum or signum
        mark_stopped(self.sweep_dir, self.signum)
        self._send()
        if self._forwarder is None:  # jobs starting later get it too
            self._forwarder = threading.Thread(target=self._keep_sending, daemon=True)
            self._forwarder.start()

    def _keep_sending(self) -> None:
        while not self._done.wait(self.every_s):
            self._send()

    def _send(self) -> None:
        for name, pid in running_jobs(self.sweep_dir).items():
            if (name, pid) not in self._sent:
                self._sent.add((name, pid))
                with contextlib.suppress(OSError):  # ended meanwhile
                    os.kill(pid, self.signum)
