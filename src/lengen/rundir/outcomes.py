"""A pack job's members after a fault of the whole pack (``lengen.cli.train_pack_main``): which
left the pack on their own before it (a full disk: their failed.json written during the job)
and what each one's outcome is, so the sweep's report states every member truthfully."""

from __future__ import annotations

import json

from lengen.rundir.rules import FAILED


def failed_stamp(directory) -> int | None:
    """When the run directory's failed.json was written (ns), None where it has none."""
    try:
        return (directory.path / FAILED).stat().st_mtime_ns
    except OSError:
        return None


def pack_outcomes(directories, done_before, left, said: str) -> list[str]:
    """Each member's outcome after a fault of the whole pack (``said``): a member that
    finished before it keeps its results and says so; one that left the pack on its own
    (``left``: a full disk) says its own failure."""
    outcomes = []
    for directory, before, gone in zip(directories, done_before, left, strict=True):
        if directory.results.is_file():
            outcomes.append("finished earlier" if before else "trained")
        elif gone:
            try:
                own = json.loads((directory.path / FAILED).read_text())["error"]
            except (OSError, ValueError, KeyError, TypeError):
                own = "left the pack (its failed.json unreadable)"
            outcomes.append(f"failed: {own}")
        else:
            outcomes.append(said)
    return outcomes
