"""A damaged copy of lengen's timing calibration (hostile trial cases ES09, ES09b).

``damage_timings.py SRC DST nan-inf|huge``: every number of SRC's calibration replaced, NaN
for start-up times and inf for the rest (``nan-inf``) or 1e300 s (``huge``), written to DST.
"""

from __future__ import annotations

import json
import sys


def damage(node, how: str, key: str = ""):
    """``node`` with every number replaced as ``how`` says (``key``: the name it sits under)."""
    if isinstance(node, dict):
        return {k: damage(v, how, k) for k, v in node.items()}
    if isinstance(node, list):
        return [damage(v, how, key) for v in node]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        if how == "huge":
            return 1e300
        return float("nan") if "start" in key else float("inf")
    return node


if __name__ == "__main__":
    src, dst, how = sys.argv[1:4]
    with open(src) as f:
        data = json.load(f)
    with open(dst, "w") as f:
        json.dump(damage(data, how), f)
