"""Which entries of a machine's calibration file (``lengen.estimate``) are measurements:
damaged ones (NaN, inf, negative, absurd) are left out when the file is read and dropped
when it is next written."""

from __future__ import annotations

import math

#: a calibration entry past these is damage, not a measurement (a step or start-up of over
#: 100 days, 10^30 FLOPs), as is NaN, inf or a negative number: such entries made the line
#: "estimate: none (OverflowError …)" (ES09, ES09b); they are left out, and the line says so
MAX_SECONDS = 1e7
MAX_FLOPS = 1e30
#: and a speed past an exaFLOP a second (a time of 1e-300 s)
MAX_FLOPS_PER_SECOND = 1e18


def sound_entries(calibration: dict) -> tuple[dict, int]:
    """(the calibration without damaged entries, how many were left out): an entry is a list
    of numbers, each finite and >= 0, its time within ``MAX_SECONDS``, its FLOPs within
    ``MAX_FLOPS`` and its speed within ``MAX_FLOPS_PER_SECOND`` (``start``: [seconds, contention], or older files' bare seconds; the others
    [flops, seconds, contention]); a kind that is no list is left out whole."""
    kept, damaged = {}, 0
    for kind, entries in calibration.items():
        if not isinstance(entries, list):
            damaged += 1
            continue
        sound = [e for e in entries if sound_entry(kind, e)]
        damaged += len(entries) - len(sound)
        kept[kind] = sound
    return kept, damaged


def sound_entry(kind: str, entry) -> bool:
    values = entry if isinstance(entry, list) else [entry]
    numbers = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf
        for v in values
    )
    if not numbers or not values:
        return False
    if kind == "start":
        return values[0] <= MAX_SECONDS
    if len(values) < 2 or values[0] > MAX_FLOPS or values[1] > MAX_SECONDS:
        return False
    return values[0] <= MAX_FLOPS_PER_SECOND * values[1]


def upgraded(data):
    """A calibration file's contents in version 4 (``lengen.estimate.FORMAT``): version 3's entries as they were, but the
    evaluation entries of looped mechanisms (``… · loops=…``, ``… · loop_rule=…``), measured
    when their FLOPs counted one pass, which would now make those estimates many times too long
    (the shipped confidence rule's evaluation: 275 passes). Anything else unchanged."""
    if not isinstance(data, dict) or data.get("version") != 3:
        return data
    machines = data.get("machines")
    if isinstance(machines, dict):
        for machine in machines.values():
            if isinstance(machine, dict):
                for kind in [k for k in machine if k.startswith("eval ") and _looped_kind(k)]:
                    del machine[kind]
    return {**data, "version": 4}  # lengen.estimate.FORMAT (imported from here: no cycle)


def _looped_kind(kind: str) -> bool:
    return any(part.startswith(("loops=", "loop_rule=")) for part in kind.split(" · ")[1:])
