"""The errors and outcomes every layer may raise: bad user input, a diverged run, a checkpoint
or results file that could not be written, an evaluation that does not fit in memory, a
preemption.

Every message's first line names the user's config key (or the step, or the file) and what is
allowed; the entry points print it on one line and exit with the status documented in
``lengen.cli``.
"""

from __future__ import annotations

from pathlib import Path


class ConfigError(ValueError):
    """Bad user input; the message's first line names the key and the allowed values."""


class RunDirectoryWriteError(ConfigError):
    """The run directory's first files (its lock, config.yaml) could not be written (a disk
    with no room, a folder made read-only since the check): nothing has run, so it is refused
    as bad input is (exit 2, the folder this command made removed); a pack's member whose
    directory it is fails alone (``lengen.pack.engine``)."""


class TrainingDiverged(RuntimeError):
    """The training loss stopped being finite; the message's first line names the step."""


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written (full disk, read-only folder); the previous one is
    kept. The message's first line names both."""


class ResultsWriteError(RuntimeError):
    """The results file could not be written (a disk that stays full, a read-only folder)
    after the evaluation finished; the checkpoint is kept. The message's one line names the
    file and how to get the results once there is room."""


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
