"""Small argument checks shared by components; each error names the user's config key."""

from __future__ import annotations


def positive_int(key: str, value, minimum: int = 1) -> int:
    """Return value if it is an integer >= minimum (bools rejected), else raise ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{key} must be {kind}, got {value!r}")
    return value


class TrainingDiverged(RuntimeError):
    """The training loss stopped being finite; the message's first line names the step."""
