"""The ground floor: the errors and outcomes every layer may raise, and small argument checks.

Every message's first line names the user's config key and what is allowed; the entry points
print it on one line and exit with the status documented in ``lengen.cli``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


class ConfigError(ValueError):
    """Bad user input; the message's first line names the key and the allowed values."""


class TrainingDiverged(RuntimeError):
    """The training loss stopped being finite; the message's first line names the step."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (full disk, read-only folder); the previous one is
    kept. The message's first line names both."""


class EvaluationOutOfMemory(RuntimeError):
    """An evaluation length does not fit in memory even one instance at a time; ``rows`` are
    the lengths measured before it (written to the results all the same)."""

    def __init__(self, message: str, rows: list[dict]):
        super().__init__(message)
        self.rows = rows


class Preempted(Exception):  # noqa: N818 - an outcome, not a bug
    """A signal stopped training; ``checkpoint`` holds the state after ``step`` steps."""

    def __init__(self, signum: int, step: int, checkpoint: Path):
        import signal

        self.signum = signum
        self.step = step
        self.checkpoint = checkpoint
        super().__init__(
            f"interrupted by {signal.Signals(signum).name} at step {step}: state saved to "
            f"{checkpoint}; continue with resume=true and the same hydra.run.dir"
        )


def positive_int(key: str, value, minimum: int = 1) -> int:
    """Return value if it is an integer >= minimum (bools rejected), else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{key} must be {kind}, got {value!r}")
    return value


def check_heads(d_model: int, n_heads: int) -> int:
    """The head dimension d_model / n_heads; the one check that the two sizes fit."""
    if d_model % n_heads:
        raise ValueError(
            f"model.d_model must be divisible by model.n_heads, got {d_model} and {n_heads}"
        )
    return d_model // n_heads


def check_batch_split(batch_size: int, processes: int) -> None:
    """``data.batch_size`` is the global batch: every process must get an equal share."""
    if batch_size % processes:
        raise ValueError(
            f"data.batch_size={batch_size} is the global batch and must be divisible by the "
            f"{processes} processes (trainer.devices × trainer.num_nodes)"
        )


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
