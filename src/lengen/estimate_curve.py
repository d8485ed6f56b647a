"""A time read off this machine's calibration entries at a size: between measured sizes, past
them, and for a mechanism measured at a few sizes only (``lengen.estimate``)."""

from __future__ import annotations

import math


def interpolate(observations: list, flops: float) -> float | None:
    """Seconds at ``flops`` from measured (flops, seconds, …) entries: the fastest of those
    within 10% (scaled to ``flops``): what the machine does when nothing else runs, since runs
    timed beside other work (a test suite, a parallel sweep) measure that work too, many times
    over, and a median of such times once said 7m41s for a run that took 20 s; else between the
    two nearest around it, linear in log-log; above every one, the largest's time plus the FLOPs
    beyond it at the fastest rate measured (scaling the largest would multiply whatever slowed
    it, load or overheads, by the size ratio); below every one, the smallest's time (a floor:
    small sizes are bound by overheads, not FLOPs). None without observations."""
    fastest: dict[float, float] = {}  # each size measured: its fastest time (see above)
    for f, s, *_ in observations:
        if f > 0 and s > 0:
            fastest[float(f)] = min(float(s), fastest.get(float(f), math.inf))
    pairs = sorted(fastest.items())
    if not pairs or flops <= 0:
        return None
    near = [s * flops / f for f, s in pairs if abs(f / flops - 1) <= 0.1]
    if near:
        return min(near)
    below = [p for p in pairs if p[0] < flops]
    above = [p for p in pairs if p[0] > flops]
    if below and above:
        (f0, s0), (f1, s1) = below[-1], above[0]
        weight = math.log(flops / f0) / math.log(f1 / f0)
        return math.exp(math.log(s0) + weight * (math.log(s1) - math.log(s0)))
    if below:
        f0, s0 = below[-1]
        rate = max(f / s for f, s in pairs)  # FLOPs a second
        return s0 + (flops - f0) / rate
    return above[0][1]


def beside(own: list, general: list, flops: float) -> float | None:
    """Seconds at ``flops`` from a mechanism's own entries, read along the FLOPs-only curve
    past their largest size: a mechanism measured only at small sizes (a test's evaluation,
    bound by overheads) extrapolated at its own fastest rate once estimated a 3-minute
    evaluation at 1 h 57 min and refused it. Past the largest own size F, the time is own(F) ×
    general(flops) / general(F): the mechanism's cost relative to the FLOPs-only entries at F,
    carried to ``flops``. Within the own entries' range, or without FLOPs-only entries past F,
    ``interpolate`` of the own entries."""
    sizes = [float(f) for f, s, *_ in own if f > 0 and s > 0]
    top = max(sizes, default=0.0)
    if not top or flops <= top * 1.1:
        return interpolate(own, flops)
    reach = [f for f, s, *_ in general if f > 0 and s > 0 and f > top * 1.1]
    at_top, there = interpolate(general, top), interpolate(general, flops)
    if not reach or not at_top or there is None:
        return interpolate(own, flops)
    return interpolate(own, top) * there / at_top
