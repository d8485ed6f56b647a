"""Process plumbing: the preemption signals a process remembers instead of dying, waits in C
code that signals (and a deadline) still end, and output streams that outlive their reader or
were closed before the process started. Installed by the entry points at process start."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

# -- preemption signals ------------------------------------------------------------------------
#: Signals that stop training with a checkpoint: SIGTERM (kill, most schedulers) and SIGUSR1
#: (SLURM's warning before the time limit, e.g. ``sbatch --signal=USR1@120``).
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
_received = {"signum": 0}  # the preemption signal this process received and has not acted on


def _remember(signum, frame) -> None:
    _received["signum"] = signum


def install_preemption_handlers(*extra: int) -> None:
    """Remember SIGTERM and SIGUSR1 (and ``extra`` signals) instead of dying: training stops at
    the next step boundary with a checkpoint (``lengen.checkpoints.StepCheckpoint``). The entry
    point installs them at process start, so no signal from start to exit goes unseen."""
    for signum in (*PREEMPTION_SIGNALS, *extra):
        signal.signal(signum, _remember)


def received_signal() -> int:
    """The preemption signal received and not yet acted on (0: none)."""
    return _received["signum"]


def acted_on_signal() -> None:
    """The run stopped for the signal: a later run in this process starts afresh."""
    _received["signum"] = 0


# -- waits in C code ---------------------------------------------------------------------------
#: seconds a run's processes wait for each other to start (the process group's start-up)
START_TIMEOUT_VARIABLE = "LENGEN_START_TIMEOUT"
START_TIMEOUT_S = 300.0


def start_timeout() -> float:
    """``$LENGEN_START_TIMEOUT`` (seconds > 0), else ``START_TIMEOUT_S``. Raises ValueError
    naming the variable (the pre-check turns it into a refusal)."""
    text = os.environ.get(START_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return START_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{START_TIMEOUT_VARIABLE}={text}: allowed: a number of seconds > 0")
    return seconds


@contextlib.contextmanager
def signals_end_the_wait(
    timeout: float,
    on_signal: Callable[[int], str],
    on_timeout: Callable[[], tuple[str, int]],
):
    """End the process when a signal comes, or ``timeout`` seconds pass, while the main thread
    waits in C code inside this block: a wait in torch.distributed's start-up (rank 0 waiting
    for ranks that never come) runs no Python signal handler until it returns, so SIGTERM and
    SIGINT went unseen and only SIGKILL ended it. A thread of its own watches the wakeup file
    descriptor, where the interpreter's C-level handler writes each signal's number whatever
    the main thread does (``signal.set_wakeup_fd``). A signal: ``on_signal(signum)``'s line,
    exit 128 + signum; the deadline: ``on_timeout()``'s (line, exit status). Both run in that
    thread, the main thread still waiting; nothing was trained in the block, so nothing is
    saved. Off the main thread (where set_wakeup_fd cannot be called) the block runs unwatched;
    a signal after the block is the handlers' again."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wake_read, wake_write = os.pipe()
    stop_read, stop_write = os.pipe()
    os.set_blocking(wake_write, False)  # the C handler must never block on it
    previous = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)

    def watch() -> None:
        deadline = time.monotonic() + timeout
        signum = _received["signum"]  # one remembered before the wait would wait with it
        while not signum:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([wake_read, stop_read], [], [], max(left, 0))
            if stop_read in ready:
                return
            if not ready:
                break
            got = os.read(wake_read, 64)  # (other signals with handlers of their own: ignored)
            signum = next((n for n in got if n in (*PREEMPTION_SIGNALS, signal.SIGINT)), 0)
        if signum:
            line, status = on_signal(signum), 128 + signum
        else:
            line, status = on_timeout()
        print(line, file=sys.stderr, flush=True)
        os._exit(status)  # the main thread is inside C code: no exception can reach it

    watcher = threading.Thread(target=watch, name="lengen-wait-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        os.write(stop_write, b"x")
        watcher.join()
        signal.set_wakeup_fd(previous)
        for fd in (wake_read, wake_write, stop_read, stop_write):
            os.close(fd)


class _OutlivesItsReader:
    """A text stream that keeps the process going when whoever reads it goes away (``| head``,
    a closed terminal or SSH session) or its file cannot take more (``>/dev/full``, a full
    disk: ENOSPC; a hung-up terminal: EIO): the first such OSError points the stream's file
    descriptor at /dev/null, so later writes, flushes and the interpreter's own flush at exit
    succeed. A run must not crash (and record a failure) for want of a reader; aggregate.py's
    report to ``>/dev/full`` was an OSError traceback, exit 1, after its tables were written
    (KB107, docs/trials/kept-back-2026-12-02.md)."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError:
            self._to_null()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            self._to_null()

    def _to_null(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())
        os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class _ToRunLog(io.TextIOBase):
    """Stands in for stdout or stderr when it was closed before the process started (cron,
    daemons, ``>&-``: Python then sets ``sys.stdout`` to None, and the first ``print`` or flush
    crashed the run). What the run would print goes to its ``train.log``: the files of the root
    logger's file handlers (Hydra's job log in the run directory; a pack's members' logs too),
    kept in memory until one exists (``PENDING_LIMIT`` characters at most). Text printed
    before any run directory exists, such as a refusal's line, has nowhere to go; the exit
    status still tells."""

    #: characters kept while no log file exists (a sweep's opening lines are a few hundred)
    PENDING_LIMIT = 1 << 20

    def __init__(self, fd: int) -> None:
        self._fd = fd  # the descriptor, pointed at /dev/null (``_hold_closed_descriptors``)
        self._pending: list[str] = []
        self._pending_size = 0

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False  # progress comes as lines (lengen.progress), never bars

    def fileno(self) -> int:
        return self._fd  # writes through it (faulthandler, C code) land in /dev/null

    def write(self, text: str) -> int:
        if _from_log_handler(self):
            # a console handler's record: the file handler beside it writes it to train.log
            return len(text)
        files = [
            handler
            for handler in logging.getLogger().handlers
            if isinstance(handler, logging.FileHandler) and handler.stream is not None
        ]
        if not files:
            if self._pending_size + len(text) <= self.PENDING_LIMIT:
                self._pending.append(text)
                self._pending_size += len(text)
            return len(text)
        text, self._pending, self._pending_size = "".join([*self._pending, text]), [], 0
        for handler in files:
            with handler.lock:
                try:
                    handler.stream.write(text)
                    handler.stream.flush()
                except (OSError, ValueError):  # a full disk or a closed log: as a dead terminal
                    pass
        return len(text)

    def flush(self) -> None:
        pass  # each write reaches the log file at once


def _from_log_handler(stream) -> bool:
    """Whether this write comes from a ``logging.StreamHandler`` writing to ``stream``."""
    frame = sys._getframe(2)
    for _ in range(4):  # emit -> write, possibly through one or two wrappers
        if frame is None:
            return False
        owner = frame.f_locals.get("self")
        if frame.f_code is logging.StreamHandler.emit.__code__ and owner.stream is stream:
            return True
        frame = frame.f_back
    return False


def _hold_closed_descriptors() -> None:
    """Point descriptors 0, 1 and 2, where closed, at /dev/null. Left closed, the next file
    the run opens would take the number, and whatever writes to fd 1 or 2 (a child process,
    C code, a library's ``os.write``) would write into it: a checkpoint, a results file."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:  # the lowest free number: fd itself unless a lower one is closed
                os.dup2(null, fd)  # (inheritable, as dup2 makes it)
                os.close(null)
            else:  # os.open's descriptors close on exec: children must inherit 0, 1 and 2
                os.set_inheritable(fd, True)


#: the streams closed when the command's first process started ("stdout,stderr"): the worker
#: processes of a parallel sweep (joblib) inherit /dev/null in their place, and read this to
#: write to their job's train.log too (``inherit_closed_output``, called at each job's start)
CLOSED_OUTPUT = "LENGEN_CLOSED_OUTPUT"


def outlive_closed_output() -> None:
    """stdout and stderr that survive their reader going away (``_OutlivesItsReader``), or
    that were closed when the process started (``_ToRunLog``: the run's train.log)."""
    _hold_closed_descriptors()
    if sys.stdin is None:  # libraries ask stdin whether it is a terminal
        sys.stdin = open(os.devnull)  # noqa: SIM115 - the process's stdin, open until exit
    inherit_closed_output()
    closed = []
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if stream is None:
            stream = _ToRunLog(fd)
            setattr(sys, name, stream)
        if isinstance(stream, _ToRunLog):
            closed.append(name)
        elif not isinstance(stream, _OutlivesItsReader):
            setattr(sys, name, _OutlivesItsReader(stream))
    if closed:
        os.environ[CLOSED_OUTPUT] = ",".join(closed)
    else:  # a process with streams of its own (a test's train.py, its output piped) is not one
        os.environ.pop(CLOSED_OUTPUT, None)


def inherit_closed_output() -> None:
    """In a worker of a sweep whose streams were closed (``CLOSED_OUTPUT``): the /dev/null it
    inherited in their place becomes a ``_ToRunLog`` too. Anything else is left alone."""
    inherited = os.environ.get(CLOSED_OUTPUT, "").split(",")
    for name, fd in (("stdout", 1), ("stderr", 2)):
        stream = getattr(sys, name)
        if name in inherited and not isinstance(stream, _ToRunLog) and _is_null(fd):
            setattr(sys, name, _ToRunLog(fd))


def _is_null(fd: int) -> bool:
    """Whether ``fd`` is /dev/null (what a closed stream's heir inherits)."""
    try:
        found, null = os.fstat(fd), os.stat(os.devnull)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (null.st_dev, null.st_ino)
