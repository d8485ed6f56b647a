"""A damaged copy of lengen's timing calibration (hostile trial cases ES09, ES09b).

``damage_timings.py SRC DST nan-inf|huge``: SRC's calibration (``lengen.estimate``'s format,
its ``version`` kept so that it is read, not discarded) with a step time and a start-up time
added to every machine's entries where a short fixture run measured none, then every time
replaced: NaN start-up and inf step and evaluation times (``nan-inf``), or 1e300 s (``huge``).
"""

from __future__ import annotations

import json
import sys


def damage(calibration: dict, how: str) -> dict:
    """``calibration`` damaged as ``how`` says (module docstring)."""
    bad = {"huge": (1e300, 1e300), "nan-inf": (float("nan"), float("inf"))}[how]
    start_bad, time_bad = bad
    for entries in calibration.get("machines", {}).values():
        flops = next((e[0][0] for e in entries.values() if e), 1e8)
        entries.setdefault("train", [[flops, 0.1, 1.0]])
        entries.setdefault("start", [[3.0, 1.0]])
        for kind, rows in entries.items():
            for row in rows:  # [size, seconds, …] or, for start-up, [seconds, …]
                where = 0 if kind == "start" else 1
                row[where] = start_bad if kind == "start" else time_bad
    return calibration


if __name__ == "__main__":
    src, dst, how = sys.argv[1:4]
    with open(src) as f:
        data = json.load(f)
    with open(dst, "w") as f:
        json.dump(damage(data, how), f)
