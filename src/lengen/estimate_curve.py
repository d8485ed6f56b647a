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
    it, load or overheads, by the size ratio); below every one, the smallest's overhead plus the
    FLOPs at the fastest rate: its time less the FLOPs it has beyond ``flops`` at that rate. A
    smallest entry that runs far below the fastest rate is bound by overheads (a test-sized
    run) and stays a floor; one that runs at it is bound by FLOPs, and a model 8x smaller takes
    about 1/8 of its time (the former floor said 0.099 s a step for a 1-layer model that took
    0.016 s: 33 min for 6). With one size measured, nothing tells its overhead from its FLOPs:
    its time is the floor. None without observations."""
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
    f1, s1 = above[0]
    if len(pairs) == 1:
        return s1
    rate = max(f / s for f, s in pairs)  # FLOPs a second: s1 - f1 / rate >= 0 is overhead
    return s1 - (f1 - flops) / rate


def beside(own: list, general: list, flops: float) -> float | None:
    """Seconds at ``flops`` from a mechanism's own entries, read along the FLOPs-only curve
    past their largest size and below their smallest: a mechanism measured only at small sizes
    (a test's evaluation, bound by overheads) extrapolated at its own fastest rate once
    estimated a 3-minute evaluation at 1 h 57 min and refused it, and one measured only at
    4 layers read a 1-layer model at the 4-layer runs' floor, 5x its time. Past the largest own
    size F (or below the smallest), the time is own(F) × general(flops) / general(F): the
    mechanism's cost relative to the FLOPs-only entries at F, carried to ``flops``. Within the
    own entries' range, or without FLOPs-only entries beyond F on that side, ``interpolate`` of
    the own entries (below every measured size: its overhead rule)."""
    sizes = [float(f) for f, s, *_ in own if f > 0 and s > 0]
    if not sizes:
        return interpolate(own, flops)
    top, bottom = max(sizes), min(sizes)
    if flops > top * 1.1:
        edge, past = top, lambda f: f > top * 1.1
    elif flops < bottom / 1.1:
        edge, past = bottom, lambda f: f < bottom / 1.1
    else:
        return interpolate(own, flops)
    reach = [f for f, s, *_ in general if f > 0 and s > 0 and past(f)]
    at_edge, there = interpolate(general, edge), interpolate(general, flops)
    if not reach or not at_edge or there is None:
        return interpolate(own, flops)
    return interpolate(own, edge) * there / at_edge
