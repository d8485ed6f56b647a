"""Which log records reach a run's output: Hydra's and Lightning's routine INFO lines ("GPU
available: False", "Initializing distributed: …", "Launching 2 jobs locally", "#0 : pe=rope",
"`Trainer.fit` stopped", matplotlib's font cache) are kept out of a log that is not a terminal
(stdout or stderr sent to a file or pipe, and train.log), where they would be mixed into the
progress lines; a terminal still shows them, and ``LENGEN_VERBOSE_LOGS=1`` lets them through
everywhere. Warnings and errors of every logger always pass.

Wired in configs/hydra/default.yaml: the filters of Hydra's own log handlers (``hydra_logging``,
the sweep's launch lines) and of the job's (``job_logging``: the console and train.log), built
by ``logging.config.dictConfig`` from there. No torch here: logging is set up before the
command line is checked.
"""

from __future__ import annotations

import logging
import os
import sys

#: the switch that lets every record through (docs/config.md, "Logs")
VERBOSE_VARIABLE = "LENGEN_VERBOSE_LOGS"
#: loggers (and their children) whose records below WARNING are routine
ROUTINE = ("hydra", "hydra_plugins", "pytorch_lightning", "lightning", "lightning_fabric")
ROUTINE += ("matplotlib",)


def verbose() -> bool:
    """Whether ``LENGEN_VERBOSE_LOGS`` asks for every record (1, true, yes, on)."""
    return os.environ.get(VERBOSE_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def routine(record: logging.LogRecord) -> bool:
    """A record below WARNING from one of the ``ROUTINE`` loggers."""
    name = record.name
    return record.levelno < logging.WARNING and any(
        name == prefix or name.startswith(prefix + ".") for prefix in ROUTINE
    )


class RoutineFilter(logging.Filter):
    """A handler's filter dropping routine records (:func:`routine`) unless the handler writes
    to a terminal or ``LENGEN_VERBOSE_LOGS`` is set; both are read once, when logging is set up.

    ``stream``: "stdout" or "stderr" for a console handler (a terminal keeps the records), None
    for a file (never a terminal)."""

    def __init__(self, stream: str | None = None):
        super().__init__()
        target = getattr(sys, stream, None) if stream else None
        self.keep_all = verbose() or _is_terminal(target)

    def filter(self, record: logging.LogRecord) -> bool:
        return self.keep_all or not routine(record)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError):  # a closed stream is no terminal
        return False
