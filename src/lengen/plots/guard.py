"""The one guard every figure of a run goes through: a figure that cannot be drawn (a full
disk, out of memory, a backend error) costs that figure, never the results.

``lengen.train.evaluate_and_write`` opens ``figures_noted()`` around evaluation and the
extrapolation plot; every figure drawn inside (extrapolation, accuracy by answer position, by
depth, loss by position, attention diagnostics) is drawn by ``draw``, which on a failure notes
one line in the list ``figures_noted`` yields (results.json's ``warnings``), prints it on
stderr and goes on. Outside ``figures_noted`` (``scripts/plot.py``, a notebook) a figure is the
whole job, and its failure is raised as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

#: the notes of the run whose figures are being drawn now; None outside ``figures_noted``
_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "lengen_figure_notes", default=None
)


@contextlib.contextmanager
def figures_noted() -> Iterator[list[str]]:
    """While open, ``draw`` notes a figure's failure in the yielded list instead of raising."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def draw(name: str, plot: Callable[..., list[Path]], *args, **kwargs) -> list[Path]:
    """``plot(*args, **kwargs)`` -> the paths it wrote; ``name`` (the figure's file or stem)
    names it in the note. Inside ``figures_noted`` any failure is noted and [] returned."""
    notes = _NOTES.get()
    if notes is None:
        return plot(*args, **kwargs)
    try:
        return plot(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 - a figure is optional; the measurements are not
        note = f"figure {name} not written ({type(error).__name__}: {error})"
        notes.append(note)
        # not "the results are written": a disk that stays full fails them next (DF03)
        print(f"note: {note}; the run goes on without it", file=sys.stderr)
        return []
