"""Small argument checks shared by the typed configs and the modules that consume them.

The errors every layer raises live in ``lengen.errors`` (imported from here too, by the many
modules written before the split); the process's signals and output streams in
``lengen.process``.
"""

from __future__ import annotations

from lengen.errors import (  # noqa: F401 - the errors' older address, still imported from here
    CheckpointWriteError,
    ConfigError,
    EvaluationOutOfMemory,
    Preempted,
    TrainingDiverged,
)

#: the longest value a message repeats whole: a refusal is one line, and a 100 KB value
#: echoed made a 100 KB line (R11)
SHOWN_CHARACTERS = 80


def shown(value) -> str:
    """``repr(value)`` for a message, cut to ``SHOWN_CHARACTERS`` with its length said."""
    text = repr(value)
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[: SHOWN_CHARACTERS - 1]}… ({len(text):,} characters)"


def positive_int(key: str, value, minimum: int = 1) -> int:
    """Return value if it is an integer >= minimum (bools rejected), else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{key} must be {kind}, got {shown(value)}")
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
