"""The context-extension arms side by side (issue #48; docs/reproductions.md (j)): the
training-free arms of a trained RoPE configuration (``extension_rows``: its own evaluation as
``none``, each eval.py tag's) and, beside them, the DroPE recalibrations of its runs, which are
trained runs of their own (``train.py init_from=<RoPE run> pe=nope``, results.json
``init_from.route = "drope"``) and so a configuration of their own in the summary. No torch here.
"""

from __future__ import annotations

import json
from pathlib import Path

from lengen.aggregate.extension import extension_rows
from lengen.aggregate.stats import Summary

#: the method name a DroPE recalibration's rows carry, after every training-free arm
DROPE = "DroPE"


def drope_route(run_dir) -> dict | None:
    """results.json's ``init_from`` of a run when it is a DroPE recalibration, else None."""
    try:
        results = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return None
    start = results.get("init_from")
    return start if isinstance(start, dict) and start.get("route") == "drope" else None


def arms_rows(summary: Summary) -> list[dict]:
    """``extension_rows(summary)`` and, after them, the summary's rows of DroPE configurations
    as method ``DroPE``, tied to the trained configuration they recalibrate (``base_hash``: the
    configuration hash of the base runs, where those runs are in the summary; else the DroPE
    configuration's own). Rows keep every summary.csv column."""
    rows = extension_rows(summary)
    hash_of = {run.name: run.config_hash[:10] for run in summary.aggregated}
    # the base run by its directory's name (the path itself changes when a sweep is moved or
    # committed): init_from's path's last part, or the run id its checkpoint stored
    base_of_dir = {run.path.name: run.config_hash[:10] for run in summary.aggregated}
    drope: dict[str, str] = {}  # DroPE configuration hash -> its base's
    for run in summary.aggregated:
        start = drope_route(run.path)
        if start is not None:
            own = hash_of[run.name]
            names = (Path(str(start.get("path", ""))).name, start.get("run_id"))
            drope[own] = next((base_of_dir[n] for n in names if n in base_of_dir), own)
    last = 1 + max((row["_order"][0] for row in rows), default=0)
    rows += [{**row, "method": DROPE, "tag": None, "base_hash": drope[row["config_hash"]],
              "_order": (last, 0.0, "")}
             for row in summary.rows if row["config_hash"] in drope]  # fmt: skip
    return rows
