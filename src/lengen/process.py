"""Process plumbing: the preemption signals a process remembers instead of dying, and output
streams that outlive their reader. Installed by the entry points at process start."""

from __future__ import annotations

import os
import signal

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


class _OutlivesItsReader:
    """A text stream that keeps the process going when whoever reads it goes away (``| head``,
    a closed terminal or SSH session): the first BrokenPipeError points the stream's file
    descriptor at /dev/null, so later writes, flushes and the interpreter's own flush at exit
    succeed. A run must not crash (and record a failure) for want of a reader."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_null()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_null()

    def _to_null(self) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, self._stream.fileno())
        os.close(null)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def outlive_closed_output() -> None:
    """stdout and stderr that survive their reader going away (``_OutlivesItsReader``)."""
    import sys

    if not isinstance(sys.stdout, _OutlivesItsReader):
        sys.stdout = _OutlivesItsReader(sys.stdout)
    if not isinstance(sys.stderr, _OutlivesItsReader):
        sys.stderr = _OutlivesItsReader(sys.stderr)
